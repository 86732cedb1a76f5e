// sim-bench: starts mindie-sim (LLaMa3-8B profile, GSM8K prompts) at a series
// of time scales, drives 1000 concurrent streaming connections with libcurl,
// and prints the token rate the client measured against the model's own
// (virtual-time) prediction, and the simulator's CPU use from /proc/PID/stat.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/testing/test_ca.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/simulate.h"
#include "sim/testing/load_client.h"
#include "sim/testing/sim_process.h"

namespace {

// utime + stime of `pid` in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("sim-bench: mindie-sim under 1000 streaming connections", "sim-bench");
  std::vector<double> scales = {20, 40, 60};
  int max_batch = 500;
  int concurrency = 1000;
  app.add_option("--time-scales", scales, "time scales to run");
  app.add_option("--max-batch-size", max_batch, "maxBatchSize");
  app.add_option("--concurrency", concurrency, "streaming connections");
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  std::string source = crest::sim::testing::SourceDir();
  auto profile = crest::sim::LoadProfileFile(source + "/sim/profiles/llama3-8b-910b.json");
  if (!profile.ok()) return crest::FailWithMessage(app, profile.status().ToString());
  const auto& dist = profile->workloads.at("gsm8k");
  std::ifstream in(source + "/data/gsm8k/test.jsonl");
  std::vector<std::string> bodies;
  std::vector<crest::sim::WorkloadRequest> model_requests;
  for (std::string line; std::getline(in, line);) {
    std::string q = nlohmann::json::parse(line)["question"].get<std::string>();
    bodies.push_back(nlohmann::json{
        {"model", "LLaMa3-8B"},
        {"prompt", q},
        {"max_tokens", 512},
        {"stream", true}}.dump());
    model_requests.push_back({crest::sim::CountPromptTokens(q, profile->prompt_template_tokens),
                              std::min(512, crest::sim::NaturalOutputLength(dist, q))});
  }
  auto kv = crest::sim::ComputeKvCache(*profile, 1, 17, 128).value();
  crest::sim::SchedulerConfig sc;
  sc.max_batch_size = max_batch;
  sc.max_prefill_batch_size = max_batch / 2;
  sc.num_blocks = kv.usable_blocks;
  auto model =
      crest::sim::SimulateWorkload(sc, profile->TimingAt(1), model_requests, concurrency, 0, 1);
  std::printf("model (virtual time): %.1f token/s at maxBatchSize %d, %d connections\n",
              model.generate_speed, max_batch, concurrency);
  std::printf("%8s %14s %14s %8s %10s %8s %8s\n", "scale", "model_tok/s", "client_tok/s", "ratio",
              "sim_cpu%", "ok", "failed");
  double best = 0;
  for (double k : scales) {
    crest::testing::TempDir dir;
    nlohmann::json config = crest::sim::testing::TestConfig();
    config["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] = max_batch;
    config["BackendConfig"]["ScheduleConfig"]["maxPrefillBatchSize"] = max_batch / 2;
    auto sim = crest::sim::testing::SimProcess::Start(
        dir.path(), config,
        {"--startup-seconds", "0", "--noise-cv", "0", "--time-scale", std::to_string(k)});
    if (!sim.ok() || !(*sim)->WaitReady(20))
      return crest::FailWithMessage(app, "sim did not start");
    crest::sim::testing::LoadOptions o;
    o.url = "http://127.0.0.1:" + std::to_string((*sim)->business_port) + "/v1/completions";
    o.concurrency = concurrency;
    o.bodies = bodies;
    o.timeout_seconds = 600;
    double cpu0 = CpuSeconds((*sim)->pid());
    auto r = crest::sim::testing::RunLoad(o);
    double cpu = CpuSeconds((*sim)->pid()) - cpu0;
    double client = static_cast<double>(r.events) / r.elapsed_seconds;
    double expected = model.generate_speed * k;
    double ratio = client / expected;
    if (ratio > 0.98 && client > best) best = client;
    std::printf("%8.0f %14.0f %14.0f %8.3f %10.1f %8d %8d\n", k, expected, client, ratio,
                100.0 * cpu / r.elapsed_seconds, r.ok, r.failed);
    std::fflush(stdout);
  }
  std::printf("highest token rate sustained within 2%% of the model: %.0f token/s\n", best);
  return 0;
}
