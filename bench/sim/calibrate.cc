// sim-calibrate: prints the virtual-time GSM8K benchmark table (MindIE's
// benchmark, Concurrency 1000, MaxOutputLen 512) for a profile over a range
// of maxBatchSize values, next to the MindIE best-practice reference.
#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/paths.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/simulate.h"

int main(int argc, char** argv) {
  CLI::App app("sim-calibrate: GSM8K throughput table of a mindie-sim profile", "sim-calibrate");
  std::string profile_name = "llama3-8b-910b";
  std::string dataset;
  std::vector<int> batch_sizes = {200, 300, 362, 400, 435, 500, 550, 600, 700, 800};
  int concurrency = 1000;
  int max_output = 512;
  bool select_batch = false;
  double npu_mem = 17;
  double noise_cv = 0;
  uint64_t seed = 1;
  app.add_option("--profile", profile_name, "profile name or file");
  app.add_option("--dataset", dataset, "GSM8K test.jsonl (default: shipped)");
  app.add_option("--batch-sizes", batch_sizes, "maxBatchSize values");
  app.add_option("--concurrency", concurrency, "closed-loop clients");
  app.add_option("--max-output", max_output, "MaxOutputLen (= maxIterTimes)");
  app.add_option("--npu-mem", npu_mem, "npuMemSize GiB");
  app.add_flag("--select-batch", select_batch, "supportSelectBatch true");
  app.add_option("--noise-cv", noise_cv, "noise CV");
  app.add_option("--seed", seed, "noise seed");
  std::vector<double> timing_override;
  app.add_option("--timing", timing_override,
                 "override: decode_base decode_seq decode_ctx prefill_base prefill_seq "
                 "prefill_token preempt")
      ->expected(7);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  auto share = crest::ShareDir();
  if (!share.ok()) return crest::FailWithMessage(app, share.status().ToString());
  if (dataset.empty()) dataset = *share + "/datasets/gsm8k/test.jsonl";
  auto profile = crest::sim::FindProfile(*share + "/profiles", profile_name, "");
  if (!profile.ok()) return crest::FailWithMessage(app, profile.status().ToString());
  if (timing_override.size() == 7) {
    std::array<double, crest::sim::kStepCoefficients> a{};
    std::copy(timing_override.begin(), timing_override.end(), a.begin());
    profile->timing = crest::sim::StepTimeModel::FromArray(a);
  }
  const auto& dist = profile->workloads.at(profile->default_workload);
  std::ifstream in(dataset);
  std::vector<crest::sim::WorkloadRequest> requests;
  double in_sum = 0;
  double out_sum = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("question")) continue;
    std::string q = j["question"].get<std::string>();
    int p = crest::sim::CountPromptTokens(q, profile->prompt_template_tokens);
    int o = std::min(crest::sim::NaturalOutputLength(dist, q), max_output);
    requests.push_back({p, o});
    in_sum += p;
    out_sum += o;
  }
  if (requests.empty()) return crest::FailWithMessage(app, "no questions in " + dataset);
  auto kv = crest::sim::ComputeKvCache(*profile, profile->reference_world_size, npu_mem, 128);
  if (!kv.ok()) return crest::FailWithMessage(app, kv.status().ToString());
  std::printf("profile %s: %zu requests, avg input %.1f, avg output %.1f, npuBlockNum %lld\n",
              profile->name.c_str(), requests.size(), in_sum / requests.size(),
              out_sum / requests.size(), static_cast<long long>(kv->computed_blocks));
  std::printf("%8s %12s %10s %10s %10s %10s %8s\n", "maxBS", "GenSpeed", "PerClient", "elapsed_s",
              "preempt", "mean_run", "steps");
  for (int bs : batch_sizes) {
    crest::sim::SchedulerConfig c;
    c.max_batch_size = bs;
    c.max_prefill_batch_size = std::max(1, bs / 2);
    c.max_prefill_tokens = 8192;
    c.block_size = 128;
    c.num_blocks = kv->usable_blocks;
    c.support_select_batch = select_batch;
    auto r = crest::sim::SimulateWorkload(c, profile->TimingAt(profile->reference_world_size),
                                          requests, concurrency, noise_cv, seed);
    std::printf("%8d %12.1f %10.4f %10.1f %10lld %10.1f %8lld\n", bs, r.generate_speed,
                r.generate_speed_per_client, r.elapsed_seconds,
                static_cast<long long>(r.stats.preemptions), r.mean_running,
                static_cast<long long>(r.stats.prefill_steps) +
                    static_cast<long long>(r.stats.decode_steps));
  }
  std::printf("reference (MindIE best practice): 435 -> 2.8453, 500 -> 2.9803, 600 -> 2.5206\n");
  return 0;
}
