// mindie-sim as a real process: start-up log lines, health, streaming over
// HTTP and HTTPS with libcurl, SIGTERM, start-up failures, and the reference
// throughput shape measured over HTTP at a high time scale.
#include "sim/testing/sim_process.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "absl/strings/str_cat.h"

#include "agent/daemon_metrics.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "sim/testing/load_client.h"

namespace crest::sim {
namespace {

using ::crest::testing::TempDir;
using ::crest::testing::TestCa;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::LoadOptions;
using testing::LoadResult;
using testing::RunLoad;
using testing::SimProcess;
using testing::TestConfig;

const std::vector<std::string> kFast = {"--startup-seconds", "0", "--seed", "1", "--noise-cv", "0"};

struct Reply {
  long status = 0;
  std::string body;
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

Reply Http(const std::string& url, const std::string& post_body = "", const std::string& ca = "") {
  Reply r;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  if (!post_body.empty()) curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_body.c_str());
  if (!ca.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca.c_str());
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_cleanup(c);
  return r;
}

std::string Url(int port, const std::string& path, bool https = false) {
  return absl::StrCat(https ? "https" : "http", "://", https ? "localhost" : "127.0.0.1", ":", port,
                      path);
}

std::unique_ptr<SimProcess> StartReady(const TempDir& dir, const json& config,
                                       std::vector<std::string> args = kFast) {
  auto p = SimProcess::Start(dir.path(), config, args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  EXPECT_TRUE((*p)->WaitReady(15)) << (*p)->Output();
  return std::move(*p);
}

bool PortOpen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool open = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return open;
}

TEST(SimProcessTest, LogsKCachesShapeAndServesHealthAndMetrics) {
  TempDir dir;
  auto sim = StartReady(dir, TestConfig());
  ASSERT_NE(sim, nullptr);
  // As current MindIE-LLM: a one-block warm-up cache and the executor's
  // count (net of the reserved block) before READY, the serving cache only
  // at the first request (sim/startup_lines.h).
  std::optional<std::string> warm_up = sim->WaitForLine("k_caches[0].shape", 1);
  ASSERT_TRUE(warm_up);
  EXPECT_THAT(*warm_up, HasSubstr("[INFO]"));
  EXPECT_THAT(*warm_up, HasSubstr("<<<<<<< ori k_caches[0].shape=torch.Size([1, 128, 8, 128])"));
  EXPECT_THAT(sim->Output(), HasSubstr("Initialized KV cache overview: CPU blocks = 0, NPU "
                                       "blocks = 2175"));
  EXPECT_THAT(sim->Output(), ::testing::Not(HasSubstr("torch.Size([2176,")));
  EXPECT_EQ(Http(Url(sim->business_port, "/generate"),
                 R"({"inputs":"hi","parameters":{"max_new_tokens":1}})")
                .status,
            200);
  std::optional<std::string> serving = sim->WaitForLine("torch.Size([2176,", 5);
  ASSERT_TRUE(serving) << sim->Output();
  EXPECT_THAT(*serving, HasSubstr("<<<<<<< ori k_caches[0].shape=torch.Size([2176, 128, 8, 128])"));
  EXPECT_EQ(Http(Url(sim->management_port, "/v2/health/live")).status, 200);
  EXPECT_EQ(Http(Url(sim->management_port, "/v2/health/ready")).status, 200);
  EXPECT_EQ(Http(Url(sim->management_port, "/health/timed-5")).status, 200);
  EXPECT_EQ(Http(Url(sim->management_port, "/health/timed-0")).status, 400);
  Reply m = Http(Url(sim->metrics_port, "/metrics"));
  EXPECT_EQ(m.status, 200);
  // Every series carries model_name, as MindIE's do.
  EXPECT_THAT(m.body, HasSubstr(R"(kv_cache_blocks_usable{model_name="LLaMa3-8B"} 2175)"));
  for (const char* name :
       {"num_requests_running", "num_requests_waiting", "num_requests_swapped",
        "num_preemptions_total", "generation_tokens_total", "prompt_tokens_total",
        "request_received_total", "request_success_total", "request_failed_total"}) {
    EXPECT_THAT(m.body, HasSubstr(absl::StrCat(name, R"({model_name="LLaMa3-8B"} )")));
  }
  // A refused generation request counts as failed.
  EXPECT_EQ(Http(Url(sim->business_port, "/v1/completions"), "[1]").status, 400);
  EXPECT_THAT(Http(Url(sim->metrics_port, "/metrics")).body,
              HasSubstr(R"(request_failed_total{model_name="LLaMa3-8B"} 1)"));
}

TEST(SimProcessTest, MetricsNeedMonitorModeAndCanOmitNames) {
  TempDir dir;
  auto sim = StartReady(dir, TestConfig(),
                        {"--startup-seconds", "0", "--time-scale", "100", "--omit-metrics",
                         "num_preemptions_total,npu_cache_usage_perc"});
  ASSERT_NE(sim, nullptr);
  std::string body = Http(Url(sim->metrics_port, "/metrics")).body;
  EXPECT_THAT(body, HasSubstr("num_requests_running{"));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("num_preemptions_total")));
  EXPECT_THAT(body, ::testing::Not(HasSubstr("npu_cache_usage_perc")));

