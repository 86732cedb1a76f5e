#include "controller/search/schedule_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "controller/campaign_io/spec_parser.h"

namespace crest::controller {
namespace {

using ::testing::ElementsAre;

crest::v1::CampaignSpec PlanSpec(const std::string& yaml) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(yaml);
  EXPECT_TRUE(parsed.problems.empty()) << FormatProblems(parsed.problems);
  return parsed.spec;
}

crest::v1::Trial Measured(int64_t point, crest::v1::TrialStatus status, double speed) {
  crest::v1::Trial t;
  t.set_model("m");
  t.mutable_parameters()->set_max_batch_size(point);
  t.set_status(status);
  t.mutable_result()->set_generate_speed(speed);
  return t;
}

std::vector<std::string> Planned(const ModelPlan& plan) {
  std::vector<std::string> out;
  for (const auto& t : plan.trials) {
    out.push_back(absl::StrCat(t.parameters.max_batch_size(), "/r", t.repeat, "/a", t.attempt));
  }
  return out;
}

TEST(PlanModel, ProbesFirstWhenTheRangeIsAuto) {
  auto spec = PlanSpec("name: p\nmodels: [{name: m}]\nlimits: {max_retries: 1}\n");
  PracticeSearch step;
  ModelPlan plan = PlanModel(spec, spec.models(0), ModelState{}, {}, step, 0, 1, 0);
  EXPECT_TRUE(plan.probe);
  EXPECT_TRUE(plan.trials.empty());
  EXPECT_FALSE(plan.finished);
  EXPECT_FALSE(PlanModel(spec, spec.models(0), ModelState{}, {}, step, 1, 1, 0).probe);
  EXPECT_FALSE(PlanModel(spec, spec.models(0), ModelState{}, {}, step, 0, 0, 0).probe);
  ModelPlan given_up = PlanModel(spec, spec.models(0), ModelState{}, {}, step, 0, 1, 2);
  EXPECT_FALSE(given_up.probe);
  EXPECT_EQ(given_up.done_reason, "could not read npuBlockNum: every probe start failed");
  EXPECT_TRUE(given_up.finished);
}

TEST(PlanModel, StartsWantedAttemptsUpToParallelAndFreeNodes) {
  auto spec = PlanSpec(R"(name: p
models: [{name: m, parallel: 3}]
search: {range: [100, 400], initial: 100, repeats: 2}
)");
  PracticeSearch step;
  ModelPlan plan = PlanModel(spec, spec.models(0), ModelState{}, {}, step, 0, 5, 0);
  EXPECT_THAT(Planned(plan), ElementsAre("100/r0/a1", "100/r1/a1", "200/r0/a1"));
  EXPECT_EQ(plan.trials[0].parameters.max_prefill_batch_size(), 50);
  EXPECT_EQ(plan.trials[0].parameters.concurrency(), 99u);
  EXPECT_THAT(Planned(PlanModel(spec, spec.models(0), ModelState{}, {}, step, 2, 5, 0)),
              ElementsAre("100/r0/a1"));
  EXPECT_THAT(Planned(PlanModel(spec, spec.models(0), ModelState{}, {}, step, 0, 2, 0)),
              ElementsAre("100/r0/a1", "100/r1/a1"));
  // An interrupted attempt is run again, as the next attempt.
  std::vector<crest::v1::Trial> trials = {Measured(100, crest::v1::TRIAL_INTERRUPTED, 0)};
  EXPECT_THAT(Planned(PlanModel(spec, spec.models(0), ModelState{}, trials, step, 0, 1, 0)),
              ElementsAre("100/r0/a2"));
}

TEST(PlanModel, ARoundProposesNoMorePointsThanTheModelHasNodeSlots) {
  // parallel 8: eight node_slots make the knee search's wide first round
  // (2% apart around the guess); two node_slots, a round of two (4% apart),
  // not a round of eight measured in four waves.
  auto spec = PlanSpec(R"(name: p
models: [{name: m, parallel: 8}]
search: {range: [362, 1088], initial: 575}
)");
  KneeSearch knee;
  EXPECT_THAT(Planned(PlanModel(spec, spec.models(0), ModelState{}, {}, knee, 0, 8, 0, 8)),
              ElementsAre("552/r0/a1", "564/r0/a1", "575/r0/a1", "587/r0/a1", "598/r0/a1",
                          "610/r0/a1", "621/r0/a1", "633/r0/a1"));
  EXPECT_THAT(Planned(PlanModel(spec, spec.models(0), ModelState{}, {}, knee, 0, 2, 0, 2)),
              ElementsAre("564/r0/a1", "587/r0/a1"));
}

TEST(PlanModel, EndsTheSearchOnceNothingRuns) {
  auto spec = PlanSpec(
      "name: p\nmodels: [{name: m}]\nsearch: {range: [100, 300], initial: 100, step: 100}\n");
  PracticeSearch step;
  std::vector<crest::v1::Trial> trials = {Measured(100, crest::v1::TRIAL_OK, 10),
                                          Measured(200, crest::v1::TRIAL_OK, 5)};
  ModelPlan running = PlanModel(spec, spec.models(0), ModelState{}, trials, step, 1, 1, 0);
  EXPECT_FALSE(running.done_reason.has_value());
  EXPECT_FALSE(running.finished);
  ModelPlan idle = PlanModel(spec, spec.models(0), ModelState{}, trials, step, 0, 1, 0);
  ASSERT_TRUE(idle.done_reason.has_value());
  EXPECT_THAT(*idle.done_reason, ::testing::HasSubstr("throughput fell at maxBatchSize 200"));
  EXPECT_TRUE(idle.finished);
  EXPECT_TRUE(idle.trials.empty());
  ModelState done;
  done.done = true;
  EXPECT_TRUE(PlanModel(spec, spec.models(0), done, trials, step, 0, 1, 0).finished);
}

// A strategy that wants `point` measured `runs` times in all.
class WantsRuns final : public SearchStrategy {
 public:
  WantsRuns(int64_t point, uint32_t runs) : point_(point), runs_(runs) {}
  std::string Name() const override { return "wants-runs"; }
  SearchDecision Decide(const SearchSpace&, const Outcomes&, size_t) const override {
    SearchDecision d;
    d.wanted = {point_};
    d.runs[point_] = runs_;
    return d;
  }
  size_t PlannedPoints(const SearchSpace&) const override { return 1; }

