#include "agent/agent_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/testing/status_matchers.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

AgentConfig ConfigFrom(const std::string& yaml) {
  auto c = ParseAgentConfig(yaml, "/state", "/bin");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(AgentConfigTest, DefaultsToTheSimulatorBesideTheBinary) {
  AgentConfig c = ConfigFrom("");
  EXPECT_TRUE(c.use_builtin_sim);
  EXPECT_EQ(c.backend, "mindie-sim");
  EXPECT_EQ(c.binary, "/bin/mindie-sim");
  EXPECT_EQ(c.config_json, "/state/sim/conf/config.json");
  EXPECT_EQ(c.limits.size(), 6u);
  EXPECT_EQ(c.daemon_metrics_period, absl::Seconds(1));
  EXPECT_EQ(ConfigFrom("daemon_metrics_period_s: 0.25").daemon_metrics_period,
            absl::Milliseconds(250));
}

TEST(AgentConfigTest, DaemonSectionResolvesPaths) {
  AgentConfig c = ConfigFrom(
      "daemon:\n  binary: bin/mindieservice_daemon\n  install_dir: /opt/mindie\n"
      "  env: {A: b}\n  start_timeout_s: 30\n  args: [--x]\n");
  EXPECT_FALSE(c.use_builtin_sim);
  EXPECT_EQ(c.backend, "mindie");
  EXPECT_EQ(c.binary, "/opt/mindie/bin/mindieservice_daemon");
  EXPECT_EQ(c.config_json, "/opt/mindie/conf/config.json");
  EXPECT_EQ(c.env.at("A"), "b");
  EXPECT_EQ(c.start_timeout, absl::Seconds(30));
  EXPECT_EQ(c.log_file, "/state/daemon.log");
}

TEST(AgentConfigTest, ErrorsNameTheKey) {
  auto check = [](const std::string& yaml, const char* what) {
    EXPECT_THAT(ParseAgentConfig(yaml, "/state", "/bin"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)))
        << yaml;
  };
  check("daemon: {binray: x}", "daemon.binray: unknown key");
  check("daemon: {install_dir: /x}", "daemon.binary");
  check("daemon: {binary: x, install_dir: rel}", "must be absolute");
  check("daemon: {binary: /x, start_timeout_s: 0}", "start_timeout_s");
  check("limits: {maxBatchSize: {min: 0, max: 10}}", "limits.maxBatchSize");
  check("limits: {npuMemSize: {max: 1}}", "limits.npuMemSize: unknown key");
  check("limits: {supportSelectBatch: {max: 1}}", "boolean");
  check("sim: {port: 70000}", "sim.port: 70000 is out of range, expected 0 or [1024, 65535]");
  check("[unclosed", "agent config");
  check("daemon_metrics_period_s: -1", "daemon_metrics_period_s: -1 is out of range");
  check("daemon_metrics_period_s: soon", "daemon_metrics_period_s: cannot read");
}

// The current MindIE-LLM entry point and its config file in site-packages.
TEST(AgentConfigTest, MindieLlmServerWithItsConfigInSitePackages) {
  AgentConfig c = ConfigFrom(
      "daemon:\n  binary: /usr/local/bin/mindie_llm_server\n  install_dir: /opt/mindie\n"
      "  config_json: /usr/lib/python3.11/site-packages/mindie_llm/conf/config.json\n");
  EXPECT_EQ(c.binary, "/usr/local/bin/mindie_llm_server");
  EXPECT_EQ(c.config_json, "/usr/lib/python3.11/site-packages/mindie_llm/conf/config.json");
}

TEST(AgentConfigTest, BenchmarkToolChoosesTheClient) {
  EXPECT_EQ(ConfigFrom("").benchmark_tool.kind, "");
  EXPECT_EQ(ConfigFrom("benchmark_tool: {kind: crest-bench}").benchmark_tool.kind, "");
  BenchmarkTool ais =
      ConfigFrom(
          "benchmark_tool: {kind: aisbench, binary: /opt/ais_bench, datasets: synthetic_gen}")
          .benchmark_tool;
  EXPECT_EQ(ais.kind, "aisbench");
  EXPECT_EQ(ais.binary, "/opt/ais_bench");
  EXPECT_EQ(ais.datasets, "synthetic_gen");
  EXPECT_EQ(ais.models, "vllm_api_stream_chat");
  EXPECT_EQ(ais.work_dir, "/state/aisbench");
  BenchmarkTool mindie =
      ConfigFrom("benchmark_tool: {kind: mindie-benchmark, binary: benchmark, model_path: /w}")
          .benchmark_tool;
  EXPECT_EQ(mindie.save_path, "/state/mindie-benchmark");
  EXPECT_EQ(mindie.model_path, "/w");
  EXPECT_THAT(ParseAgentConfig("benchmark_tool: {kind: wrk}", "/state", "/bin"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("benchmark_tool.kind: \"wrk\" is not a client; expected "
                                 "crest-bench, mindie-benchmark or aisbench")));
  EXPECT_THAT(
      ParseAgentConfig("benchmark_tool: {kind: aisbench}", "/state", "/bin"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("benchmark_tool.binary: missing; expected the path of ais_bench")));
  EXPECT_THAT(ParseAgentConfig("benchmark_tool: {kind: aisbench, binray: x}", "/state", "/bin"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("benchmark_tool.binray: unknown key")));
}

// The agent refuses the sim ports mindie-sim would refuse in the config.json
// the agent writes for it (mindie::IsSimPort): 0 (OS-assigned) or a MindIE port.
TEST(AgentConfigTest, SimPortsAreTheSimulatorsRange) {
  for (const char* bad : {"sim: {port: 80}", "sim: {management_port: 1023}",
                          "sim: {metrics_port: -1}", "sim: {port: 65536}"}) {
    EXPECT_THAT(
        ParseAgentConfig(bad, "/state", "/bin"),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 0 or [1024, 65535]")))
        << bad;
  }
  auto ok = ParseAgentConfig("sim: {port: 0, management_port: 1024, metrics_port: 65535}", "/state",
                             "/bin");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->sim.port, 0);
  EXPECT_EQ(ok->sim.management_port, 1024);
  EXPECT_EQ(ok->sim.metrics_port, 65535);
}

}  // namespace
}  // namespace crest::agent