  // Without MIES_SERVICE_MONITOR_MODE=1 there are no metrics.
  TempDir dir2;
  auto off = SimProcess::Start(dir2.path(), TestConfig(), {"--startup-seconds", "0"},
                               {{"MIES_SERVICE_MONITOR_MODE", "0"}});
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_TRUE((*off)->WaitReady(15)) << (*off)->Output();
  Reply r = Http(Url((*off)->metrics_port, "/metrics"));
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("MIES_SERVICE_MONITOR_MODE"));
}

TEST(SimProcessTest, NotReadyWhileLoading) {
  TempDir dir;
  auto p = SimProcess::Start(dir.path(), TestConfig(), {"--startup-seconds", "3600"});
  ASSERT_TRUE(p.ok());
  SimProcess& sim = **p;
  ASSERT_TRUE(sim.WaitForLine("mindie-sim: listening", 10));
  ASSERT_FALSE(sim.WaitReady(0.2));
  EXPECT_EQ(Http(Url(sim.management_port, "/v2/health/ready")).status, 503);
  EXPECT_EQ(Http(Url(sim.management_port, "/v2/health/live")).status, 200);
  Reply r = Http(Url(sim.business_port, "/v1/completions"), R"({"prompt":"hi","max_tokens":2})");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, HasSubstr("\"error\""));
  sim.Signal(SIGTERM);
  EXPECT_EQ(sim.WaitExit(2), 0);
}

TEST(SimProcessTest, StreamsCompletionsAndInferOverHttp) {
  TempDir dir;
  json config = TestConfig();
  config["BackendConfig"]["ScheduleConfig"]["maxIterTimes"] = 8;
  auto sim = StartReady(dir, config, {"--startup-seconds", "0", "--time-scale", "100"});
  ASSERT_NE(sim, nullptr);
  LoadOptions o;
  o.url = Url(sim->business_port, "/v1/completions");
  o.concurrency = 4;
  o.bodies.assign(4, R"({"model":"LLaMa3-8B","prompt":"Janet has 3 eggs","max_tokens":5,)"
                     R"("stream":true,"ignore_eos":true})");
  LoadResult r = RunLoad(o);
  EXPECT_EQ(r.ok, 4) << r.first_error;
  EXPECT_EQ(r.events, 20);
  EXPECT_EQ(r.completion_tokens, 20);
  EXPECT_THAT(r.first_body, HasSubstr("\"object\":\"text_completion\""));
  EXPECT_THAT(r.first_body, HasSubstr("\"finish_reason\":\"length\""));
  EXPECT_THAT(r.first_body, HasSubstr("\"usage\":{\"prompt_tokens\":"));
  EXPECT_THAT(r.first_body, HasSubstr("\"completion_tokens\":5,"));
  EXPECT_TRUE(r.first_body.ends_with("data: [DONE]\n\n"));
  // Every event is one JSON object.
  size_t pos = 0;
  while ((pos = r.first_body.find("data: {", pos)) != std::string::npos) {
    size_t end = r.first_body.find("\n\n", pos);
    EXPECT_FALSE(
        json::parse(r.first_body.substr(pos + 6, end - pos - 6), nullptr, false).is_discarded());
    pos = end;
  }

  // max_tokens above maxIterTimes is capped at 8.
  o.url = Url(sim->business_port, "/infer");
  o.concurrency = 1;
  o.bodies = {R"({"inputs":"hello","stream":true,"parameters":{"max_new_tokens":100,)"
              R"("ignore_eos":true}})"};
  r = RunLoad(o);
  EXPECT_EQ(r.events, 8);
  EXPECT_THAT(r.first_body, HasSubstr("\"details\":{\"finish_reason\":\"length\","
                                      "\"generated_tokens\":8,"));
  EXPECT_THAT(r.first_body, HasSubstr("\"token\":{\"id\":"));

  Reply g = Http(Url(sim->business_port, "/generate"),
                 R"({"inputs":"hello","parameters":{"max_new_tokens":3,"ignore_eos":true}})");
  EXPECT_EQ(g.status, 200);
  json gj = json::parse(g.body);
  EXPECT_EQ(gj["details"]["generated_tokens"], 3);
  EXPECT_TRUE(gj["generated_text"].is_string());

  Reply ns = Http(Url(sim->business_port, "/v1/completions"),
                  R"({"prompt":"hello","max_tokens":2,"stream":false,"ignore_eos":true})");
  EXPECT_EQ(json::parse(ns.body)["usage"]["completion_tokens"], 2);

  Reply bad = Http(Url(sim->business_port, "/v1/completions"), "{oops");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(json::parse(bad.body).contains("error_type"));
  Reply bad_max =
      Http(Url(sim->business_port, "/v1/completions"), R"({"prompt":"x","max_tokens":"many"})");
  EXPECT_EQ(bad_max.status, 400);
  EXPECT_THAT(bad_max.body, HasSubstr("max_tokens"));
  EXPECT_EQ(Http(Url(sim->business_port, "/nope"), "{}").status, 404);
}

