// DaemonSupervisor against the real mindie-sim: ready with npuBlockNum,
// crash after ready, exit before ready, out of memory, start-up timeout, config error, stop with
// no orphan, one daemon at a time, config.json restored byte-for-byte.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/agent_config.h"
#include "agent/config_json_editor.h"
#include "agent/daemon_supervisor.h"
#include "agent/pinning.h"
#include "common/file_util.h"
#include "common/listen_port.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "tests/agent/agent_test_util.h"

namespace crest::agent {
namespace {

using ::testing::HasSubstr;

class LifecycleTest : public ::testing::Test {
 protected:
  // A supervisor running bin/mindie-sim with `sim_args` and the template
  // config.json plus `extra` edits.
  std::unique_ptr<DaemonSupervisor> Make(
      const std::vector<std::string>& sim_args, double start_timeout_s = 20,
      const std::vector<std::pair<std::vector<std::string>, std::string>>& extra = {}) {
    auto path = testing::WriteSimConfigJson(dir_.path() + "/mindie", sim_ports_, extra);
    EXPECT_TRUE(path.ok()) << path.status();
    config_json_ = *path;
    original_ = *ReadFileToString(config_json_);
    std::string yaml = absl::StrCat(
        "daemon:\n  binary: ", testing::BinDir(), "/mindie-sim\n  install_dir: ", dir_.path(),
        "/mindie\n  config_json: conf/config.json\n  start_timeout_s: ", start_timeout_s,
        "\n  stop_grace_s: 5\n  args: [");
    std::vector<std::string> args = {"--config", config_json_, "--seed", "1"};
    args.insert(args.end(), sim_args.begin(), sim_args.end());
    for (size_t i = 0; i < args.size(); ++i)
      absl::StrAppend(&yaml, i ? ", " : "", "\"", args[i], "\"");
    absl::StrAppend(&yaml, "]\n");
    auto config = ParseAgentConfig(yaml, dir_.path() + "/state", testing::BinDir());
    EXPECT_TRUE(config.ok()) << config.status();
    return std::make_unique<DaemonSupervisor>(*config, dir_.path() + "/state", &clock_);
  }

  // Starts and collects the events.
  std::vector<crest::v1::DaemonEvent> Start(DaemonSupervisor& s, const StartParams& params) {
    std::vector<crest::v1::DaemonEvent> events;
    std::atomic<bool> cancel{false};
    absl::Status st = s.Start(
        params, [&](const crest::v1::DaemonEvent& e) { events.push_back(e); }, &cancel);
    EXPECT_TRUE(st.ok()) << st;
    return events;
  }

  crest::testing::TempDir dir_;
  std::vector<PortReservation> sim_ports_;  // config.json's, held for the test
  SystemClock clock_;
  std::string config_json_;
  std::string original_;
};

TEST_F(LifecycleTest, ReadyWithNpuBlockNumThenStopLeavesNothing) {
  auto s = Make({"--time-scale", "50"});
  StartParams params;
  auto config_json = ConfigJsonFile(config_json_, dir_.path() + "/state").Load();
  CREST_ASSERT_OK(config_json);
  CREST_ASSERT_OK(config_json->SetSchedule({"maxBatchSize", int64_t{321}}));
  params.config_json = *config_json;
  params.cpus = {1};
  std::vector<crest::v1::DaemonEvent> events = Start(*s, params);
  ASSERT_GE(events.size(), 2u);
  EXPECT_TRUE(events.front().has_starting());
  ASSERT_TRUE(events.back().has_ready()) << events.back().DebugString();
  const crest::v1::DaemonReady& ready = events.back().ready();
  // LLaMA3-8B with npuMemSize 17 GiB and 8 MiB per block (mindie-facts.md):
  // 17 * 1024 / 8 = 2176 blocks, the first dimension the log line prints; the
  // executor's line says 2175 (net of the reserved block).
  EXPECT_EQ(ready.npu_block_num(), 2176);
  EXPECT_EQ(ready.npu_block_source(), "executor KV cache overview");
  EXPECT_EQ(ready.npu_block_num_unknown(), "");
  EXPECT_EQ(ready.pinned_cpu_list(), "1");
  // The effective values are the typed ones the start set and kept.
  std::map<std::string, int64_t> effective;
  for (const crest::v1::ConfigOverride& o : ready.effective()) {
    if (o.value_case() == crest::v1::ConfigOverride::kIntValue) effective[o.key()] = o.int_value();
  }
  EXPECT_EQ(effective["maxBatchSize"], 321);
  EXPECT_EQ(effective.count("maxPrefillBatchSize"), 1u);
  pid_t pid = ready.pid();
  CREST_EXPECT_OK(VerifyAffinity(pid, {1}));
  // The override is in config.json while it runs, everything else kept.
  std::string running = *ReadFileToString(config_json_);
  EXPECT_THAT(running, HasSubstr("\"maxBatchSize\" : 321"));
  EXPECT_EQ(running.size(), original_.size());
  crest::v1::DaemonStatus status = s->Status();
  EXPECT_EQ(status.state(), crest::v1::DAEMON_READY);
  EXPECT_EQ(status.pid(), pid);

  // One daemon at a time.
  std::atomic<bool> cancel{false};
  StartParams again;
  EXPECT_THAT(s->Start(
                  again, [](const crest::v1::DaemonEvent&) {}, &cancel),
              crest::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("replace_running")));