 private:
  int64_t point_;
  uint32_t runs_;
};

// The plan of a model searched by `strategy` (parallel 3) after `trials`,
// with `running` of its jobs running and `free` node_slots free.
ModelPlan PlanWanting(const WantsRuns& strategy, const std::vector<crest::v1::Trial>& trials,
                      int running = 0, size_t free = 5) {
  auto spec = PlanSpec(R"(name: p
models: [{name: m, parallel: 3}]
search: {range: [100, 400], initial: 100}
)");
  return PlanModel(spec, spec.models(0), ModelState{}, trials, strategy, running, free, 0);
}

TEST(PlanModel, StartsTheExtraRunsAStrategyAsksFor) {
  std::vector<crest::v1::Trial> trials = {Measured(200, crest::v1::TRIAL_OK, 10)};
  EXPECT_THAT(Planned(PlanWanting(WantsRuns(200, 3), trials)),
              ElementsAre("200/r1/a1", "200/r2/a1"));
  // Fewer runs than the spec's repeats asks for nothing more.
  EXPECT_TRUE(PlanWanting(WantsRuns(200, 1), trials, /*running=*/1).trials.empty());
}

TEST(PlanModel, EndsAModelWhoseStrategyWantsOnlyRunsThatHaveEnded) {
  // Nothing runs and nothing would ever start: waiting would hang the
  // campaign, so the model ends and says why.
  std::vector<crest::v1::Trial> trials = {Measured(200, crest::v1::TRIAL_OK, 10)};
  ModelPlan idle = PlanWanting(WantsRuns(200, 1), trials);
  EXPECT_TRUE(idle.finished);
  EXPECT_EQ(idle.done_reason, "the wants-runs search wants only runs that have ended (200)");
  // Something still runs, or no node_slot is free: the next plan may differ.
  EXPECT_FALSE(PlanWanting(WantsRuns(200, 1), trials, /*running=*/1).finished);
  EXPECT_FALSE(PlanWanting(WantsRuns(200, 1), trials, /*running=*/0, /*free=*/0).finished);
}

TEST(PlanModel, AFlaggedRunIsMadeUpByAnotherRepeat) {
  // The strategy wants trusted runs: a flagged one is no evidence (trial_trust.h).
  std::vector<crest::v1::Trial> trials = {Measured(200, crest::v1::TRIAL_OK, 10),
                                          Measured(200, crest::v1::TRIAL_OK, 11)};
  trials[1].set_repeat(1);
  trials[1].add_flags("client_bound");
  EXPECT_THAT(Planned(PlanWanting(WantsRuns(200, 2), trials)), ElementsAre("200/r2/a1"));
  // A running repeat counts as one to come.
  trials.push_back(Measured(200, crest::v1::TRIAL_RUNNING, 0));
  trials.back().set_repeat(2);
  EXPECT_TRUE(PlanWanting(WantsRuns(200, 2), trials, /*running=*/1).trials.empty());
}

// A flagged first run measured the client, not the server (a busy host): the
// point is not measured yet, so its next repeat makes the run up, up to
// limits.max_retries times, before the search goes on from it. (Seen in a
// busy demo: every run near the knee was flagged, and the search answered
// from the trusted points past the cliff, 27% below the practice's.)
TEST(PlanModel, AFlaggedFirstRunIsMadeUpBeforeTheSearchGoesOn) {
  auto spec = PlanSpec(R"(name: p
models: [{name: m}]
search: {strategy: practice, range: [100, 300], initial: 100, step: 100}
limits: {max_retries: 1}
)");
  PracticeSearch practice;
  auto plan = [&](const std::vector<crest::v1::Trial>& trials) {
    return Planned(PlanModel(spec, spec.models(0), ModelState{}, trials, practice, 0, 1, 0));
  };
  std::vector<crest::v1::Trial> trials = {Measured(100, crest::v1::TRIAL_OK, 10)};
  trials[0].add_flags("client_bound");
  EXPECT_THAT(plan(trials), ElementsAre("100/r1/a1"));
  // The make-up is trusted: the ladder goes on from it.
  std::vector<crest::v1::Trial> made_up = trials;
  made_up.push_back(Measured(100, crest::v1::TRIAL_OK, 12));
  made_up.back().set_repeat(1);
  EXPECT_THAT(plan(made_up), ElementsAre("200/r0/a1"));
  // Flagged again, and max_retries (1) allows no more: the point counts as
  // measured (untrusted) and the search goes on rather than wait.
  std::vector<crest::v1::Trial> lost = made_up;
  lost.back().add_flags("client_bound");
  EXPECT_THAT(plan(lost), ::testing::Not(::testing::Contains(::testing::StartsWith("100/"))));
}

// Plans the first model of `spec` with `strategy` on one node_slot until it
// finishes (40 rounds at most), each planned trial recorded as `measure`
// makes it (its repeat and attempt set here) into `trials`.
void PlayOnOneNodeSlot(const crest::v1::CampaignSpec& spec, const SearchStrategy& strategy,
                       std::vector<crest::v1::Trial>* trials,
                       const std::function<crest::v1::Trial(const PlannedTrial&)>& measure) {
  for (int round = 0; round < 40; ++round) {
    ModelPlan plan = PlanModel(spec, spec.models(0), ModelState{}, *trials, strategy, 0, 1, 0, 1);
    if (plan.finished) return;
    ASSERT_FALSE(plan.trials.empty()) << "round " << round << ": nothing runs, nothing starts";
    for (const PlannedTrial& p : plan.trials) {
      crest::v1::Trial t = measure(p);
      t.set_repeat(p.repeat);
      t.set_attempt(p.attempt);
      trials->push_back(std::move(t));
    }
  }
  FAIL() << "the model did not finish in 40 rounds";
}

TEST(PlanModel, TheKneeSearchEndsOnOneNodeSlotWhenEveryRepeatComesBackFlagged) {
  // Under load (a sanitizer build, a busy host) crest-bench may flag each
  // repeat as client-bound. The answer's confirmation then never counts, and
  // the search must still start runs until max_trials ends it, not wait.
  auto spec = PlanSpec(R"(name: p
models: [{name: m}]
search: {range: [100, 400], initial: 200, max_trials: 12}
)");
  KneeSearch knee;
  std::vector<crest::v1::Trial> trials;
  ASSERT_NO_FATAL_FAILURE(PlayOnOneNodeSlot(spec, knee, &trials, [](const PlannedTrial& p) {
    const int64_t b = p.parameters.max_batch_size();
    // The knee at 250: throughput rises to it, preemptions past it.
    crest::v1::Trial t = Measured(b, crest::v1::TRIAL_OK, b <= 250 ? b : 250 - 2.0 * (b - 250));
    t.mutable_result()->mutable_daemon()->set_preemptions(b <= 250 ? 0 : b - 250);
    if (p.repeat > 0) t.add_flags("client_bound");
    return t;
  }));
  EXPECT_LE(trials.size(), 12u);
  const ModelPlan last = PlanModel(spec, spec.models(0), ModelState{}, trials, knee, 0, 1, 0, 1);
  // Ended by the search itself, not by the planner's guard against waiting:
  // one node's run budget, the model's check paid from it.
  EXPECT_THAT(last.done_reason.value_or(""), ::testing::HasSubstr("the run budget (10) is spent"));
}

// A make-up is a run like any other: once the model's runs reach max_trials
// the flagged ones count as they are, so a host that flags every run still
// ends the search at its budget, with the reason the search gives.
TEST(PlanModel, MakeUpsNeverCarryTheSearchPastMaxTrials) {
  auto spec = PlanSpec(R"(name: p
models: [{name: m}]
search: {range: [100, 400], initial: 200, max_trials: 7}
limits: {max_retries: 3}
)");
  KneeSearch knee;
  std::vector<crest::v1::Trial> trials;
  ASSERT_NO_FATAL_FAILURE(PlayOnOneNodeSlot(spec, knee, &trials, [](const PlannedTrial& p) {
    crest::v1::Trial t = Measured(p.parameters.max_batch_size(), crest::v1::TRIAL_OK, 100);
    t.add_flags("client_bound");
    return t;
  }));
  EXPECT_EQ(trials.size(), 7u);
  // The first point was made up max_retries (3) times before the search went on.
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(trials[r].parameters().max_batch_size(), 200) << r;
    EXPECT_EQ(trials[r].repeat(), static_cast<uint32_t>(r));
  }
  const ModelPlan last = PlanModel(spec, spec.models(0), ModelState{}, trials, knee, 0, 1, 0, 1);
  EXPECT_THAT(last.done_reason.value_or(""), ::testing::HasSubstr("max_trials (7) reached"));
}

