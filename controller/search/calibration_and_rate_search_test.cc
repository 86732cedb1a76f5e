#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "controller/campaign_io/spec_parser.h"
#include "controller/search/rate_search.h"
#include "controller/search/schedule_plan.h"
#include "controller/store.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

crest::v1::CampaignSpec SpecOf(const std::string& extra) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(
      "name: a\nmodels: [{name: m}]\nsearch: {strategy: practice, range: [100, 300], "
      "initial: 100}\n" +
      extra);
  EXPECT_TRUE(parsed.problems.empty()) << FormatProblems(parsed.problems);
  return parsed.spec;
}

int next_id = 1;

// A search run of "m" at `point` (latencies 120.4 / 45.6 ms, QPS speed / 100).
Trial Search(int64_t point, double speed, uint32_t repeat = 0) {
  Trial t;
  t.set_id(absl::StrCat("c1-t", next_id++));
  t.set_model("m");
  t.mutable_parameters()->set_max_batch_size(point);
  t.mutable_parameters()->set_max_prefill_batch_size(point / 2);
  t.set_repeat(repeat);
  t.set_status(crest::v1::TRIAL_OK);
  t.mutable_result()->set_generate_speed(speed);
  t.mutable_result()->set_qps(speed / 100);
  t.mutable_result()->mutable_first_token_time()->set_average_ms(120.4);
  t.mutable_result()->mutable_decode_time()->set_average_ms(45.6);
  return t;
}

// The ladder 100 / 200 / 300 with its best at 200 (2000 tok/s).
std::vector<Trial> Ladder() { return {Search(100, 1500), Search(200, 2000), Search(300, 1500)}; }

Trial Calibrated(double speed, uint32_t repeat = 0,
                 crest::v1::TrialStatus status = crest::v1::TRIAL_OK) {
  Trial t = Search(200, speed, repeat);
  t.set_calibration(true);
  t.set_status(status);
  t.mutable_parameters()->set_support_select_batch(true);
  return t;
}

Trial RateRunAt(double rate, uint32_t index, double speed,
                crest::v1::TrialStatus status = crest::v1::TRIAL_OK) {
  Trial t = Search(200, speed, index);
  t.set_rate_search(true);
  t.set_status(status);
  t.mutable_parameters()->set_request_rate(rate);
  t.mutable_parameters()->set_concurrency(1000);
  t.mutable_result()->set_daemon_pid(4242);
  return t;
}

ChosenPoint Chosen(const crest::v1::CampaignSpec& spec, const std::vector<Trial>& trials) {
  auto chosen = ChosenPointOf(spec, "m", ModelState{}, trials);
  EXPECT_TRUE(chosen.has_value());
  return chosen.value_or(ChosenPoint{});
}

TEST(ChosenPointOf, TheAnswerWithTheMeansOfItsRuns) {
  auto spec = SpecOf("");
  std::vector<Trial> trials = Ladder();
  trials.push_back(RateRunAt(99, 0, 9999));  // never a search point
  ChosenPoint c = Chosen(spec, trials);
  EXPECT_EQ(c.answer.point, 200);
  EXPECT_DOUBLE_EQ(c.answer.objective, 2000);
  EXPECT_DOUBLE_EQ(c.first_token_ms, 120.4);
  EXPECT_DOUBLE_EQ(c.qps, 20);
  EXPECT_DOUBLE_EQ(c.noise, 0.02);  // nothing ran twice: the prior
  EXPECT_FALSE(ChosenPointOf(spec, "m", ModelState{}, {}).has_value());
}

TEST(ChosenPointOf, ComparesPointsAsIfOnOneNodeAndReportsWhatWasMeasured) {
  // Node "b" runs 20% slower than "a" (both measured 500). 520, measured on
  // b alone, is then the best point although "a" measured more at 540; the
  // answer's figure is the run itself, not the node-corrected one.
  ParsedSpec parsed = ParseAndValidateCampaignSpec(
      "name: a\nmodels: [{name: m}]\nsearch: {strategy: grid, range: [500, 540], step: 20}\n");
  ASSERT_TRUE(parsed.problems.empty()) << FormatProblems(parsed.problems);
  auto on = [](Trial t, const std::string& node) {
    t.set_node(node);
    return t;
  };
  std::vector<Trial> trials = {on(Search(500, 3000), "a"), on(Search(500, 2500, 1), "b"),
                               on(Search(520, 2700), "b"), on(Search(540, 3050), "a")};
  ChosenPoint c = Chosen(parsed.spec, trials);
  EXPECT_EQ(c.answer.point, 520);
  EXPECT_DOUBLE_EQ(c.answer.objective, 2700);
  // Within the noise band the nodes count as alike, and 540 stays the best.
  trials[1] = on(Search(500, 2900, 1), "b");
  EXPECT_EQ(Chosen(parsed.spec, trials).answer.point, 540);
}

