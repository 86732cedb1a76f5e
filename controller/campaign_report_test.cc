#include "controller/campaign_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "controller/search/testing/trials.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;
using testing_trials::OneModelSearch;
using testing_trials::Outcome;

TEST(ChosenBest, EveryRunFlaggedIsTheFastestPointMarkedUntrusted) {
  StoredCampaign stored = OneModelSearch("practice", 435);
  stored.trials = {Outcome(435, 0, crest::v1::TRIAL_OK, 2800),
                   Outcome(535, 0, crest::v1::TRIAL_OK, 2950)};
  for (auto& t : stored.trials) t.add_flags("client_bound");
  std::optional<crest::v1::BestConfig> best = ChosenBest(stored, "m");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->parameters().max_batch_size(), 535);
  EXPECT_TRUE(best->untrusted());
  EXPECT_EQ(best->runs(), 0u);
  crest::v1::CampaignReport report = BuildReport(stored);
  ASSERT_EQ(report.warnings_size(), 1);
  EXPECT_THAT(report.warnings(0), ::testing::HasSubstr("m: every run was flagged (client_bound)"));
  EXPECT_TRUE(report.models(0).best().untrusted());

  // One trusted run, and the strategy answers from it: trusted again.
  stored.trials[0].clear_flags();
  best = ChosenBest(stored, "m");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->parameters().max_batch_size(), 435);
  EXPECT_FALSE(best->untrusted());
  EXPECT_EQ(BuildReport(stored).warnings_size(), 0);
}

TEST(BuildReport, NamesTheNodesTheSearchComparedWithTheirFactors) {
  // "b" measured 500 20% slower than "a"; "c" shares no point with either,
  // and a flagged run of "c" at 500 says nothing.
  StoredCampaign stored = OneModelSearch("grid", 500);
  auto on = [](Trial t, const std::string& node) {
    t.set_node(node);
    return t;
  };
  stored.trials = {on(Outcome(500, 0, crest::v1::TRIAL_OK, 3000), "a"),
                   on(Outcome(500, 1, crest::v1::TRIAL_OK, 2500), "b"),
                   on(Outcome(500, 2, crest::v1::TRIAL_OK, 1000), "c"),
                   on(Outcome(600, 0, crest::v1::TRIAL_OK, 2000), "c")};
  stored.trials[2].add_flags("client_bound");
  const crest::v1::ModelReport m = BuildReport(stored).models(0);
  ASSERT_EQ(m.node_speeds_size(), 2);
  EXPECT_EQ(m.node_speeds(0).node(), "a");
  EXPECT_EQ(m.node_speeds(0).shared_runs(), 1u);
  EXPECT_EQ(m.node_speeds(1).node(), "b");
  // The spec's noise prior (2%): a contrast of log(1.2) against a band of
  // 3 * 2% * sqrt(2), each half of it kept by 1 - (band / contrast)^2.
  const double contrast = std::log(1.2);
  const double band = 3 * 0.02 * std::sqrt(2.0);
  const double kept = 1 - (band * band) / (contrast * contrast);
  EXPECT_NEAR(m.node_speeds(0).factor(), std::exp(contrast / 2 * kept), 1e-9);
  EXPECT_NEAR(m.node_speeds(1).factor(), std::exp(-contrast / 2 * kept), 1e-9);
}

}  // namespace
}  // namespace crest::controller