// The second run of maxBatchSize 500, whose first ran on node "a".
PlannedTrial RepeatMeasuredOnA() {
  PlannedTrial repeat;
  repeat.parameters.set_max_batch_size(500);
  repeat.parameters.set_max_prefill_batch_size(250);
  repeat.parameters.set_concurrency(499);
  repeat.repeat = 1;
  repeat.measured_on = {"a"};
  return repeat;
}

TEST(AssignNodes, ARepeatPrefersANodeThatHasNotMeasuredThePoint) {
  auto spec = PlanSpec("name: p\nmodels: [{name: m}]\n");
  std::vector<crest::v1::AgentInfo> agents(2);
  agents[0].set_node_name("a");
  agents[1].set_node_name("b");
  const PlannedTrial repeat = RepeatMeasuredOnA();
  EXPECT_THAT(AssignNodes(spec, {repeat}, {"a", "b"}, agents), ElementsAre("b"));
  // Only the node that measured it is free: it runs there rather than wait.
  EXPECT_THAT(AssignNodes(spec, {repeat}, {"a"}, agents), ElementsAre("a"));
}

TEST(AssignNodes, ACalibrationPrefersANodeThatMeasuredItsAnswer) {
  auto spec = PlanSpec("name: p\nmodels: [{name: m}]\n");
  std::vector<crest::v1::AgentInfo> agents(3);
  agents[0].set_node_name("a");
  agents[1].set_node_name("b");
  agents[2].set_node_name("c");
  agents[2].set_slots(2);
  PlannedTrial calibration;
  calibration.calibration = true;
  calibration.parameters.set_max_batch_size(500);
  calibration.prefer_on = {"c"};
  EXPECT_THAT(AssignNodes(spec, {calibration}, {"a", "b", "c#1"}, agents), ElementsAre("c#1"));
  // Its nodes are busy: any free node rather than wait.
  EXPECT_THAT(AssignNodes(spec, {calibration}, {"a", "b"}, agents), ElementsAre("a"));
}

