// The daemon's own metrics in every benchmark, with a real crest-agent and a
// real mindie-sim: preemptions past the KV-cache knee and none well below it,
// the server's succeeded count equal to the client's (warm-up excluded), a
// metric the daemon does not publish left absent, and a daemon without
// monitor mode giving an error but never failing the benchmark.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "common/tls.h"
#include "crest/v1/agent.grpc.pb.h"
#include "tests/agent/agent_test_util.h"

namespace crest::agent {
namespace {

using testing::AgentProcess;
using ::testing::HasSubstr;

// npuMemSize 1 GiB: 128 blocks of 128 tokens (127 usable), so the knee of
// LLaMa3-8B with ~200-token prompts and 200 generated tokens lies near 40
// sequences (mindie-facts.md: 8 MiB per block).
class DaemonMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteFakeSysfs(dir_.path() + "/sys", {}); }

  // A crest-agent running mindie-sim with `sim_args` and daemon `env`.
  // `edits` of config.json and `ca_file` (daemon.ca_file) for an https daemon.
  // The agent lives as long as the test fixture, so TearDown can still reach it.
  AgentProcess* StartAgent(const std::string& name, const std::vector<std::string>& sim_args,
                           const std::string& env_yaml = "{}",
                           std::vector<std::pair<std::vector<std::string>, std::string>> edits = {},
                           const std::string& ca_file = "") {
    std::string home = dir_.File(name);
    edits.push_back(
        {{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "npuMemSize"}, "1"});
    auto config = testing::WriteSimConfigJson(home + "/mindie", sim_ports_, edits);
    EXPECT_TRUE(config.ok()) << config.status();
    std::vector<std::string> args = {"\"--config\"",     absl::StrCat("\"", *config, "\""),
                                     "\"--time-scale\"", "\"100\"",
                                     "\"--seed\"",       "\"5\""};
    for (const std::string& a : sim_args) args.push_back(absl::StrCat("\"", a, "\""));
    std::ofstream(home + "/agent.yaml")
        << "daemon:\n  binary: " << testing::BinDir() << "/mindie-sim\n  install_dir: " << home
        << "/mindie\n  args: [" << absl::StrJoin(args, ", ") << "]\n  env: " << env_yaml
        << "\n  ca_file: \"" << ca_file
        << "\"\n  start_timeout_s: 20\n  stop_grace_s: 5\ndaemon_metrics_period_s: 0.05\n";
    auto agent = AgentProcess::Start({"--listen", "127.0.0.1:0", "--state-dir", home + "/state",
                                      "--sysfs-root", dir_.path() + "/sys", "--config",
                                      home + "/agent.yaml", "--node-name", name, "--insecure"});
    EXPECT_TRUE(agent.ok()) << agent.status();
    if (!agent.ok()) return nullptr;
    TlsOptions tls;
    tls.insecure = true;
    auto channel = MakeChannel((*agent)->address(), tls);
    EXPECT_TRUE(channel.ok());
    stub_ = crest::v1::NodeAgent::NewStub(*channel);
    agent_ = std::move(*agent);
    return agent_.get();
  }