TEST(EvaluateCalibration, PendingThenKeptWithinTheBand) {
  auto spec = SpecOf("calibrate: true\n");
  std::vector<Trial> trials = Ladder();
  ChosenPoint c = Chosen(spec, trials);
  auto pending = EvaluateCalibration(spec, "m", trials, c);
  EXPECT_EQ(pending.outcome(), "pending");
  EXPECT_DOUBLE_EQ(pending.prefill_time_ms_per_req(), 120);
  EXPECT_DOUBLE_EQ(pending.decode_time_ms_per_req(), 46);
  auto p = CalibrationParameters(spec, c);
  EXPECT_TRUE(p.support_select_batch());
  EXPECT_EQ(p.max_batch_size(), 200);
  EXPECT_EQ(p.max_prefill_batch_size(), 100);
  // 3% down is inside 2 x 2% x sqrt(1 + 1) = 5.66%: kept.
  trials.push_back(Calibrated(1940));
  auto kept = EvaluateCalibration(spec, "m", trials, c);
  EXPECT_EQ(kept.outcome(), "kept");
  EXPECT_DOUBLE_EQ(kept.generate_speed_before(), 2000);
  EXPECT_DOUBLE_EQ(kept.generate_speed_after(), 1940);
  EXPECT_NEAR(kept.band(), 0.0566, 1e-4);
  EXPECT_THAT(kept.reason(), HasSubstr("fell only 3.0%"));
  FinalConfig f = FinalConfigOf(spec, c, &kept, trials, "m");
  EXPECT_TRUE(f.calibrated);
  EXPECT_TRUE(f.parameters.support_select_batch());
  EXPECT_DOUBLE_EQ(f.generate_speed, 1940);
  EXPECT_DOUBLE_EQ(f.qps, 19.4);
}

TEST(EvaluateCalibration, DroppedBeyondTheBandOrWhenTheRunFailed) {
  auto spec = SpecOf("calibrate: true\n");
  std::vector<Trial> trials = Ladder();
  ChosenPoint c = Chosen(spec, trials);
  std::vector<Trial> fell = trials;
  fell.push_back(Calibrated(1800));
  auto dropped = EvaluateCalibration(spec, "m", fell, c);
  EXPECT_EQ(dropped.outcome(), "dropped");
  EXPECT_THAT(dropped.reason(), HasSubstr("fell 10.0%"));
  FinalConfig f = FinalConfigOf(spec, c, &dropped, fell, "m");
  EXPECT_FALSE(f.parameters.support_select_batch());
  EXPECT_DOUBLE_EQ(f.generate_speed, 2000);
  std::vector<Trial> failed = trials;
  failed.push_back(Calibrated(0, 0, crest::v1::TRIAL_FAILED));
  failed.back().set_reason("daemon did not start");
  auto no_run = EvaluateCalibration(spec, "m", failed, c);
  EXPECT_EQ(no_run.outcome(), "dropped");
  EXPECT_THAT(no_run.reason(), HasSubstr("daemon did not start"));
}

