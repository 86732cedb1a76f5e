// Fault injection over real processes (crest-controller, crest-agents and
// their mindie-sim daemons on loopback, mutual TLS, the `crest` CLI). Every
// case ends with the same two checks: nothing recorded is lost or counted
// twice (ExpectNothingLostOrCountedTwice over the final report), and every
// host setting is as it was before the campaign (governors and THP on the
// fake sysfs tree, config.json byte for byte). Faults come from real
// mechanisms: SIGKILL/SIGSTOP, mindie-sim's --fault-* knobs, the agent's
// test-only hold before the pid record, a full tmpfs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

#include "common/file_util.h"
#include "tests/agent/agent_test_util.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr absl::Duration kCampaign = absl::Seconds(90);

// True while `pid` runs (not a zombie). Reaps it first if it was handed to
// this process, the subreaper.
bool Running(pid_t pid) {
  ::waitpid(pid, nullptr, WNOHANG);
  auto stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

using ::crest::agent::testing::WaitFor;

// Every daemon pid an agent's output names.
std::vector<pid_t> DaemonPids(const std::string& output) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    size_t at = line.find("daemon started: pid ");
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(at + 20);
    pid_t pid = 0;
    if (absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &pid)) pids.push_back(pid);
  }
  return pids;
}

class Faults : public CampaignFixture {
 protected:
  // A campaign of `points` maxBatchSize values 100, 200, ... on `nodes`.
  static std::string Spec(const std::string& name, int points, const std::string& nodes,
                          const std::string& extra = "") {
    return absl::StrCat(
        "name: ", name, "\nmodels: [{name: LLaMa3-8B", nodes.empty() ? "" : ", ", nodes,
        "}]\nsearch: {strategy: practice, range: [100, ", 100 * points,
        "], initial: 100, tolerance: 0.5}\nclient: {request_count: ", 100 * points + 100,
        ", max_output_len: 32}\n", "host: {governor: performance, thp: always}\n", extra);
  }

  // The closing checks of every case: the report holds each point at most
  // once ok, every interruption is accounted for and nothing recorded
  // earlier (`before`) changed; every node's host is as it was and no
  // daemon any agent started still runs.
  void ExpectClosingChecks(const std::string& id, const std::map<std::string, HostState>& hosts,
                           const nlohmann::json& before = nullptr) {
    nlohmann::json report = Report(id);
    const auto& m = Model(report, "LLaMa3-8B");
    ExpectNothingLostOrCountedTwice(m, before.is_null() ? before : Model(before, "LLaMa3-8B"));
    for (const auto& entry : hosts) {
      // Plain references: clang 14 cannot capture structured bindings in a lambda.
      const std::string& name = entry.first;
      const HostState& host = entry.second;
      EXPECT_TRUE(WaitFor([&] { return Host(name) == host; }, absl::Seconds(10)))
          << name << ": governors " << absl::StrJoin(Host(name).governors, ",") << " (were "
          << absl::StrJoin(host.governors, ",") << "), THP " << Host(name).thp << " (was "
          << host.thp << "), config.json " << Host(name).config_json << "\n(was "
          << host.config_json << ")";
    }
    for (const auto& [name, agent] : agents_) {
      for (pid_t pid : DaemonPids(agent->output())) {
        EXPECT_TRUE(WaitFor([&] { return !Running(pid); }, absl::Seconds(10)))
            << name << ": daemon pid " << pid << " still runs";
      }
    }
  }

  // node-1 (LLaMa3-8B, `options`) and a controller that dials it, both up;
  // returns node-1's host as it was before any campaign.
  std::map<std::string, HostState> StartNodeOne(const AgentOptions& options) {
    std::string address = StartAgentWith("node-1", "LLaMa3-8B", options);
    std::map<std::string, HostState> hosts = {{"node-1", Host("node-1")}};
    StartController(dir_.File("ctl"), "node-1=" + address);
    WaitForAgents({"node-1"});
    return hosts;
  }
  std::map<std::string, HostState> StartNodeOne(double time_scale) {
    AgentOptions options;
    options.time_scale = time_scale;
    return StartNodeOne(options);
  }

  void WaitForAgents(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("agent ", n, " at"), kStartup).ok())
          << controller_->output();
    }
  }
};

