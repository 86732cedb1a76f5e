#include "sim/timing_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sim/kv_cache.h"
#include "sim/simulate.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::testing::HasSubstr;

// decode 40 + 0.1/seq + 0.0006/context token; prefill 30 + 0.5/seq +
// 0.07/token; 80 per preempted sequence.
StepTimeModel Truth() { return StepTimeModel::FromArray({40, 0.1, 0.0006, 30, 0.5, 0.07, 80}); }

// Counts whose seven columns vary independently (uniform over a range of
// each), one point per observation.
std::vector<TimingObservation> Exact(const StepTimeModel& t, size_t n, bool preempting = true) {
  std::mt19937 rng(42);
  auto around = [&](double v) {
    return std::uniform_real_distribution<double>(0.5 * v, 1.5 * v)(rng);
  };
  std::vector<TimingObservation> out;
  for (size_t i = 0; i < n; ++i) {
    StepCounts c;
    c.decode_steps = around(2000);
    c.decode_seqs = around(4e5);
    c.decode_context_tokens = around(5e7);
    c.prefill_steps = around(60);
    c.prefill_seqs = around(600);
    c.prefill_tokens = around(1.2e5);
    c.preempted_seqs = preempting ? around(100) : 0;
    out.push_back({"point " + std::to_string(i), c, t.Ms(c), 1, static_cast<int>(i)});
  }
  return out;
}

void ExpectCoefficientsNear(const StepTimeModel& got, const StepTimeModel& want, double rel) {
  EXPECT_NEAR(got.decode_base_ms, want.decode_base_ms, rel * want.decode_base_ms);
  EXPECT_NEAR(got.decode_per_seq_ms, want.decode_per_seq_ms, rel * want.decode_per_seq_ms);
  EXPECT_NEAR(got.decode_per_context_token_ms, want.decode_per_context_token_ms,
              rel * want.decode_per_context_token_ms);
  EXPECT_NEAR(got.prefill_base_ms, want.prefill_base_ms, rel * want.prefill_base_ms);
  EXPECT_NEAR(got.prefill_per_seq_ms, want.prefill_per_seq_ms, rel * want.prefill_per_seq_ms);
  EXPECT_NEAR(got.prefill_per_token_ms, want.prefill_per_token_ms, rel * want.prefill_per_token_ms);
  EXPECT_NEAR(got.preempt_overhead_ms, want.preempt_overhead_ms, rel * want.preempt_overhead_ms);
}

TEST(TimingFit, ExactObservationsGiveBackTheCoefficients) {
  StepTimeModel start;  // all zero: the fit owes nothing to it
  auto fit = FitStepTimes(Exact(Truth(), 12), start);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ExpectCoefficientsNear(fit->timing, Truth(), 1e-6);
  for (CoefficientFit s : fit->status) EXPECT_EQ(s, CoefficientFit::kFitted);
  for (double r : fit->residuals) EXPECT_NEAR(r, 0, 1e-9);
  ASSERT_TRUE(fit->leave_one_out_rms.has_value());
  EXPECT_LT(*fit->leave_one_out_rms, 1e-6);
}

// Nothing preempted: no observation pays the preemption cost, which keeps
// the starting value and says so; the others are still fitted, from a start
// half the truth (the prior's pull on what the observations determine is
// far below a run's noise).
TEST(TimingFit, ACostNoObservationPaysKeepsTheStartingValue) {
  StepTimeModel start = Truth();
  start.preempt_overhead_ms = 123;
  start.decode_base_ms = Truth().decode_base_ms / 2;
  auto fit = FitStepTimes(Exact(Truth(), 12, /*preempting=*/false), start);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status[6], CoefficientFit::kUndetermined);
  EXPECT_EQ(fit->timing.preempt_overhead_ms, 123);
  EXPECT_EQ(fit->status[0], CoefficientFit::kFitted);
  EXPECT_NEAR(fit->timing.decode_base_ms, Truth().decode_base_ms, 1e-3 * Truth().decode_base_ms);
}

// Two costs always paid together (one sequence per prefill) cannot be told
// apart: one of them is undetermined (at its starting value), and the
// pair's sum still predicts the observations exactly.
TEST(TimingFit, CostsAlwaysPaidTogetherAreNotToldApart) {
  auto obs = Exact(Truth(), 12);
  for (auto& o : obs) {
    o.counts.prefill_seqs = o.counts.prefill_steps;
    o.measured_ms = Truth().Ms(o.counts);
  }
  auto fit = FitStepTimes(obs, Truth());
  ASSERT_TRUE(fit.ok()) << fit.status();
  const bool base = fit->status[3] == CoefficientFit::kUndetermined;
  const bool per_seq = fit->status[4] == CoefficientFit::kUndetermined;
  EXPECT_NE(base, per_seq);
  EXPECT_NEAR(fit->timing.prefill_base_ms, Truth().prefill_base_ms, 1e-9);
  for (double r : fit->residuals) EXPECT_NEAR(r, 0, 1e-9);
}