// The walk the verdict and the planner share: with two runs wanted and two
// make-ups allowed, a flagged repeat is passed over and the next counts.
TEST(CountedCalibrationRepeats, PassesOverFlaggedRepeatsWithinTheMakeUps) {
  auto spec = SpecOf("calibrate: true\nsearch: {repeats: 2}\nlimits: {max_retries: 2}\n");
  std::vector<Trial> trials = {Calibrated(2500, 0), Calibrated(2400, 1), Calibrated(2600, 2)};
  trials[0].add_flags("client_bound");
  auto outcomes = RepeatOutcomes(trials, "m", /*calibration=*/true, 3);
  WalkedRepeats walk = CountedCalibrationRepeats(spec, outcomes, 200);
  EXPECT_EQ(walk.passed_over, 1u);
  ASSERT_EQ(walk.counted.size(), 2u);
  EXPECT_EQ(walk.counted[0].first, 1u);
  EXPECT_DOUBLE_EQ(walk.counted[0].second.speed, 2400);
  EXPECT_EQ(walk.counted[1].first, 2u);
  // Nothing run yet: the first two repeats count, not yet run.
  WalkedRepeats none = CountedCalibrationRepeats(spec, {}, 200);
  ASSERT_EQ(none.counted.size(), 2u);
  EXPECT_EQ(none.counted[1].first, 1u);
  EXPECT_FALSE(none.counted[1].second.ok);
  // Every repeat flagged: none counted, within 2 + 2.
  for (auto& t : trials) t.add_flags("client_bound");
  trials.push_back(Calibrated(2500, 3));
  trials.back().add_flags("client_bound");
  WalkedRepeats lost =
      CountedCalibrationRepeats(spec, RepeatOutcomes(trials, "m", /*calibration=*/true, 3), 200);
  EXPECT_TRUE(lost.counted.empty());
  EXPECT_EQ(lost.passed_over, 4u);
}

TEST(EvaluateCalibration, AFlaggedRunIsMadeUpUpToMaxRetries) {
  auto spec = SpecOf("calibrate: true\nlimits: {max_retries: 2}\n");
  EXPECT_EQ(CalibrationRunsAtMost(spec), 3u);
  std::vector<Trial> trials = Ladder();
  ChosenPoint c = Chosen(spec, trials);
  auto flagged_run = [](uint32_t repeat) {
    Trial t = Calibrated(2500, repeat);  // a client-bound figure, never evidence
    t.add_flags("client_bound");
    return t;
  };
  trials.push_back(flagged_run(0));
  auto pending = EvaluateCalibration(spec, "m", trials, c);
  EXPECT_EQ(pending.outcome(), "pending");
  EXPECT_THAT(pending.reason(), HasSubstr("0 of 1 calibrated runs measured (1 flagged, made up)"));
  // The make-up decides, by its own figure alone.
  std::vector<Trial> fell = trials;
  fell.push_back(Calibrated(1800, 1));
  auto dropped = EvaluateCalibration(spec, "m", fell, c);
  EXPECT_EQ(dropped.outcome(), "dropped");
  EXPECT_DOUBLE_EQ(dropped.generate_speed_after(), 1800);
  EXPECT_EQ(dropped.runs_after(), 1u);
  EXPECT_THAT(dropped.reason(), HasSubstr("fell 10.0%"));
  EXPECT_THAT(dropped.reason(), HasSubstr("1 flagged calibrated run not counted"));
  std::vector<Trial> held = trials;
  held.push_back(flagged_run(1));
  held.push_back(Calibrated(1990, 2));
  auto kept = EvaluateCalibration(spec, "m", held, c);
  EXPECT_EQ(kept.outcome(), "kept");
  EXPECT_DOUBLE_EQ(kept.generate_speed_after(), 1990);
  EXPECT_THAT(kept.reason(), HasSubstr("2 flagged calibrated runs not counted"));
  // Flagged as often as max_retries allows make-ups: nothing was measured.
  std::vector<Trial> lost = trials;
  lost.push_back(flagged_run(1));
  lost.push_back(flagged_run(2));
  auto none = EvaluateCalibration(spec, "m", lost, c);
  EXPECT_EQ(none.outcome(), "dropped");
  EXPECT_THAT(none.reason(), HasSubstr("every calibrated run was flagged (3 runs"));
  EXPECT_EQ(none.runs_after(), 0u);  // the report's GenerateSpeedAfter: null
  EXPECT_FALSE(FinalConfigOf(spec, c, &none, lost, "m").calibrated);
}

