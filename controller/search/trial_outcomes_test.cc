#include "controller/search/trial_outcomes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "google/protobuf/util/time_util.h"

#include "controller/search/testing/trials.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;
using ::testing::ElementsAre;
using ::testing::Pair;
using testing_trials::OneModelSearch;
using testing_trials::Outcome;

Trial Calibration(double first_token_ms, double decode_ms) {
  Trial t = Outcome(435, 0, crest::v1::TRIAL_OK, 5000);
  t.set_calibration(true);
  t.mutable_result()->mutable_first_token_time()->set_average_ms(first_token_ms);
  t.mutable_result()->mutable_decode_time()->set_average_ms(decode_ms);
  return t;
}

TEST(RepeatOutcomes, CountAttemptsPerPointAndRepeat) {
  std::vector<Trial> trials = {
      Outcome(435, 0, crest::v1::TRIAL_INTERRUPTED, 0, "node a lost"),
      Outcome(435, 0, crest::v1::TRIAL_OK, 2845.3),
      Outcome(435, 1, crest::v1::TRIAL_RUNNING),
      Outcome(500, 0, crest::v1::TRIAL_INFEASIBLE, 0, "out of memory"),
      Outcome(600, 0, crest::v1::TRIAL_CANCELLED, 0, "campaign cancelled"),
      Calibration(120, 45),
  };
  trials.push_back(Outcome(700, 0, crest::v1::TRIAL_OK, 1));
  trials.back().set_model("other");
  auto outcomes = RepeatOutcomes(trials, "m", /*calibration=*/false, /*max_attempts=*/3);
  ASSERT_EQ(outcomes.size(), 4u);
  const RepeatOutcome& ok = outcomes.at({435, 0});
  EXPECT_EQ(ok.attempts, 2);
  EXPECT_TRUE(ok.ok);
  EXPECT_DOUBLE_EQ(ok.speed, 2845.3);
  EXPECT_FALSE(ok.failed);
  EXPECT_TRUE(outcomes.at({435, 1}).running);
  EXPECT_TRUE(outcomes.at({500, 0}).infeasible);
  EXPECT_EQ(outcomes.at({500, 0}).reason, "out of memory");
  EXPECT_TRUE(outcomes.at({600, 0}).failed);  // a cancelled point is not re-run
  EXPECT_EQ(outcomes.at({600, 0}).reason, "campaign cancelled");
  auto calibration = RepeatOutcomes(trials, "m", /*calibration=*/true, 3);
  ASSERT_EQ(calibration.size(), 1u);
  EXPECT_TRUE(calibration.at({435, 0}).ok);
}

TEST(RepeatOutcomes, InterruptedAttemptsUsedUpCountAsFailed) {
  std::vector<Trial> trials = {
      Outcome(100, 0, crest::v1::TRIAL_INTERRUPTED, 0, "node a lost (missed heartbeats)"),
      Outcome(100, 0, crest::v1::TRIAL_INTERRUPTED, 0, "node a unreachable: gone"),
  };
  const RepeatOutcome two_of_three = RepeatOutcomes(trials, "m", false, 3).at({100, 0});
  EXPECT_FALSE(two_of_three.failed);  // one attempt left: re-run
  EXPECT_EQ(two_of_three.attempts, 2);
  EXPECT_EQ(two_of_three.reason, "node a unreachable: gone");
  const RepeatOutcome used_up = RepeatOutcomes(trials, "m", false, 2).at({100, 0});
  EXPECT_TRUE(used_up.failed);
  EXPECT_EQ(used_up.reason, "interrupted 2 times (last: node a unreachable: gone)");
}

TEST(FinishedPoints, AverageRepeatsAndOmitUnfinishedPoints) {
  std::vector<Trial> trials = {
      Outcome(435, 0, crest::v1::TRIAL_OK, 2800), Outcome(435, 1, crest::v1::TRIAL_OK, 2900),
      Outcome(500, 0, crest::v1::TRIAL_OK, 3000), Outcome(500, 1, crest::v1::TRIAL_RUNNING),
      Outcome(600, 0, crest::v1::TRIAL_OK, 2500),  // repeat 1 not started yet
  };
  auto finished = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), /*repeats=*/2);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished.at(435).kind, PointOutcome::Kind::kOk);
  EXPECT_DOUBLE_EQ(finished.at(435).objective, 2850);
  auto one_repeat = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), /*repeats=*/1);
  EXPECT_THAT(one_repeat, ElementsAre(Pair(435, ::testing::_), Pair(500, ::testing::_),
                                      Pair(600, ::testing::_)));
  EXPECT_DOUBLE_EQ(one_repeat.at(500).objective, 3000);
}