TEST_F(Faults, AgentSigkillMidTrialWithoutRestart) {
  std::string a1 = StartAgent("node-1", "LLaMa3-8B", "", 40);
  std::string a2 = StartAgent("node-2", "LLaMa3-8B", "", 40);
  std::map<std::string, HostState> hosts = {{"node-1", Host("node-1")}, {"node-2", Host("node-2")}};
  StartController(dir_.File("ctl"), absl::StrCat("node-1=", a1, ",node-2=", a2));
  WaitForAgents({"node-1", "node-2"});
  std::string id = Submit(Spec("lost", 3, "nodes: [node-1, node-2]"));
  ASSERT_TRUE(controller_->WaitForLine("(repeat 0, attempt 1) on node-1", kCampaign).ok())
      << controller_->output();
  auto daemon = agents_["node-1"]->WaitForNumberAfter("daemon started: pid ", kStartup);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  agents_["node-1"]->Kill();  // the agent's group only: its daemon has its own
  // No agent is left to stop it: the kernel does (parent-death signal).
  EXPECT_TRUE(WaitFor([&] { return !Running(*daemon); }, absl::Seconds(10)));
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  EXPECT_EQ(m["trials"][0]["status"], "interrupted");
  EXPECT_EQ(MeasuredPoints(m).size(), 3u);
  // The host of node-1 is put back when an agent runs there again.
  RestartAgent("node-1");
  ExpectClosingChecks(id, hosts);
}

TEST_F(Faults, AgentSigkillMidTrialWithRestart) {
  std::map<std::string, HostState> hosts = StartNodeOne(40);
  std::string id = Submit(Spec("restart", 3, ""));
  ASSERT_TRUE(
      controller_->WaitForLine("maxBatchSize 200 (repeat 0, attempt 1) on node-1", kCampaign).ok())
      << controller_->output();
  nlohmann::json before = Report(id);
  ASSERT_TRUE(agents_["node-1"]->WaitForLine("daemon started: pid ", kStartup).ok());
  agents_["node-1"]->Kill();
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 is lost", kStartup).ok())
      << controller_->output();
  RestartAgent("node-1");
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  EXPECT_EQ(MeasuredPoints(m).size(), 3u);
  int interrupted = 0;
  for (const auto& t : m["trials"]) interrupted += t["status"] == "interrupted" ? 1 : 0;
  EXPECT_EQ(interrupted, 1);
  ExpectClosingChecks(id, hosts, before);
}

TEST_F(Faults, DaemonCrashesMidBenchmark) {
  AgentOptions options;
  options.sim_args = {"--fault-crash-after-tokens", "3000"};
  std::map<std::string, HostState> hosts = StartNodeOne(options);
  std::string id = Submit(Spec("crash", 2, ""));
  CommandResult watch = Watch(id);
  EXPECT_THAT(watch.output, HasSubstr("campaign c1: "));
  nlohmann::json report = Report(id);
  EXPECT_THAT(report["state"].get<std::string>(), AnyOf("succeeded", "failed"));
  const auto& m = Model(report, "LLaMa3-8B");
  ASSERT_FALSE(m["trials"].empty());
  for (const auto& t : m["trials"]) {
    // However many requests made it before the crash, the figures are not
    // the server's: the trial fails, naming the daemon's death.
    EXPECT_EQ(t["status"], "failed") << t.dump();
    EXPECT_THAT(t["reason"].get<std::string>(),
                HasSubstr("the daemon died during the benchmark: the daemon (pid "))
        << t.dump();
  }
  EXPECT_TRUE(OkPerPoint(m).empty());
  EXPECT_THAT(agents_["node-1"]->output(), HasSubstr("exited while ready"));
  ExpectClosingChecks(id, hosts);
}

TEST_F(Faults, DaemonHangsPastTheTrialDeadline) {
  AgentOptions options;
  options.sim_args = {"--fault-hang-after-tokens", "3000"};
  std::map<std::string, HostState> hosts = StartNodeOne(options);
  std::string id = Submit(Spec("hang", 2, "", "limits: {benchmark_timeout: 3s, max_retries: 1}\n"));
  CommandResult watch = Watch(id);
  EXPECT_THAT(watch.output, HasSubstr("campaign c1: "));
  nlohmann::json report = Report(id);
  const auto& m = Model(report, "LLaMa3-8B");
  ASSERT_FALSE(m["trials"].empty());
  for (const auto& t : m["trials"]) EXPECT_NE(t["status"], "ok") << t.dump();
  EXPECT_TRUE(OkPerPoint(m).empty());
  ExpectClosingChecks(id, hosts);
}