TEST(EvaluateCalibration, ComparesWithinANodeWhenTheNodesDiffer) {
  // Node "a" measures 20% faster than "b" at 500 and 540, and the answer,
  // 520, ran on b. A calibrated run of 2800 on b is a rise; the same figure
  // on a is a fall, since a would have measured the answer faster too.
  ParsedSpec parsed = ParseAndValidateCampaignSpec(
      "name: a\nmodels: [{name: m}]\nsearch: {strategy: grid, range: [500, 540], step: 20}\n"
      "calibrate: true\n");
  ASSERT_TRUE(parsed.problems.empty()) << FormatProblems(parsed.problems);
  const auto& spec = parsed.spec;
  auto on = [](Trial t, const std::string& node) {
    t.set_node(node);
    return t;
  };
  std::vector<Trial> trials = {on(Search(500, 3000), "a"), on(Search(500, 2500, 1), "b"),
                               on(Search(520, 2700), "b"), on(Search(540, 3050), "a"),
                               on(Search(540, 2540, 1), "b")};
  ChosenPoint c = Chosen(spec, trials);
  ASSERT_EQ(c.answer.point, 520);
  ASSERT_EQ(c.runs.size(), 1u);
  EXPECT_EQ(c.runs[0].node, "b");
  ASSERT_GT(c.node_factors["a"].factor, 1.1 * c.node_factors["b"].factor);
  auto calibrated_on = [&](const std::string& node) {
    Trial t = on(Calibrated(2800), node);
    t.mutable_parameters()->set_max_batch_size(520);
    t.mutable_parameters()->set_max_prefill_batch_size(260);
    std::vector<Trial> with = trials;
    with.push_back(t);
    return EvaluateCalibration(spec, "m", with, c);
  };
  auto same_node = calibrated_on("b");
  EXPECT_EQ(same_node.outcome(), "kept");
  EXPECT_NEAR(same_node.change(), 2800.0 / 2700 - 1, 1e-9);
  EXPECT_THAT(same_node.reason(),
              HasSubstr("rose 3.7% with supportSelectBatch (2700.0 -> 2800.0 tokens/s;"));
  auto faster_node = calibrated_on("a");
  EXPECT_EQ(faster_node.outcome(), "dropped");
  EXPECT_NEAR(faster_node.change(),
              (2800 / c.node_factors["a"].factor) / (2700 / c.node_factors["b"].factor) - 1, 1e-9);
  // The figures stay as measured; the reason says why they are not compared as such.
  EXPECT_DOUBLE_EQ(faster_node.generate_speed_before(), 2700);
  EXPECT_DOUBLE_EQ(faster_node.generate_speed_after(), 2800);
  EXPECT_THAT(faster_node.reason(), HasSubstr("2700.0 -> 2800.0 tokens/s as measured, on nodes "
                                              "whose speeds differ"));
}

TEST(EvaluateCalibration, RepeatsAreAveragedAndAnInterruptedRunIsPending) {
  auto spec = SpecOf(
      "search: {strategy: practice, range: [100, 300], initial: 100, repeats: 2}\n"
      "calibrate: true\n");
  std::vector<Trial> trials = {Search(100, 1500),    Search(100, 1500, 1), Search(200, 2000),
                               Search(200, 2000, 1), Search(300, 1500),    Search(300, 1500, 1)};
  ChosenPoint c = Chosen(spec, trials);
  trials.push_back(Calibrated(2100));
  trials.push_back(Calibrated(0, 1, crest::v1::TRIAL_INTERRUPTED));
  EXPECT_EQ(EvaluateCalibration(spec, "m", trials, c).outcome(), "pending");
  trials.push_back(Calibrated(2300, 1));
  auto kept = EvaluateCalibration(spec, "m", trials, c);
  EXPECT_EQ(kept.outcome(), "kept");
  EXPECT_DOUBLE_EQ(kept.generate_speed_after(), 2200);
  EXPECT_EQ(kept.runs_after(), 2u);
}

TEST(EvaluateCalibration, SkippedInTextModeOrWithoutLatencies) {
  auto text = SpecOf("client: {task_kind: text}\ncalibrate: true\n");
  std::vector<Trial> trials = Ladder();
  auto skipped = EvaluateCalibration(text, "m", trials, Chosen(text, trials));
  EXPECT_EQ(skipped.outcome(), "skipped");
  EXPECT_THAT(skipped.reason(), HasSubstr("task_kind text measures no first-token"));
  auto spec = SpecOf("calibrate: true\n");
  for (auto& t : trials) t.mutable_result()->clear_first_token_time();
  EXPECT_EQ(EvaluateCalibration(spec, "m", trials, Chosen(spec, trials)).outcome(), "skipped");
}

FinalConfig Config(const crest::v1::CampaignSpec& spec, const std::vector<Trial>& trials) {
  return FinalConfigOf(spec, Chosen(spec, trials), nullptr, trials, "m");
}

