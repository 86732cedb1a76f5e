// Multi-host integration: one crest-controller and three crest-agent "hosts",
// each in its own network namespace with its own address, state dir, fake
// sysfs, mindie-sim and certificate (scripts/make-certs), joined by a bridge
// in a hub namespace. A campaign runs across them over mutual TLS; mid-trial
// one host's link goes down (`ip link set eth0 down`). Checked: the
// interrupted trial is re-run on another host, the campaign completes with
// every point measured exactly once, and when the link comes back the cut
// host's governor, THP and config.json are as they were before the campaign.
// Needs CAP_NET_ADMIN (root in CI); skips with the reason elsewhere. Touches
// only the namespaces it creates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/e2e_harness.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kStartup = absl::Seconds(30);
constexpr absl::Duration kEvent = absl::Seconds(60);
// The cut agent retries the controller with back-off up to 30 s (x1.5 jitter).
constexpr absl::Duration kReturn = absl::Seconds(120);
constexpr int kAgents = 3;

std::string IpTool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

class NetnsCampaign : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    ip_ = IpTool();
    if (ip_.empty()) GTEST_SKIP() << "no `ip` (iproute2): cannot build network namespaces";
    prefix_ = absl::StrCat("crest", getpid(), "-");
    // The one way to know whether namespaces are permitted here: try.
    CommandResult probe = RunArgv({ip_, "netns", "add", Ns("hub")});
    if (probe.code != 0) {
      GTEST_SKIP() << "network namespaces not permitted here (needs root or CAP_NET_ADMIN): "
                   << "`ip netns add` failed: " << probe.output;
    }
    namespaces_.push_back(Ns("hub"));
    // A kernel or container without bridge or veth support cannot host the
    // topology: that is this machine's limit, not a Crest failure.
    std::string refused = TryIp({"-n", Ns("hub"), "link", "add", "br0", "type", "bridge"});
    if (refused.empty()) refused = TryIp({"-n", Ns("hub"), "link", "set", "br0", "up"});
    if (refused.empty()) refused = AddHost("ctl", "10.77.0.1");
    for (int i = 1; i <= kAgents && refused.empty(); ++i) refused = AddHost(Node(i), Address(i));
    if (!refused.empty()) GTEST_SKIP() << "cannot build the test network here: " << refused;

    pki_ = dir_.File("pki");
    std::vector<std::string> certs = {SourceDir() + "/scripts/make-certs", pki_, "--controller-san",
                                      "10.77.0.1"};
    for (int i = 1; i <= kAgents; ++i) {
      certs.emplace_back("--agent");
      certs.push_back(absl::StrCat(Node(i), "=", Address(i)));
    }
    CommandResult made = RunArgv(certs);
    ASSERT_EQ(made.code, 0) << made.output;
  }

  void TearDown() override {
    for (auto& [name, agent] : agents_) agent->Terminate(absl::Seconds(10));
    agents_.clear();
    controller_.reset();
    KillAllChildren();
    while (!namespaces_.empty()) {  // the hub last
      RunArgv({ip_, "netns", "del", namespaces_.back()});
      namespaces_.pop_back();
    }
  }

  static std::string Node(int i) { return absl::StrCat("node-", i); }
  static std::string Address(int i) { return absl::StrCat("10.77.0.", 10 + i); }
  std::string Ns(const std::string& host) const { return prefix_ + host; }

  // Empty when `ip args` succeeded, else what failed.
  std::string TryIp(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {ip_};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = RunArgv(argv);
    if (r.code == 0) return "";
    return absl::StrCat("`ip ", absl::StrJoin(args, " "), "` exited ", r.code, ": ", r.output);
  }
  void Ip(const std::vector<std::string>& args) {
    const std::string failed = TryIp(args);
    ASSERT_TRUE(failed.empty()) << failed;
  }

  // A namespace `host` whose eth0 (address/24) is a port of the hub's bridge;
  // empty when built, else the step that failed.
  std::string AddHost(const std::string& host, const std::string& address) {
    std::string failed = TryIp({"netns", "add", Ns(host)});
    if (!failed.empty()) return failed;
    namespaces_.push_back(Ns(host));
    const std::string port = absl::StrCat("p", namespaces_.size());
    const std::vector<std::vector<std::string>> steps = {
        {"-n", Ns("hub"), "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
         Ns(host)},
        {"-n", Ns("hub"), "link", "set", port, "master", "br0", "up"},
        {"-n", Ns(host), "addr", "add", address + "/24", "dev", "eth0"},
        {"-n", Ns(host), "link", "set", "eth0", "up"},
        {"-n", Ns(host), "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      failed = TryIp(step);
      if (!failed.empty()) return failed;
    }
    return "";
  }

  std::vector<std::string> In(const std::string& host, const std::string& binary) const {
    return {ip_, "netns", "exec", Ns(host), BinDir() + "/" + binary};
  }
  std::vector<std::string> Tls(const std::string& id) const {
    return {"--tls-cert", pki_ + "/" + id + "/tls.crt", "--tls-key", pki_ + "/" + id + "/tls.key",
            "--tls-ca",   pki_ + "/" + id + "/ca.crt"};
  }

  void StartController() {
    std::vector<std::string> argv = In("ctl", "crest-controller");
    for (const char* a : {"--listen", "10.77.0.1:50051", "--heartbeat-interval", "0.5"}) {
      argv.emplace_back(a);
    }
    argv.emplace_back("--state-dir");
    argv.push_back(dir_.File("ctl"));
    for (auto& a : Tls("crest-controller")) argv.push_back(a);
    auto p = Process::StartCommand(argv, "controller");
    ASSERT_TRUE(p.ok()) << p.status();
    controller_ = std::move(*p);
    ASSERT_TRUE(controller_->WaitForLine("listening on port 50051", kStartup).ok())
        << controller_->output();
  }

  void StartAgent(int i) {
    const std::string node = Node(i);
    const std::string root = dir_.File(node);
    agent::testing::WriteFakeSysfs(root + "/sys", {});
    ASSERT_TRUE(WriteFileAtomically(root + "/agent.yaml",
                                    absl::StrCat("sim: {model: LLaMa3-8B, time_scale: 40, seed: ",
                                                 i, "}\nlabels: {model: LLaMa3-8B}\n"))
                    .ok());
    std::vector<std::string> argv = In(node, "crest-agent");
    for (const std::string& a :
         {std::string("--listen"), Address(i) + ":50052", std::string("--node-name"), node,
          std::string("--controller"), std::string("10.77.0.1:50051"), std::string("--config"),
          root + "/agent.yaml", std::string("--state-dir"), root + "/state",
          std::string("--sysfs-root"), root + "/sys"}) {
      argv.push_back(a);
    }
    for (auto& a : Tls(node)) argv.push_back(a);
    auto p = Process::StartCommand(argv, node);
    ASSERT_TRUE(p.ok()) << p.status();
    agents_[node] = std::move(*p);
    ASSERT_TRUE(agents_[node]->WaitForLine("crest-agent: listening on", kStartup).ok())
        << agents_[node]->output();
  }

  CommandResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(30)) {
    std::vector<std::string> argv = In("ctl", "crest");
    argv.insert(argv.end(), args.begin(), args.end());
    argv.emplace_back("--controller");
    argv.emplace_back("10.77.0.1:50051");
    for (auto& a : Tls("crest-cli")) argv.push_back(a);
    return RunArgv(argv, timeout);
  }

  // What the campaign changes and must put back on host `node`.
  struct HostSettings {
    std::string governor;
    std::string thp;
    std::string config_json;
  };
  // The THP mode: the kernel shows "always [madvise] never", the agent
  // writes the one word; the fake tree keeps what was written.
  static std::string ThpMode(const std::string& text) {
    auto open = text.find('[');
    auto close = text.find(']');
    if (open == std::string::npos || close == std::string::npos) return text;
    return text.substr(open + 1, close - open - 1);
  }
  HostSettings Settings(const std::string& node) const {
    const std::string root = dir_.File(node);
    auto json = ReadFileToString(root + "/state/sim/conf/config.json");
    return {
        agent::testing::ReadFakeFile(root +
                                     "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        ThpMode(agent::testing::ReadFakeFile(root + "/sys/kernel/mm/transparent_hugepage/enabled")),
        json.ok() ? *json : "(unreadable: " + std::string(json.status().message()) + ")"};
  }

  std::string ip_;
  std::string prefix_;
  std::vector<std::string> namespaces_;
  crest::testing::TempDir dir_;
  std::string pki_;
  std::unique_ptr<Process> controller_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

TEST_F(NetnsCampaign, CutLinkMovesTheTrialAndTheHostIsRestoredWhenItReturns) {
  StartController();
  for (int i = 1; i <= kAgents; ++i) StartAgent(i);
  for (int i = 1; i <= kAgents; ++i) {
    ASSERT_TRUE(controller_
                    ->WaitForLine(absl::StrCat("agent ", Node(i), " registered from ", Address(i)),
                                  kStartup)
                    .ok())
        << controller_->output();
  }
  std::map<std::string, HostSettings> before;
  for (int i = 1; i <= kAgents; ++i) before[Node(i)] = Settings(Node(i));
  ASSERT_EQ(before["node-1"].governor, "powersave");
  ASSERT_THAT(before["node-1"].config_json, HasSubstr("maxBatchSize"));

  const std::string spec = dir_.File("campaign.yaml");
  // The practice's ladder re-runs every point it started, so the cut point is
  // measured elsewhere; the knee may drop a point it no longer needs.
  ASSERT_TRUE(WriteFileAtomically(spec, R"(name: netns
models:
  - {name: LLaMa3-8B, nodes: [node-1, node-2, node-3], parallel: 3}
search: {strategy: practice, range: [100, 600], initial: 100, step: 100, tolerance: 0.5}
client: {request_count: 600, max_output_len: 64}
host: {governor: performance, thp: always}
limits: {max_retries: 2}
)")
                  .ok());
  CommandResult submitted = Cli({"campaign", "submit", "-f", spec, "--output", "json"});
  ASSERT_EQ(submitted.code, 0) << submitted.output;
  const std::string id = nlohmann::json::parse(submitted.output, nullptr, false).value("id", "");
  ASSERT_EQ(id, "c1") << submitted.output;

  // The first trial to start picks the host whose link is cut.
  auto started = controller_->WaitForLine("(repeat 0, attempt 1) on node-", kEvent);
  ASSERT_TRUE(started.ok()) << started.status();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*started, m, std::regex(R"(maxBatchSize (\d+) .* on (node-\d))")))
      << *started;
  const std::string point = m[1];
  const std::string victim = m[2];
  Ip({"-n", Ns(victim), "link", "set", "eth0", "down"});

  ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("agent ", victim, " is lost"), kEvent).ok())
      << controller_->output();
  auto moved = controller_->WaitForLine(
      absl::StrCat("maxBatchSize ", point, " (repeat 0, attempt 2) on node-"), kEvent);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(*moved, ::testing::Not(HasSubstr("on " + victim))) << *moved;

  CommandResult watch = Cli({"campaign", "watch", id, "--timeout", "180"}, absl::Seconds(200));
  EXPECT_EQ(watch.code, 0) << watch.output;
  const std::string report_file = dir_.File("report.json");
  CommandResult r = Cli({"campaign", "report", id, "--format", "json", "-o", report_file});
  ASSERT_EQ(r.code, 0) << r.output;
  auto text = ReadFileToString(report_file);
  ASSERT_TRUE(text.ok());
  nlohmann::json report = nlohmann::json::parse(*text, nullptr, false);
  ASSERT_TRUE(report.is_object()) << *text;
  EXPECT_EQ(report["state"], "succeeded") << report.dump(2);
  ASSERT_EQ(report["models"].size(), 1u);
  const auto& trials = report["models"][0]["trials"];
  // Nothing lost or counted twice: every trial ended, each run of a point
  // (the search may repeat a point on purpose: `repeat`) measured ok exactly
  // once, and the cut one once as interrupted (on the cut host) and once ok
  // elsewhere.
  std::map<std::pair<int64_t, int64_t>, int> ok;
  int interrupted = 0;
  for (const auto& t : trials) {
    const std::string status = t["status"];
    EXPECT_THAT(status, ::testing::AnyOf("ok", "interrupted")) << t.dump();
    if (status == "ok") {
      ++ok[{t["maxBatchSize"].get<int64_t>(), t["repeat"].get<int64_t>()}];
      EXPECT_NE(t["node"], victim) << "a result from the cut host was counted: " << t.dump();
    }
    if (status == "interrupted") {
      ++interrupted;
      EXPECT_EQ(t["node"], victim) << t.dump();
      EXPECT_EQ(t["maxBatchSize"].get<int64_t>(), std::stoll(point)) << t.dump();
      EXPECT_THAT(t["reason"].get<std::string>(), HasSubstr(victim)) << t.dump();
    }
  }
  EXPECT_EQ(interrupted, 1) << trials.dump(2);
  EXPECT_EQ((ok[{std::stoll(point), 0}]), 1) << trials.dump(2);
  for (const auto& [run, n] : ok) {
    EXPECT_EQ(n, 1) << "maxBatchSize " << run.first << " repeat " << run.second << " counted " << n;
  }
  EXPECT_GE(ok.size(), 2u) << trials.dump(2);
  // The hosts that stayed reachable were restored at the campaign's end.
  for (int i = 1; i <= kAgents; ++i) {
    if (Node(i) == victim) continue;
    HostSettings now = Settings(Node(i));
    EXPECT_EQ(now.governor, before[Node(i)].governor) << Node(i);
    EXPECT_EQ(now.thp, before[Node(i)].thp) << Node(i);
    EXPECT_EQ(now.config_json, before[Node(i)].config_json) << Node(i);
  }

  // The link comes back: the controller hears from the host again and puts
  // back what the campaign changed there.
  Ip({"-n", Ns(victim), "link", "set", "eth0", "up"});
  ASSERT_TRUE(
      controller_->WaitForLine(absl::StrCat("host settings of ", victim, " restored"), kReturn)
          .ok())
      << controller_->output();
  ASSERT_TRUE(
      controller_
          ->WaitForLine(absl::StrCat("daemon on ", victim, " stopped and its config.json put back"),
                        kReturn)
          .ok())
      << controller_->output();
  HostSettings after = Settings(victim);
  EXPECT_EQ(after.governor, before[victim].governor);
  EXPECT_EQ(after.thp, before[victim].thp);
  EXPECT_EQ(after.config_json, before[victim].config_json);
}

}  // namespace
}  // namespace crest::e2e
