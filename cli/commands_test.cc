// The `crest` command tree as main.cc builds it: which command lines parse
// (the flags scripts and tests/ use), which are usage errors (exit 2), and
// the commands that fail on their flags before any call (exit 1).
#include "cli/commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/command_line.h"

namespace crest::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Parse returns ParseCommandLine's answer (nullopt: parsed, go on) on a
// fresh `crest` app (flags bound by a parse stay set).
class CrestCommandLine : public ::testing::Test {
 protected:
  std::optional<int> Parse(std::vector<std::string> args) {
    action_ = nullptr;
    app_ = std::make_unique<CLI::App>("crest", "crest");
    app_->require_subcommand(1);
    AddNodeCommands(*app_, &action_);
    AddCampaignCommands(*app_, &action_);
    AddHealthCommand(*app_, &action_);
    args.insert(args.begin(), "crest");
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (std::string& a : args) argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    std::optional<int> rc = ParseCommandLine(*app_, static_cast<int>(argv.size()), argv.data());
    stderr_ = ::testing::internal::GetCapturedStderr();
    return rc;
  }

  // Parses, then runs the chosen command; its stderr in stderr_.
  int Run(std::vector<std::string> args) {
    if (std::optional<int> rc = Parse(std::move(args))) return *rc;
    if (!action_) return -1;
    ::testing::internal::CaptureStderr();
    int rc = action_();
    stderr_ = ::testing::internal::GetCapturedStderr();
    return rc;
  }

  std::unique_ptr<CLI::App> app_;
  Action action_;
  std::string stderr_;
};

TEST_F(CrestCommandLine, TheFlagsScriptsUseParse) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"node", "info", "--agent", "a:1", "--insecure", "--output", "json"},
           {"node", "start", "--agent", "a:1", "--insecure", "--slot", "2", "--set",
            "maxBatchSize=300", "--set", "supportSelectBatch=true", "--pin", "odd-numa",
            "--replace", "--start-timeout", "60", "--stream-log", "--timeout", "0"},
           {"node", "bench", "--agent", "a:1", "--insecure", "--Concurrency", "4", "--RequestCount",
            "8", "--MaxOutputLen", "8", "--output", "json"},
           {"node", "stop", "--agent", "a:1", "--grace", "5", "--tls-server-name", "node-1"},
           {"node", "tune", "--agent", "a:1", "--governor", "performance", "--thp", "always"},
           {"campaign", "submit", "-f", "c.yaml", "--controller", "c:1", "--output", "json"},
           {"campaign", "list", "--controller", "c:1", "--insecure", "--timeout", "3"},
           {"campaign", "watch", "c1", "--controller", "c:1", "--timeout", "86400"},
           {"campaign", "report", "c1", "--controller", "c:1", "--format", "html", "--practice",
            "c2", "-o", "r.html"},
           {"campaign", "agents", "--controller", "c:1", "--tls-cert", "a", "--tls-key", "b",
            "--tls-ca", "c"},
           {"health", "--address=127.0.0.1:1", "--tls-server-name=x", "--timeout=3"},
       }) {
    EXPECT_EQ(Parse(args), std::nullopt) << args[0] << " " << args[1] << ": " << stderr_;
    EXPECT_TRUE(action_) << args[0] << " " << args[1];
  }
}

TEST_F(CrestCommandLine, UsageErrorsExitTwoOnOneLine) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"node", "info", "--insecure"},                            // no --agent
           {"node", "status", "--agent", "a:1", "--output", "yaml"},  // --output checked at parse
           {"campaign", "list", "--controller", "c:1", "--output", "yaml"},
           {"node", "info", "--agent", "a:1", "--slot", "1"},  // info is of the node
           {"node", "info", "--agent", "a:1", "--timeout", "-1"},
           {"campaign", "watch", "c1", "--controller", "c:1", "--timeout", "soon"},
           {"campaign", "watch", "--controller", "c:1"},  // no ID
           {"campaign", "report", "c1", "--controller", "c:1", "--format", "xml"},
           {"campaign", "watch", "c1", "--controller", "c:1", "--output", "json"},
           {"health"},
       }) {
    EXPECT_EQ(Parse(args), 2) << args[0] << " " << args[1];
    EXPECT_THAT(stderr_, StartsWith("crest: ")) << stderr_;
    EXPECT_EQ(std::count(stderr_.begin(), stderr_.end(), '\n'), 1) << stderr_;
  }
  Parse({"node", "status", "--agent", "a:1", "--output", "yaml"});
  EXPECT_THAT(stderr_, HasSubstr("--output \"yaml\": expected text or json"));
  Parse({"campaign", "status", "c1"});
  EXPECT_THAT(stderr_, HasSubstr("--controller is required"));
}

TEST_F(CrestCommandLine, BadValuesFailBeforeAnyCallWithExitOne) {
  // 127.0.0.1:1 is never dialled: each command stops at its flags.
  EXPECT_EQ(Run({"node", "start", "--agent", "127.0.0.1:1", "--insecure", "--pin", "evens"}), 1);
  EXPECT_THAT(stderr_, StartsWith("crest: --pin \"evens\": expected odd-numa"));
  EXPECT_EQ(Run({"node", "start", "--agent", "127.0.0.1:1", "--insecure", "--set", "rm"}), 1);
  EXPECT_EQ(stderr_, "crest: --set \"rm\": expected KEY=VALUE\n");
  EXPECT_EQ(Run({"node", "tune", "--agent", "127.0.0.1:1", "--insecure"}), 1);
  EXPECT_EQ(stderr_, "crest: tune: give --governor and/or --thp\n");
  EXPECT_EQ(Run({"node", "stop", "--agent", "127.0.0.1:1", "--insecure", "--grace", "-1"}), 1);
  EXPECT_EQ(stderr_, "crest: --grace: expected seconds >= 0\n");
  EXPECT_EQ(Run({"node", "bench", "--agent", "127.0.0.1:1", "--insecure", "--api", "tgi"}), 1);
  EXPECT_THAT(stderr_, StartsWith("crest: --api \"tgi\""));
  EXPECT_EQ(Run({"node", "info", "--agent", "127.0.0.1:1", "--tls-cert", "/nonexistent"}), 1);
  EXPECT_THAT(stderr_, HasSubstr("TLS needs all of --tls-cert, --tls-key and --tls-ca"));
  EXPECT_EQ(Run({"campaign", "report", "c1", "--controller", "127.0.0.1:1", "--insecure",
                 "--format", "json", "--practice", "c2"}),
            1);
  EXPECT_THAT(stderr_, HasSubstr("needs --format html, not json"));
  EXPECT_EQ(Run({"campaign", "submit", "-f", "/nonexistent/c.yaml", "--controller", "127.0.0.1:1",
                 "--insecure"}),
            1);
  EXPECT_THAT(stderr_, StartsWith("crest: -f /nonexistent/c.yaml: "));
}

}  // namespace
}  // namespace crest::cli