TEST(EvaluateRateSearch, ClimbsByTheFactorUntilThroughputStopsRising) {
  auto spec = SpecOf("rate_search: {start: 10, factor: 2}\n");
  std::vector<Trial> trials = Ladder();
  const FinalConfig config = Config(spec, trials);
  std::optional<RateRun> next;
  auto r = EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  EXPECT_FALSE(r.done());
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->index, 0u);
  EXPECT_EQ(next->attempt, 1u);
  EXPECT_DOUBLE_EQ(next->parameters.request_rate(), 10);
  EXPECT_EQ(next->parameters.concurrency(), 1000u);
  EXPECT_EQ(next->parameters.max_batch_size(), 200);
  trials.push_back(RateRunAt(10, 0, 1000));
  trials.push_back(RateRunAt(20, 1, 1900));
  r = EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  ASSERT_TRUE(next.has_value());
  EXPECT_DOUBLE_EQ(next->parameters.request_rate(), 40);
  // 1900 -> 1990 is 4.7%, inside the band of two single runs (5.66%): the end.
  trials.push_back(RateRunAt(40, 2, 1990));
  r = EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  EXPECT_FALSE(next.has_value());
  EXPECT_TRUE(r.done());
  EXPECT_DOUBLE_EQ(r.best_rate(), 20);
  EXPECT_DOUBLE_EQ(r.best_generate_speed(), 1900);
  ASSERT_EQ(r.points_size(), 3);
  EXPECT_TRUE(r.points(1).rises());
  EXPECT_FALSE(r.points(2).rises());
  EXPECT_EQ(r.points(2).daemon_pid(), 4242);
  EXPECT_THAT(r.reason(), HasSubstr("stopped rising at 40 requests/s"));
}

TEST(EvaluateRateSearch, AutoStartFromTheMeasuredQps) {
  auto spec = SpecOf("rate_search: {}\n");
  std::vector<Trial> trials = Ladder();
  std::optional<RateRun> next;
  EvaluateRateSearch(spec, "m", trials, Config(spec, trials), 0.02, &next);
  ASSERT_TRUE(next.has_value());
  EXPECT_DOUBLE_EQ(next->parameters.request_rate(), 0.7 * 20);
  for (auto& t : trials) t.mutable_result()->set_qps(0);
  auto none = EvaluateRateSearch(spec, "m", trials, Config(spec, trials), 0.02, &next);
  EXPECT_TRUE(none.done());
  EXPECT_FALSE(next.has_value());
  EXPECT_THAT(none.reason(), HasSubstr("set rate_search.start"));
}

TEST(EvaluateRateSearch, RetriesInterruptedRunsAndStopsAtFailedOnes) {
  auto spec = SpecOf("rate_search: {start: 10, factor: 2}\nlimits: {max_retries: 1}\n");
  std::vector<Trial> trials = Ladder();
  const FinalConfig config = Config(spec, trials);
  trials.push_back(RateRunAt(10, 0, 0, crest::v1::TRIAL_INTERRUPTED));
  std::optional<RateRun> next;
  EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->attempt, 2u);
  trials.push_back(RateRunAt(10, 0, 0, crest::v1::TRIAL_RUNNING));
  EXPECT_FALSE(EvaluateRateSearch(spec, "m", trials, config, 0.02, &next).done());
  EXPECT_FALSE(next.has_value());  // one runs: nothing new
  trials.back().set_status(crest::v1::TRIAL_INTERRUPTED);
  auto gave_up = EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  EXPECT_TRUE(gave_up.done());
  EXPECT_THAT(gave_up.reason(), HasSubstr("interrupted 2 times"));

  std::vector<Trial> failed = Ladder();
  failed.push_back(RateRunAt(10, 0, 1000));
  failed.push_back(RateRunAt(20, 1, 0, crest::v1::TRIAL_FAILED));
  failed.back().set_reason("benchmark exited 1");
  auto r = EvaluateRateSearch(spec, "m", failed, config, 0.02, &next);
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(next.has_value());
  ASSERT_EQ(r.points_size(), 2);
  EXPECT_EQ(r.points(1).status(), "failed");
  EXPECT_DOUBLE_EQ(r.best_rate(), 10);
  EXPECT_THAT(r.reason(), HasSubstr("ended failed (benchmark exited 1)"));
}