TEST(FinishedPoints, InfeasibleBeatsFailedAndEndsThePointAtOnce) {
  std::vector<Trial> trials = {
      Outcome(600, 0, crest::v1::TRIAL_FAILED, 0, "no request succeeded"),
      Outcome(600, 1, crest::v1::TRIAL_INFEASIBLE, 0, "out of memory"),
      Outcome(700, 0, crest::v1::TRIAL_FAILED, 0, "benchmark: deadline exceeded"),
      Outcome(800, 1, crest::v1::TRIAL_INFEASIBLE, 0, "out of memory"),  // repeat 0 still to run
  };
  auto finished = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), /*repeats=*/2);
  ASSERT_EQ(finished.size(), 3u);
  EXPECT_EQ(finished.at(600).kind, PointOutcome::Kind::kInfeasible);
  EXPECT_EQ(finished.at(700).kind, PointOutcome::Kind::kFailed);
  EXPECT_EQ(finished.at(700).reason, "benchmark: deadline exceeded");
  EXPECT_EQ(finished.at(800).kind, PointOutcome::Kind::kInfeasible);
  EXPECT_EQ(finished.at(800).reason, "out of memory");
}

TEST(BestOf, HighestMeanOverRepeatsIgnoringCalibrationAndUnfinishedTrials) {
  std::vector<Trial> trials = {
      Calibration(120, 45),  // 5000 tok/s, but a calibration trial
      Outcome(435, 0, crest::v1::TRIAL_OK, 2800),
      Outcome(435, 1, crest::v1::TRIAL_OK, 3100),  // mean 2950
      Outcome(500, 0, crest::v1::TRIAL_OK, 3000),
      Outcome(500, 1, crest::v1::TRIAL_OK, 2960),  // mean 2980: the best
      Outcome(600, 0, crest::v1::TRIAL_FAILED, 9999),
      Outcome(700, 0, crest::v1::TRIAL_RUNNING, 9999),
  };
  auto best = BestOf(trials, "m");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->parameters().max_batch_size(), 500);
  EXPECT_DOUBLE_EQ(best->generate_speed(), 2980);
  EXPECT_DOUBLE_EQ(best->generate_speed_per_client(), 298);
  EXPECT_FALSE(BestOf(trials, "other").has_value());
  EXPECT_FALSE(BestOf({Calibration(1, 1)}, "m").has_value());
}

TEST(FinishedPoints, PreemptionsFlagsAndExtraRuns) {
  std::vector<Trial> trials = {
      Outcome(500, 0, crest::v1::TRIAL_OK, 100), Outcome(500, 1, crest::v1::TRIAL_OK, 104),
      Outcome(500, 2, crest::v1::TRIAL_RUNNING), Outcome(600, 0, crest::v1::TRIAL_OK, 50),
      Outcome(700, 0, crest::v1::TRIAL_OK, 40)};
  trials[0].mutable_result()->mutable_daemon()->set_preemptions(0);
  trials[1].mutable_result()->mutable_daemon()->set_preemptions(0);
  trials[3].mutable_result()->mutable_daemon()->set_preemptions(12);
  trials[1].add_flags("client_bound");
  trials[4].add_flags("count_mismatch");
  auto points = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), 1);
  ASSERT_EQ(points.size(), 3u);
  // A run a strategy asked for beyond the spec's repeats counts once it ends;
  // a flagged one is no sample.
  EXPECT_THAT(points.at(500).samples, ElementsAre(100));
  EXPECT_EQ(points.at(500).runs, 2u);
  EXPECT_DOUBLE_EQ(points.at(500).objective, 100);
  EXPECT_EQ(points.at(500).preemptions, 0);
  EXPECT_EQ(points.at(600).preemptions, 12);
  EXPECT_FALSE(points.at(700).preemptions.has_value());  // not published: absent, not 0
  EXPECT_TRUE(points.at(700).untrusted);
  EXPECT_DOUBLE_EQ(points.at(700).objective, 40);
}