TEST(SimProcessTest, StreamsOverHttps) {
  TempDir dir;
  auto ca = TestCa::Create(dir.path(), "sim");
  ASSERT_TRUE(ca.ok());
  auto leaf = ca->Issue("localhost");
  ASSERT_TRUE(leaf.ok());
  json config = TestConfig();
  config["ServerConfig"]["httpsEnabled"] = true;
  config["ServerConfig"]["tlsCert"] = leaf->cert;
  config["ServerConfig"]["tlsPk"] = leaf->key;
  config["ServerConfig"]["tlsCaFile"] = json::array();
  auto sim = StartReady(dir, config, {"--startup-seconds", "0", "--time-scale", "100"});
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(Http(Url(sim->management_port, "/v2/health/ready", true), "", ca->ca_file()).status,
            200);
  EXPECT_EQ(Http(Url(sim->management_port, "/v2/health/ready", false)).status, 0);  // not TLS
  LoadOptions o;
  o.url = Url(sim->business_port, "/v1/completions", true);
  o.ca_file = ca->ca_file();
  o.concurrency = 3;
  o.bodies.assign(3, R"({"prompt":"hi","max_tokens":4,"stream":true,"ignore_eos":true})");
  LoadResult r = RunLoad(o);
  EXPECT_EQ(r.ok, 3) << r.first_error;
  EXPECT_EQ(r.events, 12);
}

TEST(SimProcessTest, SigtermExitsZeroPromptlyAndClosesPorts) {
  TempDir dir;
  // Real time: a long stream stays in flight when the signal arrives.
  auto sim = StartReady(dir, TestConfig(), {"--startup-seconds", "0"});
  ASSERT_NE(sim, nullptr);
  int port = sim->business_port;
  std::thread client([port] {
    Http(Url(port, "/v1/completions"),
         R"({"prompt":"hi","max_tokens":500,"stream":true,"ignore_eos":true})");
  });
  ASSERT_TRUE(sim->WaitForLine("Daemon start success!", 1));
  EXPECT_TRUE(PortOpen(port));
  sim->Signal(SIGTERM);
  EXPECT_EQ(sim->WaitExit(1.0), 0);
  client.join();
  EXPECT_FALSE(PortOpen(port));
  EXPECT_FALSE(PortOpen(sim->management_port));
}

TEST(SimProcessTest, SigintExitsZero) {
  TempDir dir;
  auto sim = StartReady(dir, TestConfig());
  ASSERT_NE(sim, nullptr);
  sim->Signal(SIGINT);
  EXPECT_EQ(sim->WaitExit(1.0), 0);
}