TEST(FreeEligibleNodes, ListedOrderElseAgentOrderSkippingBusyAndLost) {
  std::vector<crest::v1::AgentInfo> agents;
  for (const char* name : {"a", "b", "c", "d"}) {
    auto& a = agents.emplace_back();
    a.set_node_name(name);
    a.set_state(crest::v1::AGENT_READY);
    (*a.mutable_labels())["model"] = "m";
  }
  agents[3].set_state(crest::v1::AGENT_LOST);
  auto busy_b = [](const std::string& node) { return node == "b"; };
  crest::v1::ModelSpec any;
  EXPECT_THAT(FreeEligibleNodes(any, agents, busy_b), ElementsAre("a", "c"));
  crest::v1::ModelSpec listed;
  for (const char* name : {"d", "c", "b", "a"}) listed.add_nodes(name);
  EXPECT_THAT(FreeEligibleNodes(listed, agents, busy_b), ElementsAre("c", "a"));
  crest::v1::ModelSpec other;
  (*other.mutable_selector())["model"] = "n";
  EXPECT_TRUE(FreeEligibleNodes(other, agents, busy_b).empty());
}

// Ready agents a (3 slots), b (from before slots: one) and c (2 slots).
std::vector<crest::v1::AgentInfo> SlottedAgents() {
  std::vector<crest::v1::AgentInfo> agents;
  for (auto [name, slots] : {std::pair{"a", 3u}, std::pair{"b", 0u}, std::pair{"c", 2u}}) {
    auto& a = agents.emplace_back();
    a.set_node_name(name);
    a.set_state(crest::v1::AGENT_READY);
    a.set_slots(slots);
  }
  return agents;
}