TEST_F(Faults, OutOfMemoryAtStartForALargeMaxBatchSize) {
  AgentOptions options;
  options.sim_args = {"--fault-oom-above-batch", "250"};
  std::map<std::string, HostState> hosts = StartNodeOne(options);
  std::string id = Submit(Spec("oom", 4, ""));
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  // 100 and 200 measured (a flagged run made up by the next repeat), then
  // 300 out of memory once: the ladder stops there.
  EXPECT_THAT(MeasuredPoints(m), ::testing::ElementsAre(100, 200)) << m.dump(2);
  ASSERT_FALSE(m["trials"].empty());
  const auto& last = m["trials"].back();
  EXPECT_EQ(last["maxBatchSize"], 300);
  EXPECT_EQ(last["status"], "infeasible");
  EXPECT_THAT(last["reason"].get<std::string>(), HasSubstr("out of memory"));
  for (const auto& t : m["trials"]) {
    EXPECT_TRUE(t["status"] == "ok" || &t == &last) << t.dump();
  }
  EXPECT_THAT(m["best"]["maxBatchSize"].get<int>(), AnyOf(100, 200));  // never the OOM point
  ExpectClosingChecks(id, hosts);
}

TEST_F(Faults, AgentSigkillBetweenSpawnAndPidRecord) {
  AgentOptions options;
  options.time_scale = 40;
  options.env = {{"CREST_TESTING_HOLD_BEFORE_PID_RECORD", "1"}};
  std::map<std::string, HostState> hosts = StartNodeOne(options);
  std::string id = Submit(Spec("window", 2, ""));
  auto held = agents_["node-1"]->WaitForNumberAfter("testing: holding daemon pid ", kCampaign);
  ASSERT_TRUE(held.ok()) << held.status();
  // Forked, not yet the daemon: still the agent's program, and unrecorded.
  std::error_code ec;
  EXPECT_THAT(std::filesystem::read_symlink(absl::StrCat("/proc/", *held, "/exe"), ec).string(),
              HasSubstr("crest-agent"));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("node-1/state/daemon-pid.json")));
  agents_["node-1"]->Kill();
  // The child never execs: it sees its parent gone (parent-death signal, or
  // the end of the pipe it waits on).
  EXPECT_TRUE(WaitFor([&] { return !Running(*held); }, absl::Seconds(10)));
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 is lost", kStartup).ok())
      << controller_->output();
  RestartAgent("node-1");
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  EXPECT_EQ(MeasuredPoints(Model(report, "LLaMa3-8B")).size(), 2u);
  ExpectClosingChecks(id, hosts);
}