TEST(SimProcessTest, OutOfMemoryAtStartExitsOne) {
  TempDir dir;
  json config = TestConfig();
  config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["npuMemSize"] = 60;
  auto p = SimProcess::Start(dir.path(), config, kFast);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->WaitExit(10), 1);
  EXPECT_TRUE((*p)->WaitForLine("NPU out of memory", 2)) << (*p)->Output();
  EXPECT_THAT((*p)->Output(), HasSubstr("[ERROR]"));
  EXPECT_THAT((*p)->Output(), ::testing::Not(HasSubstr("Daemon start success!")));
}

TEST(SimProcessTest, InvalidConfigExitsTwoNamingTheKey) {
  TempDir dir;
  json config = TestConfig();
  config["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] = "500";
  auto p = SimProcess::Start(dir.path(), config, kFast);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->WaitExit(10), 2);
  EXPECT_TRUE((*p)->WaitForLine(
      "BackendConfig.ScheduleConfig.maxBatchSize: expected integer, got string", 2))
      << (*p)->Output();
}

TEST(SimProcessTest, UnknownModelExitsTwo) {
  TempDir dir;
  json config = TestConfig();
  config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["modelName"] = "gpt-9";
  auto p = SimProcess::Start(dir.path(), config, kFast);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->WaitExit(10), 2);
  EXPECT_THAT((*p)->Output(), HasSubstr("modelName: no profile for \"gpt-9\""));
}

// The simulated NPU time the sim's engine has run, from its /metrics.
double SimulatedSeconds(const SimProcess& sim) {
  Reply m = Http(Url(sim.metrics_port, "/metrics"));
  EXPECT_EQ(m.status, 200) << m.body;
  absl::StatusOr<std::vector<agent::PromSample>> samples = agent::ParsePrometheusText(m.body);
  EXPECT_TRUE(samples.ok()) << samples.status();
  if (!samples.ok()) return 0;
  return agent::TotalsOf(*samples)["mindie_sim_simulated_seconds_total"];
}

// GSM8K, Concurrency 1000, MaxOutputLen 512 over real HTTP at time scale 50
// (non-streaming): 500 beats 435, 600 falls. Throughput is the client's
// tokens over the simulated time the engine ran, not over wall time: on a
// machine busy with other tests neither the sim nor the client keeps up with
// 50x real time, and a wall-time figure is then the CPU's, flat at every size
// (seen under ctest -j2). The 1000 clients keep hundreds of requests waiting
// at every size, so a slow client does not starve the batch either.
TEST(SimProcessTest, ReferenceShapeOverHttp) {
  std::ifstream in(testing::SourceDir() + "/data/gsm8k/test.jsonl");
  std::vector<std::string> bodies;
  for (std::string line; std::getline(in, line);) {
    json q = json::parse(line);
    bodies.push_back(json{
        {"inputs", q["question"]}, {"stream", false}, {"parameters", {{"max_new_tokens", 512}}}}
                         .dump());
  }
  ASSERT_EQ(bodies.size(), 1319U);
  std::map<int, double> speed;
  for (int bs : {435, 500, 600}) {
    TempDir dir;
    json config = TestConfig();
    config["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] = bs;
    config["BackendConfig"]["ScheduleConfig"]["maxPrefillBatchSize"] = bs / 2;
    auto sim = StartReady(dir, config,
                          {"--startup-seconds", "0", "--time-scale", "50", "--noise-cv", "0"});
    ASSERT_NE(sim, nullptr);
    LoadOptions o;
    o.url = Url(sim->business_port, "/infer");
    o.concurrency = 1000;
    o.bodies = bodies;
    LoadResult r = RunLoad(o);
    ASSERT_EQ(r.ok, 1319) << r.first_error;
    double simulated = SimulatedSeconds(*sim);
    ASSERT_GT(simulated, 0);
    speed[bs] = static_cast<double>(r.completion_tokens) / simulated;
    std::printf("maxBatchSize %d: %.0f token/s (simulated time; %.0f by wall time)\n", bs,
                speed[bs], static_cast<double>(r.completion_tokens) / r.elapsed_seconds / 50.0);
  }
  EXPECT_GT(speed[500], speed[435]);
  EXPECT_LT(speed[600], 0.93 * speed[500]);
  EXPECT_LT(speed[600], speed[435]);
}

}  // namespace
}  // namespace crest::sim