// With make-ups, a flagged base run is made up by the next repeat before the
// point is finished; once they are spent, the flagged runs count.
TEST(FinishedPoints, AFlaggedBaseRunWaitsForItsMakeUp) {
  std::vector<Trial> trials = {
      Outcome(500, 0, crest::v1::TRIAL_OK, 90), Outcome(600, 0, crest::v1::TRIAL_OK, 80),
      Outcome(600, 1, crest::v1::TRIAL_OK, 81), Outcome(600, 2, crest::v1::TRIAL_OK, 82)};
  for (auto& t : trials) t.add_flags("client_bound");
  const auto outcomes = RepeatOutcomes(trials, "m", false, 3);
  EXPECT_FALSE(BaseRunsEnded(outcomes, 500, 1, 2));
  EXPECT_TRUE(BaseRunsEnded(outcomes, 600, 1, 2));  // two make-ups spent
  EXPECT_FALSE(BaseRunsEnded(outcomes, 600, 1, 3));
  EXPECT_TRUE(BaseRunsEnded(outcomes, 500, 1, 0));  // no make-ups: as measured
  auto points = FinishedPoints(outcomes, 1, 0, /*makeups=*/2);
  EXPECT_EQ(points.count(500), 0u);
  ASSERT_EQ(points.count(600), 1u);
  EXPECT_TRUE(points.at(600).untrusted);
  EXPECT_EQ(points.at(600).runs, 3u);
  // The make-up is trusted: the point's figure is that run alone.
  trials.push_back(Outcome(500, 1, crest::v1::TRIAL_OK, 104));
  points = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), 1, 0, /*makeups=*/2);
  ASSERT_EQ(points.count(500), 1u);
  EXPECT_FALSE(points.at(500).untrusted);
  EXPECT_THAT(points.at(500).samples, ElementsAre(104));
  // A make-up still running: not finished.
  trials.back().set_status(crest::v1::TRIAL_RUNNING);
  EXPECT_EQ(FinishedPoints(RepeatOutcomes(trials, "m", false, 3), 1, 0, 2).count(500), 0u);
}

// The knobs of the one walk: make-ups within the base runs, flagged runs
// always passed over beyond them, and a bound on the repeats walked.
TEST(WalkRepeats, PassesOverFlaggedRunsAsTheKnobsSay) {
  // Repeats 0, 1 and 3 flagged, 2 trusted, 4 not started.
  std::vector<Trial> trials = {
      Outcome(500, 0, crest::v1::TRIAL_OK, 90), Outcome(500, 1, crest::v1::TRIAL_OK, 91),
      Outcome(500, 2, crest::v1::TRIAL_OK, 100), Outcome(500, 3, crest::v1::TRIAL_OK, 92)};
  for (int i : {0, 1, 3}) trials[i].add_flags("client_bound");
  const auto outcomes = RepeatOutcomes(trials, "m", false, 3);
  auto repeats_of = [](const WalkedRepeats& walked) {
    std::vector<uint32_t> out;
    for (const auto& [r, slot] : walked.counted) out.push_back(r);
    return out;
  };
  // One make-up: repeat 0 is made up by 1, which, flagged too, counts.
  WalkedRepeats one = WalkRepeats(outcomes, 500, {.runs = 1, .base_runs = 1, .makeups = 1});
  EXPECT_THAT(repeats_of(one), ElementsAre(1));
  EXPECT_EQ(one.passed_over, 1u);
  // Beyond the base run, a flagged run is always passed over, and a repeat
  // not yet started counts (the planner launches it).
  WalkedRepeats more = WalkRepeats(outcomes, 500, {.runs = 3, .base_runs = 1, .makeups = 2});
  EXPECT_THAT(repeats_of(more), ElementsAre(2, 4, 5));
  EXPECT_EQ(more.passed_over, 3u);
  EXPECT_FALSE(more.counted[1].second.ok);
  // Every flagged run passed over, within four repeats: one counted.
  WalkedRepeats bounded = WalkRepeats(outcomes, 500, {.runs = 2, .base_runs = 0, .max_repeats = 4});
  EXPECT_THAT(repeats_of(bounded), ElementsAre(2));
  EXPECT_EQ(bounded.passed_over, 3u);
}