// A flagged run measured the client, not the server (a client-bound
// crest-bench on a busy machine): the next attempt at the same rate makes it
// up, on the same daemon, and the rate is judged on the trusted run.
TEST(EvaluateRateSearch, MakesUpAFlaggedRunAtTheSameRate) {
  auto spec = SpecOf("rate_search: {start: 10, factor: 2}\nlimits: {max_retries: 1}\n");
  std::vector<Trial> trials = Ladder();
  const FinalConfig config = Config(spec, trials);
  trials.push_back(RateRunAt(10, 0, 1000));
  trials.push_back(RateRunAt(20, 1, 3000));
  trials.back().add_flags("client_bound");
  std::optional<RateRun> next;
  auto pending = EvaluateRateSearch(spec, "m", trials, config, 0.02, &next);
  EXPECT_FALSE(pending.done());
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->index, 1u);
  EXPECT_EQ(next->attempt, 2u);
  EXPECT_DOUBLE_EQ(next->parameters.request_rate(), 20);
  EXPECT_EQ(pending.points_size(), 1);  // 20's figure is not known yet

  std::vector<Trial> made_up = trials;
  made_up.push_back(RateRunAt(20, 1, 1900));
  auto r = EvaluateRateSearch(spec, "m", made_up, config, 0.02, &next);
  EXPECT_FALSE(r.done());
  ASSERT_TRUE(next.has_value());
  EXPECT_DOUBLE_EQ(next->parameters.request_rate(), 40);
  EXPECT_EQ(next->attempt, 1u);
  ASSERT_EQ(r.points_size(), 2);
  EXPECT_EQ(r.points(1).status(), "ok");
  EXPECT_DOUBLE_EQ(r.points(1).generate_speed(), 1900);  // not the flagged 3000
  EXPECT_TRUE(r.points(1).rises());
  EXPECT_EQ(r.points(1).flagged_runs(), 1u);
  EXPECT_THAT(r.points(1).flags(), ::testing::ElementsAre("client_bound"));

  // Flagged again, and max_retries (1) allows no more: the search ends at
  // the rate before, whose figure was trusted.
  std::vector<Trial> lost = trials;
  lost.push_back(RateRunAt(20, 1, 2900));
  lost.back().add_flags("client_bound");
  auto none = EvaluateRateSearch(spec, "m", lost, config, 0.02, &next);
  EXPECT_TRUE(none.done());
  EXPECT_FALSE(next.has_value());
  ASSERT_EQ(none.points_size(), 2);
  EXPECT_EQ(none.points(1).status(), "flagged");
  EXPECT_EQ(none.points(1).flagged_runs(), 2u);
  EXPECT_DOUBLE_EQ(none.best_rate(), 10);
  EXPECT_THAT(none.reason(),
              HasSubstr("every run at 20 requests/s was flagged (client_bound), 2 runs"));

  std::vector<Trial> mixed = trials;
  mixed.push_back(RateRunAt(20, 1, 0, crest::v1::TRIAL_INTERRUPTED));
  auto untrusted = EvaluateRateSearch(spec, "m", mixed, config, 0.02, &next);
  EXPECT_TRUE(untrusted.done());
  EXPECT_THAT(untrusted.reason(),
              HasSubstr("no run at 20 requests/s was trusted: 1 flagged (client_bound), 1 "
                        "interrupted"));
}

TEST(EvaluateRateSearch, MaxRunsEndsAStillRisingCurve) {
  auto spec = SpecOf("rate_search: {start: 1, factor: 2, max_runs: 2}\n");
  std::vector<Trial> trials = Ladder();
  trials.push_back(RateRunAt(1, 0, 100));
  trials.push_back(RateRunAt(2, 1, 200));
  std::optional<RateRun> next;
  auto r = EvaluateRateSearch(spec, "m", trials, Config(spec, trials), 0.02, &next);
  EXPECT_TRUE(r.done());
  EXPECT_DOUBLE_EQ(r.best_rate(), 2);
  EXPECT_THAT(r.reason(), HasSubstr("max_runs (2) measured; throughput still rose"));
}

