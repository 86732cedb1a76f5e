#include "sim/simulate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::crest::testing::IsOk;
using ::testing::HasSubstr;

using ::crest::sim::testing::Gsm8k;
using ::crest::sim::testing::LoadGsm8k;

WorkloadResult RunGsm8k(const Gsm8k& g, int max_batch, double cv = 0, uint64_t seed = 1) {
  KvCacheLayout kv = ComputeKvCache(g.profile, 1, 17, 128).value();
  SchedulerConfig c;
  c.max_batch_size = max_batch;
  c.max_prefill_batch_size = max_batch / 2;
  c.max_prefill_tokens = 8192;
  c.block_size = 128;
  c.num_blocks = kv.usable_blocks;
  return SimulateWorkload(c, g.profile.TimingAt(1), g.requests, 1000, cv, seed);
}

TEST(SimulateTest, Gsm8kRequestLengthsMatchTheReferenceRun) {
  Gsm8k g = LoadGsm8k(512);
  ASSERT_EQ(g.requests.size(), 1319U);
  EXPECT_NEAR(g.avg_in, 186, 3);
  EXPECT_NEAR(g.avg_out, 346, 8);
}

// The MindIE best-practice table: maxBatchSize 435 / 500 / 600 with GSM8K,
// Concurrency 1000, MaxOutputLen 512 -> 2.8453 / 2.9803 / 2.5206 token/s per client.
TEST(SimulateTest, Llama3ProfileReproducesTheReferenceTable) {
  Gsm8k g = LoadGsm8k(512);
  WorkloadResult r435 = RunGsm8k(g, 435);
  WorkloadResult r500 = RunGsm8k(g, 500);
  WorkloadResult r600 = RunGsm8k(g, 600);
  EXPECT_GT(r500.generate_speed, r435.generate_speed);
  EXPECT_LT(r600.generate_speed, 0.95 * r435.generate_speed);
  EXPECT_NEAR(r435.generate_speed_per_client, 2.8453, 0.03 * 2.8453);
  EXPECT_NEAR(r500.generate_speed_per_client, 2.9803, 0.03 * 2.9803);
  EXPECT_NEAR(r600.generate_speed_per_client, 2.5206, 0.03 * 2.5206);
  // The fall past the peak comes from KV-block preemption.
  EXPECT_EQ(r500.stats.preemptions, 0);
  EXPECT_GT(r600.stats.preemptions, 100);
  EXPECT_EQ(r600.generated_tokens, r500.generated_tokens);
}

TEST(SimulateTest, DeterministicForASeedAndNoisyAcrossSeeds) {
  Gsm8k g = LoadGsm8k(512);
  WorkloadResult a = RunGsm8k(g, 500, 0.05, 7);
  WorkloadResult b = RunGsm8k(g, 500, 0.05, 7);
  WorkloadResult c = RunGsm8k(g, 500, 0.05, 8);
  EXPECT_DOUBLE_EQ(a.generate_speed, b.generate_speed);
  EXPECT_NE(a.generate_speed, c.generate_speed);
  EXPECT_NEAR(a.generate_speed / RunGsm8k(g, 500).generate_speed, 1.0, 0.25);
}

TEST(SimulateTest, SelectBatchBatchesPrefills) {
  Gsm8k g = LoadGsm8k(512);
  KvCacheLayout kv = ComputeKvCache(g.profile, 1, 17, 128).value();
  SchedulerConfig c;
  c.max_batch_size = 400;
  c.max_prefill_batch_size = 200;
  c.num_blocks = kv.usable_blocks;
  WorkloadResult off = SimulateWorkload(c, g.profile.TimingAt(1), g.requests, 1000, 0, 1);
  c.support_select_batch = true;
  WorkloadResult on = SimulateWorkload(c, g.profile.TimingAt(1), g.requests, 1000, 0, 1);
  EXPECT_LT(on.stats.prefill_steps, off.stats.prefill_steps / 2);
  EXPECT_GT(on.generate_speed, off.generate_speed);
}