TEST(SearchMakeups, MaxRetriesUntilTheEndedRunsReachMaxTrials) {
  std::vector<Trial> trials = {Outcome(500, 0, crest::v1::TRIAL_OK, 90),
                               Outcome(500, 1, crest::v1::TRIAL_RUNNING),
                               Outcome(600, 0, crest::v1::TRIAL_INFEASIBLE)};
  trials[0].add_flags("client_bound");
  auto outcomes = RepeatOutcomes(trials, "m", false, 3);
  EXPECT_EQ(SearchMakeups(outcomes, 3, 2), 2u);  // a running trial has not ended
  EXPECT_EQ(SearchMakeups(outcomes, 2, 2), 0u);
  trials[1].set_status(crest::v1::TRIAL_OK);
  EXPECT_EQ(SearchMakeups(RepeatOutcomes(trials, "m", false, 3), 3, 2), 0u);
}

TEST(FinishedPoints, CountsTheTrustedRunsMeasuredBesideNeighbours) {
  std::vector<Trial> trials = {Outcome(500, 0, crest::v1::TRIAL_OK, 100),
                               Outcome(500, 1, crest::v1::TRIAL_OK, 101),
                               Outcome(600, 0, crest::v1::TRIAL_OK, 90)};
  trials[1].set_neighbours(3);
  trials[2].set_neighbours(1);
  trials[2].add_flags("client_bound");  // flagged: no sample, so not counted
  auto points = FinishedPoints(RepeatOutcomes(trials, "m", false, 3), 1);
  EXPECT_EQ(points.at(500).beside_neighbours, 1u);
  EXPECT_EQ(points.at(600).beside_neighbours, 0u);
}

// A campaign of model "m" searched by `strategy` over [400, 700], one run a point.
TEST(ChosenBest, TheStrategysAnswerWithNoiseAndRuns) {
  StoredCampaign stored = OneModelSearch("knee", 400);
  auto* spec = stored.campaign.mutable_spec();
  // 575 is the largest point without preemptions and within the noise of the
  // best mean (560, by noise): knee takes it; the plain best mean would not.
  stored.trials = {
      Outcome(560, 0, crest::v1::TRIAL_OK, 3120), Outcome(575, 0, crest::v1::TRIAL_OK, 3090),
      Outcome(575, 1, crest::v1::TRIAL_OK, 3110), Outcome(580, 0, crest::v1::TRIAL_OK, 2990)};
  for (auto* t : {&stored.trials[0], &stored.trials[1], &stored.trials[2]}) {
    t->mutable_result()->mutable_daemon()->set_preemptions(0);
  }
  stored.trials[3].mutable_result()->mutable_daemon()->set_preemptions(59);
  auto best = ChosenBest(stored, "m");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->parameters().max_batch_size(), 575);
  EXPECT_DOUBLE_EQ(best->generate_speed(), 3100);
  EXPECT_EQ(best->runs(), 2u);
  ASSERT_TRUE(best->has_noise());
  EXPECT_NEAR(best->noise(), std::sqrt(2.0) * 10 / 3100, 1e-9);
  ASSERT_TRUE(best->has_confidence());
  EXPECT_GT(best->confidence(), 0);
  EXPECT_LT(best->confidence(), 1);
  spec->mutable_search()->set_strategy("grid");
  EXPECT_EQ(ChosenBest(stored, "m")->parameters().max_batch_size(), 560);
}

