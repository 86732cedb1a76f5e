#include "controller/search/search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "controller/search/testing/trials.h"

namespace crest::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = PointOutcome::Kind;
using testing_trials::NotOk;

SearchSpace Practice() { return {362, 1088, 435, 100, 0.02, 20}; }

// Runs the strategy to its end against a throughput curve, one point at a time.
std::vector<int64_t> Walk(const SearchSpace& space, const std::function<PointOutcome(int64_t)>& f,
                          std::string* reason) {
  PracticeSearch search;
  std::map<int64_t, PointOutcome> finished;
  std::vector<int64_t> visited;
  for (int guard = 0; guard < 100; ++guard) {
    SearchDecision d = search.Decide(space, finished, 1);
    if (d.done) {
      *reason = d.reason;
      return visited;
    }
    EXPECT_EQ(d.wanted.size(), 1u);
    visited.push_back(d.wanted[0]);
    finished[d.wanted[0]] = f(d.wanted[0]);
  }
  ADD_FAILURE() << "search did not end";
  return visited;
}

PointOutcome Ok(double v) {
  PointOutcome o;
  o.objective = v;
  o.samples = {v};
  return o;
}

TEST(StepLadder, RoundsUpToMultiplesOfStep) {
  EXPECT_THAT(StepLadder({362, 800, 435, 100, 0.02, 20}), ElementsAre(435, 500, 600, 700, 800));
  EXPECT_THAT(StepLadder({362, 1088, 435, 100, 0.02, 3}), ElementsAre(435, 500, 600));
  EXPECT_THAT(StepLadder({100, 250, 100, 100, 0.02, 20}), ElementsAre(100, 200));
  EXPECT_THAT(StepLadder({10, 5, 10, 100, 0.02, 20}), ElementsAre());
}

TEST(PracticeSearch, ThePracticeStopsAt600) {
  // The best-practice text: 435 -> 2.8453, 500 -> 2.9803, 600 -> 2.5206 (fell: stop).
  std::map<int64_t, double> curve = {{435, 2.8453}, {500, 2.9803}, {600, 2.5206}, {700, 3.5}};
  std::string reason;
  auto visited = Walk(
      Practice(), [&](int64_t p) { return Ok(curve.at(p)); }, &reason);
  EXPECT_THAT(visited, ElementsAre(435, 500, 600));
  EXPECT_THAT(reason, HasSubstr("throughput fell at maxBatchSize 600"));
}

TEST(PracticeSearch, DropWithinToleranceContinues) {
  std::map<int64_t, double> curve = {{435, 100}, {500, 99}, {600, 97.5}, {700, 90}};
  std::string reason;
  auto visited = Walk(
      Practice(), [&](int64_t p) { return Ok(curve.at(p)); }, &reason);
  // 99 is 1% below the best (within 2%): go on; 97.5 is 2.5% below: stop.
  EXPECT_THAT(visited, ElementsAre(435, 500, 600));
  SearchSpace loose = Practice();
  loose.tolerance = 0.05;
  visited = Walk(
      loose, [&](int64_t p) { return Ok(curve.at(p)); }, &reason);
  EXPECT_THAT(visited, ElementsAre(435, 500, 600, 700));
}

TEST(PracticeSearch, InfeasiblePointEndsTheUpwardSearch) {
  std::string reason;
  auto visited = Walk(
      Practice(), [](int64_t p) { return p > 500 ? NotOk(Kind::kInfeasible, "") : Ok(p); },
      &reason);
  EXPECT_THAT(visited, ElementsAre(435, 500, 600));
  EXPECT_THAT(reason, HasSubstr("600 is infeasible"));
}

TEST(PracticeSearch, FailedPointEndsTheSearch) {
  std::string reason;
  auto visited = Walk(
      Practice(), [](int64_t) { return NotOk(Kind::kFailed, ""); }, &reason);
  EXPECT_THAT(visited, ElementsAre(435));
  EXPECT_THAT(reason, HasSubstr("435 failed"));
}

TEST(PracticeSearch, RangeEndAndMaxTrials) {
  std::string reason;
  auto visited = Walk(
      {100, 300, 100, 100, 0.02, 20}, [](int64_t p) { return Ok(p); }, &reason);
  EXPECT_THAT(visited, ElementsAre(100, 200, 300));
  EXPECT_THAT(reason, HasSubstr("range's end (300)"));
  visited = Walk(
      {100, 3000, 100, 100, 0.02, 2}, [](int64_t p) { return Ok(p); }, &reason);
  EXPECT_THAT(visited, ElementsAre(100, 200));
  EXPECT_THAT(reason, HasSubstr("max_trials (2)"));
}

TEST(PracticeSearch, LookaheadMeasuresAheadButDecidesInOrder) {
  PracticeSearch search;
  std::map<int64_t, PointOutcome> finished;
  EXPECT_THAT(search.Decide(Practice(), finished, 2).wanted, ElementsAre(435, 500));
  // 500 finished first and is worse than nothing known yet: 435 decides.
  finished[500] = Ok(1);
  SearchDecision d = search.Decide(Practice(), finished, 2);
  EXPECT_FALSE(d.done);
  EXPECT_THAT(d.wanted, ElementsAre(435, 600));
  finished[435] = Ok(10);  // now 500 is a fall after 435
  d = search.Decide(Practice(), finished, 2);
  EXPECT_TRUE(d.done);
  EXPECT_THAT(d.reason, HasSubstr("fell at maxBatchSize 500"));
  EXPECT_EQ(search.PlannedPoints(Practice()), 7u);  // 435, 500 ... 1000
}

TEST(PracticeSearch, FlaggedRunIsNoEvidenceOfAFall) {
  std::string reason;
  auto visited = Walk(
      Practice(),
      [](int64_t p) {
        PointOutcome o = Ok(p == 500 ? 50 : 100);
        o.untrusted = p == 500;  // e.g. client_bound
        return o;
      },
      &reason);
  EXPECT_THAT(visited, ElementsAre(435, 500, 600, 700, 800, 900, 1000));
  EXPECT_THAT(reason, HasSubstr("range's end"));
}

TEST(Strategies, Registry) {
  EXPECT_THAT(KnownStrategies(), ElementsAre("knee", "practice", "step", "grid"));
  EXPECT_EQ(MakeStrategy("step").value()->Name(), "practice");
  EXPECT_EQ(MakeStrategy("practice").value()->Name(), "practice");
  EXPECT_EQ(MakeStrategy("grid").value()->Name(), "grid");
  EXPECT_EQ(MakeStrategy("").value()->Name(), kDefaultStrategy);
  EXPECT_FALSE(MakeStrategy("bayes").ok());
}

}  // namespace
}  // namespace crest::controller