  crest::v1::StopDaemonReply stop = s->Stop(std::nullopt);
  EXPECT_TRUE(stop.was_running());
  EXPECT_FALSE(stop.killed());
  EXPECT_EQ(stop.exit_code(), 0);
  EXPECT_FALSE(ProcessGroupExists(pid));
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
  EXPECT_EQ(s->Status().state(), crest::v1::DAEMON_STOPPED);
  // The captured output went to the log file.
  EXPECT_THAT(*ReadFileToString(dir_.path() + "/state/daemon.log"),
              HasSubstr("Daemon start success!"));
}

// Builds that print only a warm-up cache before READY: the agent sends one
// short request and reads the serving cache's line at the first forward pass.
TEST_F(LifecycleTest, OnlyAWarmUpCacheBeforeReadyIsReadAfterOneRequest) {
  for (const std::vector<std::string>& style :
       {std::vector<std::string>{"--log-style", "2.x", "--no-executor-line"},
        std::vector<std::string>{"--log-style", "1.0"}}) {
    SCOPED_TRACE(style[1]);
    std::vector<std::string> args = {"--time-scale", "50"};
    args.insert(args.end(), style.begin(), style.end());
    auto s = Make(args);
    std::vector<crest::v1::DaemonEvent> events = Start(*s, {});
    ASSERT_TRUE(events.back().has_ready()) << events.back().DebugString();
    EXPECT_EQ(events.back().ready().npu_block_num(), 2176);
    EXPECT_EQ(events.back().ready().npu_block_source(), "k_caches shape at the first forward pass");
    EXPECT_EQ(s->Status().npu_block_num(), 2176);
    s->Stop(std::nullopt);
    EXPECT_EQ(*ReadFileToString(config_json_), original_);
  }
}

// The two WARNING lines that mention memory in a normal start (a KV cache in
// int8, a multimodal model with npuMemSize -1) leave the daemon running.
TEST_F(LifecycleTest, MemoryWarningsOfANormalStartAreNoFailure) {
  const std::string path = dir_.path() + "/warned-profile.json";
  CREST_ASSERT_OK(testing::WriteProfileWithMemoryWarnings(path));
  auto s =
      Make({"--time-scale", "50", "--profile", path}, 20,
           {{{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "npuMemSize"}, "-1"}});
  StartParams params;
  params.stream_log = true;
  std::vector<crest::v1::DaemonEvent> events = Start(*s, params);
  ASSERT_TRUE(events.back().has_ready()) << events.back().DebugString();
  EXPECT_GT(events.back().ready().npu_block_num(), 1);
  int warnings = 0;
  for (const auto& e : events) {
    if (e.has_log_line() && e.log_line().line().find("out of memory") != std::string::npos) {
      EXPECT_THAT(e.log_line().line(), HasSubstr("[WARNING]"));
      ++warnings;
    }
  }
  EXPECT_EQ(warnings, 2);
}

TEST_F(LifecycleTest, ReplaceRunningStopsTheFirst) {
  auto s = Make({"--time-scale", "50"});
  auto first = Start(*s, {});
  ASSERT_TRUE(first.back().has_ready());
  pid_t old_pid = first.back().ready().pid();
  StartParams replace;
  replace.replace_running = true;
  auto second = Start(*s, replace);
  ASSERT_TRUE(second.back().has_ready());
  EXPECT_NE(second.back().ready().pid(), old_pid);
  EXPECT_FALSE(ProcessGroupExists(old_pid));
  EXPECT_EQ(s->Status().restarts(), 2u);
}

TEST_F(LifecycleTest, CrashAfterReadyIsReported) {
  auto s = Make({"--time-scale", "50"});
  auto events = Start(*s, {});
  ASSERT_TRUE(events.back().has_ready());
  pid_t pid = events.back().ready().pid();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(testing::WaitFor([&] { return s->Status().state() == crest::v1::DAEMON_FAILED; },
                               absl::Seconds(10)));
  crest::v1::DaemonStatus status = s->Status();
  EXPECT_EQ(status.last_failure().kind(), crest::v1::DAEMON_FAILURE_EXITED);
  EXPECT_EQ(status.last_failure().exit_code(), 128 + SIGKILL);
  EXPECT_THAT(status.last_failure().reason(), HasSubstr("after it was ready"));
  EXPECT_FALSE(s->Stop(std::nullopt).was_running());
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
}

TEST_F(LifecycleTest, OutOfMemoryIsReportedWithTheLogTail) {
  // 1000 GiB of KV cache per card cannot fit.
  auto s =
      Make({"--time-scale", "50"}, 20,
           {{{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "npuMemSize"}, "1000"}});
  auto events = Start(*s, {});
  ASSERT_TRUE(events.back().has_failed()) << events.back().DebugString();
  const crest::v1::DaemonFailed& f = events.back().failed();
  EXPECT_EQ(f.kind(), crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY);
  EXPECT_THAT(f.reason(), HasSubstr("out of memory"));
  EXPECT_FALSE(f.log_tail().empty());
  EXPECT_EQ(s->Status().state(), crest::v1::DAEMON_FAILED);
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
}

TEST_F(LifecycleTest, StartupTimeoutKillsTheDaemon) {
  auto s = Make({"--time-scale", "1", "--startup-seconds", "600"}, 1);
  auto events = Start(*s, {});
  ASSERT_TRUE(events.front().has_starting());
  pid_t pid = events.front().starting().pid();
  ASSERT_TRUE(events.back().has_failed());
  EXPECT_EQ(events.back().failed().kind(), crest::v1::DAEMON_FAILURE_TIMEOUT);
  EXPECT_THAT(events.back().failed().reason(), HasSubstr("Daemon start success!"));
  EXPECT_FALSE(ProcessGroupExists(pid));
}

TEST_F(LifecycleTest, RequestedTimeoutIsCappedAndUsed) {
  auto s = Make({"--time-scale", "1", "--startup-seconds", "600"}, 30);
  StartParams params;
  params.start_timeout = absl::Milliseconds(500);
  auto events = Start(*s, params);
  ASSERT_TRUE(events.back().has_failed());
  EXPECT_EQ(events.back().failed().kind(), crest::v1::DAEMON_FAILURE_TIMEOUT);
  EXPECT_THAT(events.back().failed().reason(), HasSubstr("500ms"));
}

TEST_F(LifecycleTest, ConfigErrorExitIsInvalidConfig) {
  auto s = Make({"--profile", "no-such-profile"});
  auto events = Start(*s, {});
  ASSERT_TRUE(events.back().has_failed());
  EXPECT_EQ(events.back().failed().kind(), crest::v1::DAEMON_FAILURE_INVALID_CONFIG);
  EXPECT_NE(events.back().failed().exit_code(), 0);
}

TEST_F(LifecycleTest, AnExitBeforeReadyNamesTheDaemonsLastLine) {
  // Something else listens on the business port: the daemon cannot serve.
  auto port = PickListenPort();
  CREST_ASSERT_OK(port.status());
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  auto s = Make({"--time-scale", "50"}, 20, {{{"ServerConfig", "port"}, absl::StrCat(*port)}});
  auto events = Start(*s, {});
  ::close(fd);
  ASSERT_TRUE(events.back().has_failed()) << events.back().DebugString();
  const crest::v1::DaemonFailed& f = events.back().failed();
  EXPECT_EQ(f.kind(), crest::v1::DAEMON_FAILURE_EXITED);
  EXPECT_THAT(f.reason(), HasSubstr("exited before it was ready (code "));
  EXPECT_THAT(f.reason(), HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", *port)));
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
}

TEST_F(LifecycleTest, MissingBinaryIsASpawnFailure) {
  auto path = testing::WriteSimConfigJson(dir_.path() + "/mindie", sim_ports_);
  CREST_ASSERT_OK(path);
  auto config = ParseAgentConfig(
      absl::StrCat("daemon: {binary: /nonexistent/daemon, install_dir: ", dir_.path(), "/mindie}"),
      dir_.path() + "/state", testing::BinDir());
  CREST_ASSERT_OK(config);
  DaemonSupervisor s(*config, dir_.path() + "/state", &clock_);
  auto events = Start(s, {});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].failed().kind(), crest::v1::DAEMON_FAILURE_SPAWN);
}

TEST_F(LifecycleTest, StreamedLogLines) {
  auto s = Make({"--time-scale", "50"});
  StartParams params;
  params.stream_log = true;
  auto events = Start(*s, params);
  bool saw_kcache = false;
  for (const auto& e : events) {
    if (e.has_log_line() && e.log_line().line().find("k_caches[0].shape") != std::string::npos) {
      saw_kcache = true;
    }
  }
  EXPECT_TRUE(saw_kcache);
}

}  // namespace
}  // namespace crest::agent