// Observations that want a cost below zero get it at zero, not negative:
// a step cannot take less time for doing more.
TEST(TimingFit, ACostIsNeverNegative) {
  StepTimeModel truth = Truth();
  truth.prefill_per_seq_ms = -2;
  auto fit = FitStepTimes(Exact(truth, 12), StepTimeModel());
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status[4], CoefficientFit::kAtZero);
  EXPECT_EQ(fit->timing.prefill_per_seq_ms, 0);
  EXPECT_GE(fit->timing.prefill_base_ms, 0);
}

TEST(TimingFit, BadObservationsAreRefusedNamingThem) {
  auto obs = Exact(Truth(), 3);
  auto one = obs;
  one.resize(1);
  EXPECT_THAT(FitStepTimes(one, Truth()).status().message(),
              HasSubstr("1 observations of 1 measured points (expected at least two points"));
  auto zero = obs;
  zero[1].measured_ms = 0;
  EXPECT_THAT(FitStepTimes(zero, Truth()).status().message(),
              HasSubstr("point 1: measured time 0 ms (expected > 0)"));
  auto weightless = obs;
  weightless[2].weight = 0;
  EXPECT_THAT(FitStepTimes(weightless, Truth()).status().message(),
              HasSubstr("point 2: weight 0 (expected > 0 runs)"));
  auto negative = obs;
  negative[0].counts.decode_seqs = -1;
  EXPECT_THAT(FitStepTimes(negative, Truth()).status().message(),
              HasSubstr("point 0: a step count of -1 (expected >= 0)"));
}

// The simulator's own runs, measured with 2% run-to-run noise at six
// maxBatchSize values (past the KV knee too) with a hidden set of
// coefficients: the fitted model, started from the shipped profile,
// predicts every point's noise-free GenerateSpeed within 2.5% (each point is
// one run of 2% noise). GSM8K alone cannot separate a decode step's cost per
// sequence from its cost per context token (every sequence holds about the
// same context): they are not both fitted.
TEST(TimingFit, NoisySimulatedRunsPredictTheNoiseFreeCurve) {
  const auto g = testing::LoadGsm8k(512);
  StepTimeModel hidden = g.profile.TimingAt(1);
  hidden.decode_base_ms *= 1.3;
  hidden.decode_per_context_token_ms *= 0.8;
  hidden.prefill_per_token_ms *= 1.5;
  const KvCacheLayout kv = ComputeKvCache(g.profile, 1, 17, 128).value();
  std::vector<TimingObservation> obs;
  std::vector<SchedulerConfig> configs;
  for (int b : {300, 400, 450, 500, 560, 650}) {
    SchedulerConfig c;
    c.max_batch_size = b;
    c.max_prefill_batch_size = b / 2;
    c.num_blocks = kv.usable_blocks;
    configs.push_back(c);
    const WorkloadResult noisy =
        SimulateWorkload(c, hidden, g.requests, 1000, 0.02, static_cast<uint64_t>(b));
    // What the steps did comes from the starting model: the schedule is the
    // same under any coefficients.
    const WorkloadResult counted =
        SimulateWorkload(c, g.profile.TimingAt(1), g.requests, 1000, 0, 1);
    const std::string at = "maxBatchSize " + std::to_string(b);
    obs.push_back({at + " elapsed", counted.counts, noisy.elapsed_seconds * 1000, 1, b});
    obs.push_back(
        {at + " FirstTokenTime", counted.first_token_counts, noisy.mean_first_token_ms, 1, b});
    obs.push_back({at + " DecodeTime", counted.decode_counts, noisy.mean_decode_ms, 1, b});
  }
  auto fit = FitStepTimes(obs, g.profile.TimingAt(1));
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->status[0], CoefficientFit::kFitted);  // decode_base_ms
  EXPECT_EQ(fit->status[6], CoefficientFit::kFitted);  // preempt_overhead_ms
  EXPECT_FALSE(fit->status[1] == CoefficientFit::kFitted &&
               fit->status[2] == CoefficientFit::kFitted);
  for (const SchedulerConfig& c : configs) {
    const double truth = SimulateWorkload(c, hidden, g.requests, 1000, 0, 1).generate_speed;
    const double predicted =
        SimulateWorkload(c, fit->timing, g.requests, 1000, 0, 1).generate_speed;
    EXPECT_NEAR(predicted / truth, 1, 0.025) << "maxBatchSize " << c.max_batch_size;
  }
  ASSERT_TRUE(fit->leave_one_out_rms.has_value());
  EXPECT_LT(*fit->leave_one_out_rms, 0.05);
}

}  // namespace
}  // namespace crest::sim
