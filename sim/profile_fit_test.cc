#include "sim/profile_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/kv_cache.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::testing::HasSubstr;

// LLaMA3-8B's shipped profile as the start; the "hardware" runs a variant
// of it that the fit has to find.
struct Case {
  testing::Gsm8k gsm8k = testing::LoadGsm8k(512);
  FitWorkload w;
  Profile truth;

  Case() {
    w.requests = gsm8k.requests;
    w.npu_mem_gib = 17;
    truth = gsm8k.profile;
    truth.timing.decode_base_ms *= 1.25;
    truth.timing.decode_per_seq_ms *= 0.8;
    truth.timing.prefill_per_token_ms *= 1.3;
    truth.timing.preempt_overhead_ms *= 0.5;
  }

  // The practice's configuration at `b`, measured once under `truth` with
  // run-to-run noise (seed `seed`).
  MeasuredPoint Measured(int b, uint64_t seed) const {
    MeasuredPoint p = PracticePoint(b);
    SchedulerConfig c;
    c.max_batch_size = p.max_batch_size;
    c.max_prefill_batch_size = p.max_prefill_batch_size;
    c.num_blocks = UsableBlocks(truth, w).value();
    WorkloadResult r =
        SimulateWorkload(c, truth.TimingAt(1), w.requests, p.concurrency, 0.02, seed);
    p.generate_speed = r.generate_speed;
    p.first_token_ms = r.mean_first_token_ms;
    p.decode_ms = r.mean_decode_ms;
    p.preemptions = static_cast<double>(r.stats.preemptions);
    return p;
  }
};

TEST(FitProfileTest, PredictsAVariantsCurveWithinTwoPercentFromNoisyRuns) {
  Case c;
  std::vector<MeasuredPoint> points;
  uint64_t seed = 1;
  for (int b : {300, 435, 500, 600, 700}) points.push_back(c.Measured(b, seed++));
  absl::StatusOr<ProfileFit> fit = FitProfile(c.gsm8k.profile, c.w, points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->predicted.size(), points.size());
  ASSERT_TRUE(fit->timing.leave_one_out_rms.has_value());
  for (int b = 300; b <= 700; b += 50) {
    const double truth = Predict(c.truth, c.w, PracticePoint(b)).value().generate_speed;
    const double start = Predict(c.gsm8k.profile, c.w, PracticePoint(b)).value().generate_speed;
    const double fitted = Predict(fit->profile, c.w, PracticePoint(b)).value().generate_speed;
    EXPECT_NEAR(fitted / truth, 1, 0.02) << "maxBatchSize " << b;
    // The variant is far enough from the start that fitting matters.
    if (b == 300) {
      EXPECT_GT(std::abs(start / truth - 1), 0.05);
    }
  }
}