// Kills the controller at 24 moments across one campaign, alternately just
// after a trial started (mid-trial) and just after one was recorded (between
// trials), restarting it each time on the same state; the final report has
// the same points as the same campaign run without a kill, and its best is
// the best of every trial recorded across all the controller's lives.
TEST_F(Faults, ControllerSigkillAtTwentyPointsResumesToTheSameReport) {
  std::string a1 = StartAgent("node-1", "LLaMa3-8B");
  std::map<std::string, HostState> hosts = {{"node-1", Host("node-1")}};
  // Every point is measured whatever the figures (tolerance 0.99): under a
  // loaded machine the noise could otherwise end one run's search early.
  const std::string spec =
      absl::StrReplaceAll(Spec("resume", 12, "", "limits: {max_retries: 100}\n"),
                          {{"tolerance: 0.5", "tolerance: 0.99"}});
  StartController(dir_.File("ref"), "node-1=" + a1);
  WaitForAgents({"node-1"});
  std::string ref_id = Submit(spec);
  ASSERT_EQ(Watch(ref_id).code, 0);
  nlohmann::json reference = Report(ref_id);
  controller_->Kill();
  controller_->Wait(absl::Seconds(10));

  std::string state = dir_.File("ctl");
  StartController(state, "node-1=" + a1);
  WaitForAgents({"node-1"});
  std::string id = Submit(spec);
  int kills = 0;
  std::vector<nlohmann::json> snapshots;
  for (bool ended = false; !ended && kills < 24;) {
    auto line = controller_->WaitForAnyLine(
        {kills % 2 == 0 ? ") on node-1" : " on node-1: ", "campaign c1 ended"}, kCampaign);
    ASSERT_TRUE(line.ok()) << line.status();
    ended = absl::StrContains(*line, "ended");
    if (ended) break;
    // Mid-trial kills land at once (the trial's daemon is still starting);
    // after a record, what the controller said it holds is kept to compare.
    if (kills % 2 == 1) snapshots.push_back(Report(id));
    controller_->Kill();
    controller_->Wait(absl::Seconds(10));
    ++kills;
    StartController(state, "node-1=" + a1);
    // Killed after its last record: nothing is left to resume.
    auto status = nlohmann::json::parse(Cli({"campaign", "status", id, "--output", "json"}).output,
                                        nullptr, false);
    ended = status.is_object() && status.value("state", "") != "running";
    if (!ended) {
      ASSERT_TRUE(controller_->WaitForLine("resuming campaign c1", kStartup).ok())
          << controller_->output();
    }
  }
  EXPECT_GE(kills, 20);
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  const auto& ref = Model(reference, "LLaMa3-8B");
  // Each point measured once (a flagged run made up by the next repeat) in
  // both campaigns, and the same points.
  EXPECT_EQ(MeasuredPoints(m, 100), MeasuredPoints(ref, 100));
  // The best is the resumed controller's verdict over every trial recorded
  // across the 24 lives, the same rule as uninterrupted: the best mean of the
  // unflagged runs (a flagged run, e.g. client-bound, is never the answer).
  // (The two runs' figures differ by measurement noise, so their bests may
  // differ.) When every run is flagged (a slow sanitizer build makes
  // crest-bench client-bound), the best is the fastest flagged point, marked
  // untrusted.
  auto best_of = [](const nlohmann::json& model) {
    const bool untrusted = model["best"].value("untrusted", false);
    int64_t best = 0;
    double speed = -1;
    for (const auto& t : model["trials"]) {
      if (Flagged(t) && !untrusted) continue;
      EXPECT_TRUE(!untrusted || t["status"] != "ok" || Flagged(t))
          << "an untrusted best beside an unflagged run: " << t.dump();
      if (t["status"] == "ok" && t["GenerateSpeed"].get<double>() > speed) {
        speed = t["GenerateSpeed"].get<double>();
        best = t["maxBatchSize"].get<int64_t>();
      }
    }
    return best;
  };
  EXPECT_EQ(m["best"]["maxBatchSize"].get<int64_t>(), best_of(m));
  EXPECT_EQ(ref["best"]["maxBatchSize"].get<int64_t>(), best_of(ref));
  for (const nlohmann::json& before : snapshots) {
    ExpectNothingLostOrCountedTwice(m, Model(before, "LLaMa3-8B"));
  }
  ExpectClosingChecks(id, hosts);
}

// A tmpfs of `size` mounted at `path` for one test (root only; the reason is
// given otherwise). Fill() takes every free byte; Free() gives it back.
class SmallDisk {
 public:
  SmallDisk(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) {
      error_ = absl::StrCat("cannot mount a tmpfs at ", path, ": ", std::strerror(errno),
                            " (needs root or CAP_SYS_ADMIN)");
    }
  }
  ~SmallDisk() {
    if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  // Writes a filler file until the file system says it is full (ENOSPC).
  bool Fill() {
    std::FILE* f = std::fopen((path_ + "/filler").c_str(), "w");
    if (f == nullptr) return false;
    std::string chunk(4096, 'x');
    while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size() && std::fflush(f) == 0) {
    }
    bool full = errno == ENOSPC;
    std::fclose(f);
    return full;
  }
  void Free() { std::filesystem::remove(path_ + "/filler"); }

 private:
  std::string path_;
  std::string error_;
};