  void StartDaemon(int max_batch_size) {
    crest::v1::StartDaemonRequest req;
    req.add_overrides()->set_key("maxBatchSize");
    req.mutable_overrides(0)->set_int_value(max_batch_size);
    req.add_overrides()->set_key("maxPrefillBatchSize");
    req.mutable_overrides(1)->set_int_value(std::max(1, max_batch_size / 2));
    req.set_replace_running(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(true);  // a loaded machine may be slow to connect
    auto reader = stub_->StartDaemon(&ctx, req);
    crest::v1::DaemonEvent e;
    crest::v1::DaemonEvent last;
    while (reader->Read(&e)) last = e;
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_TRUE(last.has_ready()) << last.DebugString();
  }

  // Concurrency maxBatchSize - 1, as the practice runs it.
  crest::v1::BenchmarkResult Run(uint32_t concurrency, uint32_t requests, uint32_t warmup = 0) {
    crest::v1::RunBenchmarkRequest req;
    crest::v1::BenchmarkSpec* spec = req.mutable_spec();
    spec->set_concurrency(concurrency);
    spec->set_request_count(requests);
    spec->set_warmup_requests(warmup);
    spec->set_max_output_len(200);
    spec->set_seed(11);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    ctx.set_wait_for_ready(true);
    auto reader = stub_->RunBenchmark(&ctx, req);
    crest::v1::BenchmarkEvent e;
    crest::v1::BenchmarkResult result;
    while (reader->Read(&e)) {
      if (e.has_result()) result = e.result();
    }
    grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    return result;
  }

  // Each test stops its daemon through the agent (the kernel would stop it
  // with the agent too, by the parent-death signal, but not when asked).
  void TearDown() override {
    if (stub_ == nullptr) return;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    crest::v1::StopDaemonReply reply;
    const grpc::Status s = stub_->StopDaemon(&ctx, crest::v1::StopDaemonRequest(), &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  crest::testing::TempDir dir_;
  std::vector<PortReservation> sim_ports_;  // config.json's, held for the test
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<crest::v1::NodeAgent::Stub> stub_;
};

TEST_F(DaemonMetricsTest, PreemptionsPastTheKneeAndNoneWellBelowIt) {
  auto agent = StartAgent("n1", {});
  ASSERT_NE(agent, nullptr);

  // Well below the knee: 8 sequences of at most ~5 blocks in 127.
  StartDaemon(9);
  crest::v1::BenchmarkResult below = Run(8, 24, /*warmup=*/4);
  ASSERT_EQ(below.failed(), 0u);
  ASSERT_TRUE(below.has_daemon());
  const auto& b = below.daemon();
  EXPECT_EQ(b.error(), "");
  ASSERT_TRUE(b.has_preemptions());
  EXPECT_EQ(b.preemptions(), 0u);  // published and none: 0, not absent
  // The "before" scrape follows the warm-up: the server counted exactly the
  // client's measured requests.
  ASSERT_TRUE(b.has_succeeded());
  EXPECT_EQ(b.succeeded(), below.succeeded());
  EXPECT_EQ(b.failed(), 0u);
  ASSERT_TRUE(b.has_peak_running());
  EXPECT_LE(b.peak_running(), 8u);
  EXPECT_TRUE(b.has_peak_waiting());
  ASSERT_TRUE(b.has_peak_kv_cache_usage());
  EXPECT_LE(b.peak_kv_cache_usage(), 1.0);

  // Past the knee: ~60 sequences of 2 blocks fill the cache at admission and
  // each needs more as it grows past 128 tokens, so the engine preempts.
  StartDaemon(101);
  crest::v1::BenchmarkResult past = Run(100, 200);
  ASSERT_EQ(past.failed(), 0u);
  const auto& p = past.daemon();
  EXPECT_EQ(p.error(), "");
  EXPECT_GT(p.preemptions(), 0u);
  EXPECT_EQ(p.succeeded(), past.succeeded());
  EXPECT_LE(p.peak_running(), 100u);
  EXPECT_LE(p.peak_kv_cache_usage(), 1.0);
  std::printf("below the knee: %s\npast the knee: %s\n", b.ShortDebugString().c_str(),
              p.ShortDebugString().c_str());
}

TEST_F(DaemonMetricsTest, AMetricTheDaemonDoesNotPublishIsAbsent) {
  auto agent = StartAgent("n2", {"--omit-metrics", "num_preemptions_total,npu_cache_usage_perc"});
  ASSERT_NE(agent, nullptr);
  StartDaemon(101);
  crest::v1::BenchmarkResult past = Run(100, 200);
  const auto& d = past.daemon();
  EXPECT_EQ(d.error(), "");
  EXPECT_FALSE(d.has_preemptions());  // past the knee, yet unknown: never 0
  EXPECT_EQ(d.succeeded(), past.succeeded());
  // The block gauges still give the cache use.
  EXPECT_TRUE(d.has_peak_kv_cache_usage());
}

TEST_F(DaemonMetricsTest, MetricsOverHttpsWhenTheDaemonIsHttps) {
  auto ca = crest::testing::TestCa::Create(dir_.path(), "daemon");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto leaf = ca->Issue("localhost");
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  auto agent = StartAgent("n4", {}, "{}",
                          {{{"ServerConfig", "httpsEnabled"}, "true"},
                           {{"ServerConfig", "tlsCert"}, absl::StrCat("\"", leaf->cert, "\"")},
                           {{"ServerConfig", "tlsPk"}, absl::StrCat("\"", leaf->key, "\"")},
                           {{"ServerConfig", "tlsCaFile"}, "[]"}},
                          ca->ca_file());
  ASSERT_NE(agent, nullptr);
  StartDaemon(9);
  crest::v1::BenchmarkResult r = Run(8, 16);
  EXPECT_EQ(r.succeeded(), 16u);
  EXPECT_EQ(r.daemon().error(), "");
  EXPECT_EQ(r.daemon().succeeded(), 16u);
  EXPECT_EQ(r.daemon().preemptions(), 0u);
}

TEST_F(DaemonMetricsTest, WithoutMonitorModeTheErrorIsSaidAndTheBenchmarkStands) {
  auto agent = StartAgent("n3", {}, R"({MIES_SERVICE_MONITOR_MODE: "0"})");
  ASSERT_NE(agent, nullptr);
  StartDaemon(9);
  crest::v1::BenchmarkResult r = Run(8, 16);
  EXPECT_EQ(r.succeeded(), 16u);
  ASSERT_TRUE(r.has_daemon());
  EXPECT_THAT(r.daemon().error(), HasSubstr("scrape before the run"));
  EXPECT_THAT(r.daemon().error(), HasSubstr("HTTP 404"));
  EXPECT_FALSE(r.daemon().has_preemptions());
  EXPECT_FALSE(r.daemon().has_succeeded());
  EXPECT_FALSE(r.daemon().has_peak_running());
}

}  // namespace
}  // namespace crest::agent