TEST(FitProfileTest, TheReportedBlockCountSetsTheKvScaleThatWhatIfMemoryUses) {
  Case c;
  c.w.npu_block_num = 1800;  // fewer blocks than the architecture gives at 17 GiB
  std::vector<MeasuredPoint> points = {c.Measured(300, 1), c.Measured(400, 2)};
  absl::StatusOr<ProfileFit> fit = FitProfile(c.gsm8k.profile, c.w, points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_TRUE(fit->kv_fitted);
  EXPECT_THAT(fit->kv_basis, HasSubstr("npuBlockNum 1800"));
  EXPECT_EQ(ComputeKvCache(fit->profile, 1, 17, 128).value().computed_blocks, 1800);
  // 40% more memory, 40% more blocks (to the block).
  EXPECT_NEAR(static_cast<double>(ComputeKvCache(fit->profile, 1, 17 * 1.4, 128)->computed_blocks),
              1800 * 1.4, 1.5);
  // The scale survives the profile's JSON.
  absl::StatusOr<Profile> back = ParseProfile(ProfileJson(fit->profile).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ComputeKvCache(*back, 1, 17, 128).value().computed_blocks, 1800);
}

TEST(FitProfileTest, ProfileJsonReadsBackAsTheSameProfile) {
  const Profile p = testing::LoadGsm8k(512).profile;
  absl::StatusOr<Profile> back = ParseProfile(ProfileJson(p).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, p.name);
  EXPECT_EQ(back->model_names, p.model_names);
  EXPECT_EQ(back->timing.AsArray(), p.timing.AsArray());
  EXPECT_EQ(back->num_layers, p.num_layers);
  EXPECT_EQ(back->weights_gib, p.weights_gib);
  EXPECT_EQ(back->workloads.at("gsm8k").median, p.workloads.at("gsm8k").median);
  EXPECT_EQ(back->prompt_template_tokens, p.prompt_template_tokens);
}

TEST(FitProfileTest, RefusesWhatCannotSupportAFit) {
  Case c;
  const Profile& start = c.gsm8k.profile;
  absl::StatusOr<ProfileFit> one = FitProfile(start, c.w, {c.Measured(300, 1)});
  EXPECT_EQ(one.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(one.status().message(), HasSubstr("at least two"));

  MeasuredPoint unmeasured = PracticePoint(400);
  absl::StatusOr<ProfileFit> zero = FitProfile(start, c.w, {c.Measured(300, 1), unmeasured});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("maxBatchSize 400"));
  EXPECT_THAT(zero.status().message(), HasSubstr("GenerateSpeed 0"));

  FitWorkload no_capacity = c.w;
  no_capacity.npu_mem_gib = 0;
  absl::StatusOr<ProfileFit> blind =
      FitProfile(start, no_capacity, {c.Measured(300, 1), c.Measured(400, 2)});
  EXPECT_EQ(blind.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(blind.status().message(), HasSubstr("no KV capacity"));
}

TEST(FitProfileTest, OneWorkloadShapeLeavesWhatItCannotSeparateAtTheStart) {
  // Without preemption nothing tells the preemption cost: it keeps the
  // start's value and the fit says so.
  Case c;
  c.w.npu_mem_gib = 60;  // room for every sequence: no preemption anywhere
  std::vector<MeasuredPoint> points = {c.Measured(200, 1), c.Measured(300, 2), c.Measured(400, 3)};
  for (const MeasuredPoint& p : points) ASSERT_EQ(p.preemptions.value_or(-1), 0);
  absl::StatusOr<ProfileFit> fit = FitProfile(c.gsm8k.profile, c.w, points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->timing.status[6], CoefficientFit::kUndetermined);
  EXPECT_EQ(fit->profile.timing.preempt_overhead_ms, c.gsm8k.profile.timing.preempt_overhead_ms);
}

TEST(PredictCurveTest, FindsThePeakOfTheProfileItPlays) {
  Case c;
  absl::StatusOr<PredictedCurve> curve = PredictCurve(c.gsm8k.profile, c.w, 300, 800, 11);
  ASSERT_TRUE(curve.ok()) << curve.status();
  for (const auto& [b, speed] : curve->curve) {
    EXPECT_LE(speed, curve->peak_generate_speed) << "maxBatchSize " << b;
  }
  // The shipped profile is calibrated to the practice's table: a peak near 500.
  EXPECT_GT(curve->peak_max_batch_size, 435);
  EXPECT_LT(curve->peak_max_batch_size, 600);
  EXPECT_EQ(curve->npu_block_num, 2176);
}

TEST(RequestsForTest, NamesTheProfilesWorkloadsForAnUnknownOne) {
  const Profile p = testing::LoadGsm8k(512).profile;
  absl::StatusOr<std::vector<WorkloadRequest>> r = RequestsFor(p, "chat", {"hello"}, 512);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("gsm8k, synthetic"));
  absl::StatusOr<std::vector<WorkloadRequest>> capped = RequestsFor(p, "", {"hello"}, 4);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->at(0).output_tokens, 4);
}

}  // namespace
}  // namespace crest::sim
