#include "controller/campaign_io/report_curve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace crest::controller {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

crest::v1::Trial* AddTrial(crest::v1::ModelReport* m, int64_t b, double speed,
                           std::optional<uint64_t> preemptions) {
  auto* t = m->add_trials();
  t->mutable_parameters()->set_max_batch_size(b);
  t->set_status(crest::v1::TRIAL_OK);
  t->set_npu_block_num(2176);
  t->mutable_result()->set_generate_speed(speed);
  if (preemptions) t->mutable_result()->mutable_daemon()->set_preemptions(*preemptions);
  return t;
}

crest::v1::CampaignReport Report() {
  crest::v1::CampaignReport r;
  r.set_id("c7");
  r.set_name("demo");
  auto* m = r.add_models();
  m->set_model("LLaMa3-8B");
  m->set_strategy("knee");
  AddTrial(m, 600, 2500, 40);
  AddTrial(m, 435, 2800, 0);
  AddTrial(m, 435, 2900, 0);  // a repeat: the mean
  AddTrial(m, 500, 3000, std::nullopt);
  AddTrial(m, 520, 9999, 0)->add_flags("daemon_restarted");  // flagged: not evidence
  AddTrial(m, 700, 0, std::nullopt)->set_status(crest::v1::TRIAL_INFEASIBLE);
  AddTrial(m, 480, 2950, 0)->set_calibration(true);  // not a search run
  m->mutable_best()->set_noise(0.015);
  return r;
}

TEST(CurveOfModel, TheTrustedSearchRunsPerPointWithTheirCounter) {
  crest::v1::Campaign campaign;
  campaign.mutable_spec()->mutable_client()->set_max_output_len(256);
  campaign.mutable_spec()->mutable_search()->set_cache_block_size(128);
  auto c = CurveOfModel(Report(), &campaign, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "demo-LLaMa3-8B");
  EXPECT_THAT(c->source, HasSubstr("crest campaign report c7 --format curve"));
  EXPECT_EQ(c->npu_block_num, 2176);
  EXPECT_EQ(c->max_output_len, 256);
  EXPECT_EQ(c->avg_output_tokens, 256);  // GSM8K's 346, capped by MaxOutputLen
  EXPECT_DOUBLE_EQ(c->noise_cv, 0.015);
  ASSERT_EQ(c->points.size(), 3u);
  EXPECT_EQ(c->points[0].max_batch_size, 435);
  EXPECT_DOUBLE_EQ(c->points[0].generate_speed, 2850);
  EXPECT_EQ(c->points[0].preemptions, 0);
  EXPECT_FALSE(c->points[1].preemptions.has_value());  // 500: the daemon said nothing
  EXPECT_EQ(c->points[2].preemptions, 40);
  EXPECT_EQ(c->range, std::make_pair(int64_t{435}, int64_t{600}));
  // What it writes reads back as the same curve.
  auto again = ParseCurve(CurveJson(*c), "written");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->points.size(), 3u);
}

TEST(CurveOfModel, NamesTheModelsWhenItCannotChoose) {
  crest::v1::CampaignReport r = Report();
  r.add_models()->set_model("Qwen");
  EXPECT_THAT(CurveOfModel(r, nullptr, ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has 2 models; name one with --model (LLaMa3-8B, Qwen)")));
  EXPECT_THAT(CurveOfModel(r, nullptr, "Mistral"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no model \"Mistral\"")));
  EXPECT_THAT(CurveOfModel(r, nullptr, "Qwen"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no trusted search run")));
}

}  // namespace
}  // namespace crest::controller