// The controller's state directory fills up mid-campaign: the refused write
// is reported, the campaign fails without a half-written database, and a
// restart with space again resumes it to the end with nothing lost.
TEST_F(Faults, StateDirFullOnTheController) {
  std::string state = dir_.File("ctl");
  SmallDisk disk(state, "4m");
  if (!disk.error().empty()) GTEST_SKIP() << disk.error();
  std::string a1 = StartAgent("node-1", "LLaMa3-8B", "", 40);
  std::map<std::string, HostState> hosts = {{"node-1", Host("node-1")}};
  StartController(state, "node-1=" + a1);
  WaitForAgents({"node-1"});
  std::string id = Submit(Spec("full", 3, ""));
  ASSERT_TRUE(controller_->WaitForLine("maxBatchSize 100 on node-1: TRIAL_OK", kCampaign).ok())
      << controller_->output();
  nlohmann::json before = Report(id);
  ASSERT_TRUE(disk.Fill());
  CommandResult watch = Watch(id);
  EXPECT_THAT(watch.output, HasSubstr("campaign c1: failed"));
  EXPECT_THAT(controller_->output(),
              AnyOf(HasSubstr("database or disk is full"), HasSubstr("No space left on device")));
  controller_->Kill();
  controller_->Wait(absl::Seconds(10));
  disk.Free();
  // The database opens (not corrupt) and the campaign resumes to its end.
  StartController(state, "node-1=" + a1);
  watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  EXPECT_EQ(MeasuredPoints(Model(report, "LLaMa3-8B")).size(), 3u);
  ExpectClosingChecks(id, hosts, before);
}

// The agent's state directory is full when a campaign starts: its first
// write (the host settings to restore, recorded before anything changes) is
// refused and said, the campaign fails without touching the host; with space
// again the next campaign runs, and the host is restored after it.
TEST_F(Faults, StateDirFullOnTheAgent) {
  SmallDisk disk(dir_.File("node-1/state"), "4m");
  if (!disk.error().empty()) GTEST_SKIP() << disk.error();
  std::map<std::string, HostState> hosts = StartNodeOne(40);
  ASSERT_TRUE(disk.Fill());
  std::string full = Submit(Spec("agent-full", 2, "", "limits: {max_retries: 1}\n"));
  CommandResult watch = Watch(full);
  EXPECT_THAT(watch.output, HasSubstr("campaign c1: failed"));
  EXPECT_THAT(agents_["node-1"]->output() + controller_->output(),
              HasSubstr("No space left on device"));
  nlohmann::json refused = Report(full);
  EXPECT_TRUE(OkPerPoint(Model(refused, "LLaMa3-8B")).empty());
  EXPECT_EQ(Host("node-1"), hosts["node-1"]);  // nothing was changed
  disk.Free();
  std::string id = Submit(Spec("agent-space", 2, ""));
  watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  EXPECT_EQ(MeasuredPoints(Model(Report(id), "LLaMa3-8B")).size(), 2u);
  ExpectClosingChecks(full, hosts, refused);
  ExpectClosingChecks(id, hosts);
}

// The controller stops answering (SIGSTOP) for longer than the heartbeat
// timeout while a trial runs, then comes back (SIGCONT): the agents were
// silent that long, so the trial's node counts as lost, its trial is
// interrupted and re-run once; nothing is counted twice.
TEST_F(Faults, ControllerUnreachableLongerThanTheHeartbeatTimeout) {
  std::string controller = StartController(dir_.File("ctl"));
  StartAgent("node-1", "LLaMa3-8B", controller, 40);
  std::map<std::string, HostState> hosts = {{"node-1", Host("node-1")}};
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());
  std::string id = Submit(Spec("away", 3, ""));
  ASSERT_TRUE(
      controller_->WaitForLine("maxBatchSize 200 (repeat 0, attempt 1) on node-1", kCampaign).ok());
  ASSERT_EQ(::kill(controller_->pid(), SIGSTOP), 0);
  // A heartbeat fails only after its 5 s deadline: by then the agent was
  // silent for more than three heartbeat intervals (1.5 s).
  ASSERT_TRUE(agents_["node-1"]->WaitForLine("heartbeat failed", kStartup).ok());
  ASSERT_EQ(::kill(controller_->pid(), SIGCONT), 0);
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  EXPECT_EQ(MeasuredPoints(Model(report, "LLaMa3-8B")).size(), 3u);
  ExpectClosingChecks(id, hosts);
}

}  // namespace
}  // namespace crest::e2e