// The run's time, the mean first-token time and the mean decode time are
// the step counts' time (StepTimeModel::Ms) under any coefficients: the
// schedule does not depend on the step times, select-batch included (it
// decides from config.json's per-request times). A profile fitted to
// measured runs rests on this.
TEST(SimulateTest, TimesAreLinearInTheStepCoefficients) {
  Gsm8k g = LoadGsm8k(512);
  KvCacheLayout kv = ComputeKvCache(g.profile, 1, 17, 128).value();
  SchedulerConfig c;
  c.max_batch_size = 700;  // past the knee: preemptions counted too
  c.max_prefill_batch_size = 350;
  c.num_blocks = kv.usable_blocks;
  c.support_select_batch = true;
  StepTimeModel other = g.profile.TimingAt(1);
  other.decode_base_ms *= 3;
  other.decode_per_context_token_ms *= 0.2;
  other.prefill_per_token_ms *= 5;
  other.preempt_overhead_ms = 0;
  for (const StepTimeModel& t : {g.profile.TimingAt(1), other}) {
    WorkloadResult r = SimulateWorkload(c, t, g.requests, 1000, 0, 1);
    ASSERT_GT(r.counts.preempted_seqs, 0);
    EXPECT_DOUBLE_EQ(r.counts.decode_steps, static_cast<double>(r.stats.decode_steps));
    EXPECT_NEAR(t.Ms(r.counts), r.elapsed_seconds * 1000, 1e-9 * r.elapsed_seconds * 1000);
    EXPECT_NEAR(t.Ms(r.first_token_counts), r.mean_first_token_ms, 1e-9 * r.mean_first_token_ms);
    EXPECT_NEAR(t.Ms(r.decode_counts), r.mean_decode_ms, 1e-9 * r.mean_decode_ms);
    EXPECT_GT(r.mean_first_token_ms, r.mean_decode_ms);
  }
  WorkloadResult a = SimulateWorkload(c, g.profile.TimingAt(1), g.requests, 1000, 0, 1);
  WorkloadResult b = SimulateWorkload(c, other, g.requests, 1000, 0, 1);
  EXPECT_EQ(a.counts.decode_context_tokens, b.counts.decode_context_tokens);
  EXPECT_EQ(a.first_token_counts.prefill_tokens, b.first_token_counts.prefill_tokens);
  EXPECT_NE(a.elapsed_seconds, b.elapsed_seconds);
}

TEST(ProfileTest, ShippedProfilesParseAndAreFoundByModelName) {
  for (const char* model : {"LLaMa3-8B", "llama2-13b", "LLaMa3-70B"}) {
    absl::StatusOr<Profile> p = FindProfile(testing::ProfileDir(), "", model);
    ASSERT_THAT(p, IsOk()) << model;
    EXPECT_FALSE(p->workloads.empty());
  }
  EXPECT_EQ(FindProfile(testing::ProfileDir(), "llama3-70b-910b", "x")->num_layers, 80);
  absl::StatusOr<Profile> unknown = FindProfile(testing::ProfileDir(), "", "gpt-9");
  EXPECT_THAT(unknown.status().message(), HasSubstr("modelName: no profile for \"gpt-9\""));
  EXPECT_FALSE(FindProfile(testing::ProfileDir(), "nope", "").ok());
}

TEST(ProfileTest, RejectsBrokenProfiles) {
  EXPECT_FALSE(ParseProfile("[]").ok());
  std::string text = ReadFileToString(testing::ProfileDir() + "/llama3-8b-910b.json").value();
  nlohmann::json j = nlohmann::json::parse(text);
  j["model"]["num_layers"] = "32";
  EXPECT_THAT(ParseProfile(j.dump()).status().message(), HasSubstr("model.num_layers"));
  j = nlohmann::json::parse(text);
  j["default_workload"] = "nope";
  EXPECT_THAT(ParseProfile(j.dump()).status().message(), HasSubstr("default_workload"));
}

TEST(ProfileTest, TokenCountApproximation) {
  EXPECT_EQ(CountPromptTokens("hello world", 0), 2);
  EXPECT_EQ(CountPromptTokens("extraordinary", 0), 2);  // 13 letters
  EXPECT_EQ(CountPromptTokens("12345", 0), 2);          // digit groups of 3
  EXPECT_EQ(CountPromptTokens("a, b.", 0), 4);
  EXPECT_EQ(CountPromptTokens("", 10), 10);
}

TEST(ProfileTest, OutputLengthIsDeterministicPerPrompt) {
  OutputLengthDistribution d{300, 0.5, 8};
  EXPECT_EQ(NaturalOutputLength(d, "a prompt"), NaturalOutputLength(d, "a prompt"));
  EXPECT_GE(NaturalOutputLength(d, "x"), 8);
  OutputLengthDistribution fixed{64, 0, 1};
  EXPECT_EQ(NaturalOutputLength(fixed, "anything"), 64);
}

TEST(ProfileTest, TimingScalesWithWorldSize) {
  Profile p = LoadProfileFile(testing::ProfileDir() + "/llama3-70b-910b.json").value();
  EXPECT_DOUBLE_EQ(p.TimingAt(8).decode_base_ms, p.timing.decode_base_ms);
  EXPECT_GT(p.TimingAt(4).decode_base_ms, p.timing.decode_base_ms);
}

}  // namespace
}  // namespace crest::sim