TEST(SameServerConfig, OnlyScheduleConfigValuesCount) {
  crest::v1::TrialParameters a;
  a.set_max_batch_size(200);
  a.set_max_prefill_batch_size(100);
  crest::v1::TrialParameters b = a;
  b.set_request_rate(5);
  b.set_concurrency(1000);
  EXPECT_TRUE(SameServerConfig(a, b));
  b.set_support_select_batch(true);
  EXPECT_FALSE(SameServerConfig(a, b));
}

TEST(PlanModel, CalibratesTheAnswerThenSearchesTheRateOnOneNode) {
  auto spec = SpecOf("calibrate: true\nrate_search: {start: 10, factor: 2}\n");
  PracticeSearch practice;
  const ModelState state;
  std::vector<Trial> trials = Ladder();
  // The ladder fell at 300: calibrate the answer, 200, with select batch.
  trials[1].set_node("b");  // the answer's run
  ModelPlan plan = PlanModel(spec, spec.models(0), state, trials, practice, 0, 3, 0);
  ASSERT_EQ(plan.trials.size(), 1u);
  EXPECT_TRUE(plan.trials[0].calibration);
  EXPECT_THAT(plan.trials[0].prefer_on, ElementsAre("b"));
  EXPECT_TRUE(plan.trials[0].measured_on.empty());
  EXPECT_EQ(plan.trials[0].parameters.max_batch_size(), 200);
  EXPECT_TRUE(plan.trials[0].parameters.support_select_batch());
  EXPECT_FALSE(plan.done_reason.has_value());
  // Nothing new while a search run is still running.
  EXPECT_TRUE(PlanModel(spec, spec.models(0), state, trials, practice, 1, 3, 0).trials.empty());
  trials.push_back(Calibrated(2100));
  plan = PlanModel(spec, spec.models(0), state, trials, practice, 0, 3, 0);
  ASSERT_EQ(plan.trials.size(), 1u);  // one node, whatever is free
  EXPECT_TRUE(plan.trials[0].rate_search);
  EXPECT_TRUE(plan.trials[0].parameters.support_select_batch());  // kept
  EXPECT_DOUBLE_EQ(plan.trials[0].parameters.request_rate(), 10);
  trials.push_back(RateRunAt(10, 0, 1000));
  trials.back().mutable_parameters()->set_support_select_batch(true);
  trials.push_back(RateRunAt(20, 1, 1010));
  plan = PlanModel(spec, spec.models(0), state, trials, practice, 0, 3, 0);
  EXPECT_TRUE(plan.trials.empty());
  ASSERT_TRUE(plan.done_reason.has_value());
  EXPECT_THAT(*plan.done_reason, HasSubstr("throughput fell at maxBatchSize 300"));
  EXPECT_THAT(*plan.done_reason, HasSubstr("calibration kept"));
  EXPECT_THAT(*plan.done_reason, HasSubstr("rate search: throughput stopped rising at 20"));
  EXPECT_TRUE(plan.finished);
}

TEST(PlanModel, MakesUpAFlaggedCalibratedRunWithTheNextRepeat) {
  auto spec = SpecOf("calibrate: true\nlimits: {max_retries: 1}\n");
  PracticeSearch practice;
  const ModelState state;
  std::vector<Trial> trials = Ladder();
  trials.push_back(Calibrated(2500));
  trials.back().add_flags("client_bound");
  ModelPlan plan = PlanModel(spec, spec.models(0), state, trials, practice, 0, 3, 0);
  ASSERT_EQ(plan.trials.size(), 1u);
  EXPECT_TRUE(plan.trials[0].calibration);
  EXPECT_EQ(plan.trials[0].repeat, 1u);
  EXPECT_EQ(plan.trials[0].attempt, 1u);
  EXPECT_TRUE(plan.trials[0].parameters.support_select_batch());
  // Flagged again, and max_retries (1) allows no further make-up: the
  // calibration is dropped and the model is done.
  trials.push_back(Calibrated(2500, 1));
  trials.back().add_flags("client_bound");
  plan = PlanModel(spec, spec.models(0), state, trials, practice, 0, 3, 0);
  EXPECT_TRUE(plan.trials.empty());
  ASSERT_TRUE(plan.done_reason.has_value());
  EXPECT_THAT(*plan.done_reason,
              HasSubstr("calibration dropped: every calibrated run was flagged"));
  EXPECT_TRUE(plan.finished);
}

}  // namespace
}  // namespace crest::controller