// Every run client_bound: the strategy has no answer, and the fastest point
// is shown only as an untrusted reference, with no trusted run behind it.
TEST(Rounds, OneMoreThanTheLatestRoundFinishedAtTheStart) {
  auto at = [](Trial t, int64_t started, int64_t finished) {
    t.mutable_started()->set_seconds(started);
    t.mutable_finished()->set_seconds(finished);
    return t;
  };
  std::vector<Trial> trials = {
      at(Outcome(500, 0, crest::v1::TRIAL_OK, 1), 0, 10),   // round 1
      at(Outcome(600, 0, crest::v1::TRIAL_OK, 1), 0, 12),   // round 1 (parallel)
      at(Outcome(550, 0, crest::v1::TRIAL_OK, 1), 10, 20),  // round 2
      at(Outcome(560, 0, crest::v1::TRIAL_OK, 1), 12, 22),  // round 2
      at(Outcome(555, 0, crest::v1::TRIAL_OK, 1), 22, 30),  // round 3
  };
  EXPECT_EQ(Rounds(trials, "m"), 3u);
  EXPECT_EQ(Rounds(trials, "other"), 0u);
  // The calibration and rate runs after the search are no search rounds.
  Trial calibrated = at(Outcome(555, 0, crest::v1::TRIAL_OK, 1), 30, 40);
  calibrated.set_calibration(true);
  Trial rate = at(Outcome(555, 0, crest::v1::TRIAL_OK, 1), 40, 50);
  rate.set_rate_search(true);
  trials.push_back(calibrated);
  trials.push_back(rate);
  EXPECT_EQ(Rounds(trials, "m"), 3u);
}

TEST(SelectBatchTimeMs, RoundsAndClampsToMindiesRange) {
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(120.4), 120);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(45.6), 46);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(0.2), 1);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(0), 1);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(999.4), 999);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(1000), 1000);
  EXPECT_DOUBLE_EQ(SelectBatchTimeMs(1401.4), 1000);
}

TEST(Matches, NodesListElseSelector) {
  crest::v1::AgentInfo a;
  a.set_node_name("a");
  (*a.mutable_labels())["model"] = "A";
  (*a.mutable_labels())["npu"] = "910B3";
  crest::v1::ModelSpec any;
  EXPECT_TRUE(Matches(any, a));
  crest::v1::ModelSpec listed;
  listed.add_nodes("b");
  EXPECT_FALSE(Matches(listed, a));
  listed.add_nodes("a");
  (*listed.mutable_selector())["model"] = "B";  // a nodes list wins over the selector
  EXPECT_TRUE(Matches(listed, a));
  crest::v1::ModelSpec selected;
  (*selected.mutable_selector())["model"] = "A";
  EXPECT_TRUE(Matches(selected, a));
  (*selected.mutable_selector())["npu"] = "910B4";
  EXPECT_FALSE(Matches(selected, a));
}

TEST(InterruptUnfinished, OnlyTrialsThatWereRunning) {
  std::vector<Trial> trials = {Outcome(435, 0, crest::v1::TRIAL_OK, 1),
                               Outcome(500, 0, crest::v1::TRIAL_RUNNING)};
  trials[0].set_id("c1-t1");
  trials[1].set_id("c1-t12");
  auto now = google::protobuf::util::TimeUtil::SecondsToTimestamp(1000);
  auto interrupted = InterruptUnfinished(&trials, now);
  ASSERT_EQ(interrupted.size(), 1u);
  EXPECT_EQ(interrupted[0].id(), "c1-t12");
  EXPECT_EQ(trials[1].status(), crest::v1::TRIAL_INTERRUPTED);
  EXPECT_EQ(trials[1].reason(), "controller restarted while the trial ran");
  EXPECT_EQ(trials[1].finished().seconds(), 1000);
  EXPECT_EQ(trials[0].status(), crest::v1::TRIAL_OK);
  EXPECT_EQ(NextTrialNumber(trials), 13);
  EXPECT_EQ(NextTrialNumber({}), 1);
}

TEST(NormalizeTimeScale, ReportsSimulatedTime) {
  crest::v1::BenchmarkResult r;
  r.set_generate_speed(143047.1);
  r.set_generate_speed_per_client(143.0471);
  r.mutable_first_token_time()->set_average_ms(20);
  r.mutable_decode_time()->set_p99_ms(2);
  r.mutable_duration()->set_seconds(3);
  NormalizeTimeScale(&r, 50);
  EXPECT_NEAR(r.generate_speed(), 2860.942, 1e-6);
  EXPECT_NEAR(r.generate_speed_per_client(), 2.860942, 1e-9);
  EXPECT_DOUBLE_EQ(r.first_token_time().average_ms(), 1000);
  EXPECT_DOUBLE_EQ(r.decode_time().p99_ms(), 100);
  EXPECT_EQ(r.duration().seconds(), 150);
  NormalizeTimeScale(&r, 0);  // real time: unchanged
  EXPECT_EQ(r.duration().seconds(), 150);
}

}  // namespace
}  // namespace crest::controller
