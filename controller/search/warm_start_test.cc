#include "controller/search/warm_start.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace crest::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SearchSpace WarmSpace() {
  SearchSpace s;
  s.lo = 362;
  s.hi = 1088;
  s.initial = 435;
  s.knee_guess = 550;
  return s;
}

PointOutcome Measured(double v, int64_t preemptions = 0) {
  PointOutcome o;
  o.objective = v;
  o.samples = {v};
  o.preemptions = preemptions;
  return o;
}

TEST(WarmStartSearch, MeasuresThePredictionAndItsNeighboursInOneRound) {
  const WarmStartSearch search(500, "campaign c1's fit");
  EXPECT_THAT(search.Bracket(WarmSpace()), ElementsAre(500, 485, 515));
  SearchDecision d = search.Decide(WarmSpace(), {}, 3);
  EXPECT_FALSE(d.done);
  EXPECT_THAT(d.wanted, ElementsAre(500, 485, 515));
  EXPECT_EQ(search.PlannedPoints(WarmSpace()), 3u);
  // A prediction past the range is measured at its edge.
  EXPECT_THAT(WarmStartSearch(2000, "x").Bracket(WarmSpace()), ElementsAre(1088, 1055));
}

TEST(WarmStartSearch, APredictionThatHoldsIsTheAnswerWithBasisPrior) {
  const WarmStartSearch search(500, "campaign c1's fit");
  const Outcomes finished = {{485, Measured(2950)}, {500, Measured(2980)}, {515, Measured(2960)}};
  SearchDecision d = search.Decide(WarmSpace(), finished, 3);
  EXPECT_TRUE(d.done);
  EXPECT_THAT(d.reason, HasSubstr("the prediction of campaign c1's fit (500) held"));
  std::optional<SearchAnswer> best = search.Best(WarmSpace(), finished);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->basis, "prior");
  EXPECT_THAT(best->basis_reason, HasSubstr("held over its bracket"));
  EXPECT_GE(best->point, 485);
  EXPECT_LE(best->point, 515);
}

TEST(WarmStartSearch, ANeighbourBeyondTheNoiseBandHandsOverToTheKneeSearch) {
  // The knee lies below the prediction: 485 runs clear, 500 and 515 fall.
  const WarmStartSearch search(500, "campaign c1's fit");
  const Outcomes finished = {
      {485, Measured(3000)}, {500, Measured(2500, 300)}, {515, Measured(2300, 500)}};
  ASSERT_TRUE(search.Contradiction(WarmSpace(), finished).has_value());
  EXPECT_THAT(*search.Contradiction(WarmSpace(), finished), HasSubstr("485 measured"));
  SearchDecision d = search.Decide(WarmSpace(), finished, 1);
  EXPECT_FALSE(d.done);  // the knee search goes on
  ASSERT_FALSE(d.wanted.empty());
  EXPECT_EQ(search.Best(WarmSpace(), finished)->basis, "prior-contradicted");
  // The knee search's later runs keep the answer's basis, whatever their
  // repeats do to the noise band.
  Outcomes later = finished;
  later[450] = Measured(3010);
  later[485].samples = {3000, 2700};
  later[485].objective = 2850;
  EXPECT_THAT(*search.Contradiction(WarmSpace(), later), HasSubstr("went on to 450"));
  EXPECT_EQ(search.Best(WarmSpace(), later)->basis, "prior-contradicted");
}

TEST(WarmStartSearch, ANeighbourWithinTheNoiseBandDoesNotContradict) {
  const WarmStartSearch search(500, "fit");
  // 515 reads 3% above 500: inside two runs' band (2 x 2% x sqrt 2).
  const Outcomes finished = {{485, Measured(2900)}, {500, Measured(2900)}, {515, Measured(2987)}};
  EXPECT_FALSE(search.Contradiction(WarmSpace(), finished).has_value());
}

TEST(WarmStartSearch, APredictionWhereTheDaemonDoesNotStartIsContradicted) {
  const WarmStartSearch search(500, "fit");
  PointOutcome failed;
  failed.kind = PointOutcome::Kind::kInfeasible;
  failed.reason = "NPU out of memory";
  const Outcomes finished = {{485, Measured(2900)}, {500, failed}, {515, failed}};
  ASSERT_TRUE(search.Contradiction(WarmSpace(), finished).has_value());
  EXPECT_THAT(*search.Contradiction(WarmSpace(), finished), HasSubstr("NPU out of memory"));
}

}  // namespace
}  // namespace crest::controller