TEST(FreeEligibleNodes, EveryNodesFirstSlotComesBeforeAnyNodesSecond) {
  const std::vector<crest::v1::AgentInfo> agents = SlottedAgents();
  auto busy_c1 = [](const std::string& node_slot) { return node_slot == "c#1"; };
  EXPECT_THAT(FreeEligibleNodes(crest::v1::ModelSpec{}, agents, busy_c1),
              ElementsAre("a", "b", "c", "a#1", "a#2"));
}

TEST(EligibleNodeSlots, CountsSlotsBusyOrNotOrNodesForAnExclusiveModel) {
  std::vector<crest::v1::AgentInfo> agents = SlottedAgents();
  agents[2].set_state(crest::v1::AGENT_LOST);
  crest::v1::ModelSpec shared;
  EXPECT_EQ(EligibleNodeSlots(shared, agents), 4u);
  crest::v1::ModelSpec exclusive;
  exclusive.set_exclusive(true);
  EXPECT_EQ(EligibleNodeSlots(exclusive, agents), 2u);
}

TEST(AssignNodes, ARepeatPrefersAnotherNodeNotAnotherSlotOfTheSame) {
  auto spec = PlanSpec("name: p\nmodels: [{name: m}]\n");
  std::vector<crest::v1::AgentInfo> agents(2);
  agents[0].set_node_name("a");
  agents[0].set_slots(2);
  agents[1].set_node_name("b");
  const PlannedTrial repeat = RepeatMeasuredOnA();
  EXPECT_THAT(AssignNodes(spec, {repeat}, {"a#1", "b"}, agents), ElementsAre("b"));
  EXPECT_THAT(AssignNodes(spec, {repeat}, {"a#1"}, agents), ElementsAre("a#1"));
}

TEST(StartedTrial, NamesTheNodeAndTheSlotOfItsNodeSlot) {
  PlannedTrial planned;
  google::protobuf::Timestamp now;
  crest::v1::Trial t = StartedTrial(planned, "c1", "m", "node-7#3", 12, now);
  EXPECT_EQ(t.id(), "c1-t12");
  EXPECT_EQ(t.node(), "node-7");
  EXPECT_EQ(t.slot(), 3u);
  t = StartedTrial(planned, "c1", "m", "node-7", 13, now);
  EXPECT_EQ(t.node(), "node-7");
  EXPECT_EQ(t.slot(), 0u);
}

}  // namespace
}  // namespace crest::controller
