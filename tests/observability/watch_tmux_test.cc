// `crest campaign watch` on a real terminal: tmux (Debian package) runs a
// shell in a detached pane, the test types the command with send-keys and
// reads the screen with capture-pane. The live view must draw progress bars
// while the campaign runs and redraw them in place (one header on screen,
// never a scrolling log), also on a pane narrower than its lines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "tests/observability/stack.h"

namespace crest::observability {
namespace {

using ::testing::HasSubstr;

class Tmux {
 public:
  Tmux(std::string tmux, std::string socket) : tmux_(std::move(tmux)), socket_(std::move(socket)) {}
  ~Tmux() { Run({"kill-server"}); }

  e2e::CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> all = {"TERM=xterm-256color", tmux_, "-S", socket_, "-f", "/dev/null"};
    all.insert(all.end(), args.begin(), args.end());
    return e2e::RunBinary("/usr/bin/env", all);
  }
  std::string Capture(const std::string& pane) {
    return Run({"capture-pane", "-p", "-t", pane}).output;
  }

  // Polls the pane until `done` accepts its screen (or 40 s pass).
  template <typename Done>
  std::string WaitFor(const std::string& pane, Done done) {
    const absl::Time end = absl::Now() + absl::Seconds(40);
    std::string screen = Capture(pane);
    while (!done(screen) && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(50));  // between polls, not a synchronisation
      screen = Capture(pane);
    }
    return screen;
  }

 private:
  std::string tmux_;
  std::string socket_;
};

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(WatchInTmux, DrawsProgressBarsInPlace) {
  const std::string tmux_binary = FindOnPath("tmux");
  if (tmux_binary.empty()) {
    GTEST_SKIP()
        << "tmux not installed: apt-get install tmux (listed in scripts/debian-packages.txt)";
  }
  Stack stack;
  ASSERT_TRUE(stack.StartController()) << stack.error();
  // Slower simulated time: trials take about a second each, so the view is
  // seen mid-campaign.
  ASSERT_TRUE(stack.StartAgent("node-1", "LLaMa3-8B", 40)) << stack.error();
  Tmux tmux(tmux_binary, stack.dir().File("tmux.sock"));
  ASSERT_EQ(tmux.Run({"new-session", "-d", "-s", "wide", "-x", "120", "-y", "20", "/bin/sh"}).code,
            0);
  ASSERT_EQ(tmux.Run({"new-session", "-d", "-s", "narrow", "-x", "44", "-y", "20", "/bin/sh"}).code,
            0);
  const std::string id = stack.Submit(R"(name: watched
models: [{name: LLaMa3-8B}]
search: {range: [100, 400], initial: 100, tolerance: 0.5}
client: {request_count: 400, max_output_len: 64}
)");
  ASSERT_EQ(id, "c1") << stack.error();
  const std::string command =
      absl::StrCat("printf '\\033[H\\033[2J'; ", stack.CliCommand({"campaign", "watch", id}),
                   "; echo WATCH-EXIT=$?");
  for (const char* pane : {"wide", "narrow"}) {
    // Typed once the shell shows its prompt.
    std::string prompt = tmux.WaitFor(pane, [](const std::string& s) {
      return absl::StrContains(s, "$") || absl::StrContains(s, "#");
    });
    ASSERT_TRUE(absl::StrContains(prompt, "$") || absl::StrContains(prompt, "#")) << prompt;
    ASSERT_EQ(tmux.Run({"send-keys", "-t", pane, command, "Enter"}).code, 0);
  }

  // While it runs: a partly filled bar under the running campaign's header.
  std::string running = tmux.WaitFor("wide", [](const std::string& s) {
    return absl::StrContains(s, "campaign c1 (watched): running") && absl::StrContains(s, "[#") &&
           absl::StrContains(s, "-]");
  });
  EXPECT_THAT(running, HasSubstr("campaign c1 (watched): running")) << running;
  EXPECT_THAT(running, ::testing::ContainsRegex(R"(LLaMa3-8B +\[#+-+\] [0-9]+/)")) << running;

  // At the end: the same two lines redrawn in place (a line wrapped by the
  // narrow pane would throw off the cursor-up count and repeat the header),
  // the bar full.
  for (const char* pane : {"wide", "narrow"}) {
    std::string screen = tmux.WaitFor(pane, [](const std::string& s) {
      return std::regex_search(s, std::regex("WATCH-EXIT=[0-9]"));
    });
    EXPECT_THAT(screen, HasSubstr("WATCH-EXIT=0")) << pane << ":\n" << screen;
    EXPECT_EQ(Occurrences(screen, "campaign c1 (wat"), 1) << pane << ":\n" << screen;
    EXPECT_EQ(Occurrences(screen, "LLaMa3-8B"), 1) << pane << ":\n" << screen;
    EXPECT_THAT(screen, HasSubstr("[####################]")) << pane << ":\n" << screen;
  }
  EXPECT_THAT(tmux.Capture("wide"), HasSubstr("campaign c1 (watched): succeeded"));
}

}  // namespace
}  // namespace crest::observability
