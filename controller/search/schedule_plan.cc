#include "controller/search/schedule_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/spec_limits.h"
#include "controller/campaign_io/trial_kind.h"
#include "controller/search/fleet.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/node_slot.h"
#include "controller/search/rate_search.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

crest::v1::Trial StartedTrial(const PlannedTrial& planned, const std::string& campaign,
                              const std::string& model, const std::string& node_slot,
                              int64_t number, const google::protobuf::Timestamp& now) {
  crest::v1::Trial t;
  t.set_id(absl::StrCat(campaign, "-t", number));
  t.set_campaign_id(campaign);
  t.set_model(model);
  const NodeSlot where = ParseNodeSlot(node_slot);
  t.set_node(where.node);
  t.set_slot(where.slot);
  *t.mutable_parameters() = planned.parameters;
  t.set_status(crest::v1::TRIAL_RUNNING);
  t.set_attempt(planned.attempt);
  t.set_repeat(planned.repeat);
  t.set_calibration(planned.calibration);
  t.set_rate_search(planned.rate_search);
  t.set_confirmation(planned.confirmation);
  *t.mutable_started() = now;
  return t;
}

namespace {

// The rate search at `chosen` (calibrated when `calibration` was kept): its
// next run, or the end of the model with `reason` and the search's verdict.
ModelPlan PlanRateSearch(const crest::v1::CampaignSpec& spec, const crest::v1::ModelSpec& model,
                         const std::vector<crest::v1::Trial>& trials, const ChosenPoint& chosen,
                         const crest::v1::CalibrationReport* calibration, size_t free_nodes,
                         std::string reason, ModelPlan plan) {
  const FinalConfig config = FinalConfigOf(spec, chosen, calibration, trials, model.name());
  std::optional<RateRun> next;
  crest::v1::RateSearchReport rates =
      EvaluateRateSearch(spec, model.name(), trials, config, chosen.noise, &next);
  if (rates.done()) {
    absl::StrAppend(&reason, "; rate search: ", rates.reason());
    plan.done_reason = std::move(reason);
    plan.finished = true;
    return plan;
  }
  if (next && free_nodes > 0) {
    PlannedTrial t;
    t.parameters = next->parameters;
    t.repeat = next->index;
    t.attempt = next->attempt;
    t.rate_search = true;
    plan.trials.push_back(std::move(t));
  }
  return plan;
}

// A fleet's confirmation round: one run of `final_parameters` on each of
// `fleet_nodes` that lacks one, as many at once as there are free nodes.
// True while one is planned or waits for a node; once none does, `reason`
// says how many nodes confirmed it.
bool PlanConfirmations(const std::string& model, const std::vector<crest::v1::Trial>& trials,
                       const crest::v1::TrialParameters& final_parameters,
                       const std::vector<std::string>& fleet_nodes, size_t free_nodes,
                       int max_attempts, ModelPlan* plan, std::string* reason) {
  bool waiting = false;
  size_t confirmed = 0;
  for (const FleetNodeRuns& n : FleetNodes(trials, model, final_parameters, fleet_nodes)) {
    if (n.confirmed) ++confirmed;
    if (!NeedsConfirmation(n, max_attempts) ||
        std::find(fleet_nodes.begin(), fleet_nodes.end(), n.node) == fleet_nodes.end()) {
      continue;
    }
    waiting = true;
    if (plan->trials.size() >= free_nodes) continue;
    PlannedTrial t;
    t.parameters = final_parameters;
    t.attempt = n.confirmations + 1;
    t.confirmation = true;
    t.only_on = {n.node};
    plan->trials.push_back(std::move(t));
  }
  if (!waiting) {
    absl::StrAppend(reason, "; fleet: the final configuration confirmed on ", confirmed,
                    confirmed == 1 ? " more node" : " more nodes");
  }
  return waiting;
}

}  // namespace

ModelPlan PlanModel(const crest::v1::CampaignSpec& spec, const crest::v1::ModelSpec& model,
                    const ModelState& state, const std::vector<crest::v1::Trial>& trials,
                    const SearchStrategy& strategy, int running, size_t free_nodes,
                    int probe_failures, size_t node_slots,
                    const std::vector<std::string>& fleet_nodes) {
  ModelPlan plan;
  if (state.done) {
    plan.finished = running == 0;
    return plan;
  }
  const auto max_retries = static_cast<int>(spec.limits().max_retries());
  if (NeedsBlockNum(spec.search()) && state.npu_block_num == 0) {
    if (probe_failures > max_retries) {
      plan.done_reason = "could not read npuBlockNum: every probe start failed";
      plan.finished = running == 0;
      return plan;
    }
    plan.probe = running == 0 && free_nodes > 0;
    return plan;
  }
  const SearchSpace space = SearchSpaceFor(spec, state.npu_block_num);
  const uint32_t parallel = std::max<uint32_t>(1, model.parallel());
  const int max_attempts = 1 + max_retries;
  auto launch = [&](crest::v1::TrialParameters parameters, uint32_t repeat, int attempt) {
    const int busy = running + static_cast<int>(plan.trials.size());
    if (busy >= static_cast<int>(parallel) || plan.trials.size() >= free_nodes) return false;
    PlannedTrial t;
    t.parameters = std::move(parameters);
    t.repeat = repeat;
    t.attempt = static_cast<uint32_t>(attempt);
    for (const auto& done : trials) {
      if (done.model() == model.name() && IsSearchRun(done) &&
          done.status() == crest::v1::TRIAL_OK &&
          done.parameters().max_batch_size() == t.parameters.max_batch_size()) {
        t.measured_on.push_back(done.node());
      }
    }
    plan.trials.push_back(std::move(t));
    return true;
  };
  auto outcomes = RepeatOutcomes(trials, model.name(), /*calibration=*/false, max_attempts);
  const size_t lookahead = std::clamp<size_t>(node_slots, 1, parallel);
  const uint32_t makeups =
      SearchMakeups(outcomes, space.max_points, static_cast<uint32_t>(max_retries));
  SearchDecision decision = strategy.Decide(
      space, FinishedPoints(outcomes, spec.search().repeats(), space.noise_prior, makeups),
      lookahead);
  if (!decision.done) {
    const uint32_t repeats = spec.search().repeats();
    for (int64_t point : decision.wanted) {
      auto more = decision.runs.find(point);
      const uint32_t runs = std::max(repeats, more == decision.runs.end() ? 0U : more->second);
      // A flagged run measured the client, not the server: one of the
      // spec's repeats is made up by the next repeat, `makeups` times at
      // most (as FinishedPoints waits for); beyond them the strategy wants
      // trusted runs, so a flagged one is always made up (max_trials bounds
      // them): counting it would leave the search waiting for a run that
      // never starts.
      const WalkedRepeats walked =
          WalkRepeats(outcomes, point, {.runs = runs, .base_runs = repeats, .makeups = makeups});
      for (const auto& [r, outcome] : walked.counted) {
        if (outcome.infeasible || outcome.failed) break;  // the point has its outcome
        if (!outcome.ok && !outcome.running &&
            !launch(SearchParametersAt(spec, point), r, outcome.attempts + 1)) {
          break;
        }
      }
    }
    // The strategy asked only for runs that have ended: it has nothing to
    // start and never will, so the model ends here rather than wait forever.
    if (plan.trials.empty() && running == 0 && free_nodes > 0) {
      plan.done_reason =
          absl::StrCat("the ", strategy.Name(), " search wants only runs that have ended (",
                       absl::StrJoin(decision.wanted, ", "), ")");
      plan.finished = true;
    }
    return plan;
  }
  // The search is over once nothing of it runs; then its answer is calibrated
  // and its rate searched, one step after the other.
  if (running > 0) return plan;
  std::string reason = decision.reason;
  std::optional<ChosenPoint> chosen = ChosenPointOf(spec, model.name(), state, trials);
  std::optional<crest::v1::CalibrationReport> calibration;
  if (chosen && spec.calibrate()) {
    calibration = EvaluateCalibration(spec, model.name(), trials, *chosen);
    if (calibration->outcome() == "pending") {
      auto cal_slots = RepeatOutcomes(trials, model.name(), /*calibration=*/true, max_attempts);
      // A flagged repeat is made up by the next, as the verdict counts.
      for (const auto& [r, outcome] :
           CountedCalibrationRepeats(spec, cal_slots, chosen->answer.point).counted) {
        if (outcome.ok || outcome.running) continue;
        if (launch(CalibrationParameters(spec, *chosen), r, outcome.attempts + 1)) {
          // Compared with the search's runs, not a confirmation of them: on
          // a node that measured the answer when one is free.
          PlannedTrial& t = plan.trials.back();
          t.calibration = true;
          t.measured_on.clear();
          for (const NodeRun& run : chosen->runs) {
            if (std::find(t.prefer_on.begin(), t.prefer_on.end(), run.node) == t.prefer_on.end()) {
              t.prefer_on.push_back(run.node);
            }
          }
        }
      }
      return plan;
    }
    absl::StrAppend(&reason, "; calibration ", calibration->outcome(), ": ", calibration->reason());
  }
  const crest::v1::CalibrationReport* verdict = calibration ? &*calibration : nullptr;
  if (chosen && model.fleet() &&
      PlanConfirmations(model.name(), trials,
                        FinalConfigOf(spec, *chosen, verdict, trials, model.name()).parameters,
                        fleet_nodes, free_nodes, max_attempts, &plan, &reason)) {
    return plan;
  }
  if (chosen && spec.has_rate_search()) {
    return PlanRateSearch(spec, model, trials, *chosen, verdict, free_nodes, std::move(reason),
                          plan);
  }
  plan.done_reason = std::move(reason);
  plan.finished = true;
  return plan;
}

std::vector<std::string> FreeEligibleNodes(const crest::v1::ModelSpec& model,
                                           const std::vector<crest::v1::AgentInfo>& agents,
                                           const std::function<bool(const std::string&)>& busy) {
  std::vector<const crest::v1::AgentInfo*> nodes;
  auto usable = [&](const crest::v1::AgentInfo& a) {
    return a.state() == crest::v1::AGENT_READY && Matches(model, a);
  };
  if (!model.nodes().empty()) {
    for (const auto& name : model.nodes()) {
      for (const auto& a : agents) {
        if (a.node_name() == name && usable(a)) nodes.push_back(&a);
      }
    }
  } else {
    for (const auto& a : agents) {
      if (usable(a)) nodes.push_back(&a);
    }
  }
  // Every node's first slot before any node's second: a round spreads over
  // the nodes first, where its points do not share a host.
  std::vector<std::string> out;
  uint32_t most = 0;
  for (const auto* a : nodes) most = std::max(most, SlotsOf(a->slots()));
  for (uint32_t slot = 0; slot < most; ++slot) {
    for (const auto* a : nodes) {
      if (slot >= SlotsOf(a->slots())) continue;
      std::string node_slot = NodeSlotKey(a->node_name(), slot);
      if (!busy(node_slot)) out.push_back(std::move(node_slot));
    }
  }
  return out;
}

size_t EligibleNodeSlots(const crest::v1::ModelSpec& model,
                         const std::vector<crest::v1::AgentInfo>& agents) {
  const std::vector<std::string> node_slots =
      FreeEligibleNodes(model, agents, [](const std::string&) { return false; });
  if (!model.exclusive()) return node_slots.size();
  std::set<std::string> nodes;
  for (const auto& p : node_slots) nodes.insert(ParseNodeSlot(p).node);
  return nodes.size();
}

absl::Status CheckAgentLimits(const crest::v1::CampaignSpec& spec,
                              const std::vector<crest::v1::AgentInfo>& agents) {
  std::vector<SpecProblem> problems;
  for (int i = 0; i < spec.models_size(); ++i) {
    std::vector<crest::v1::AgentInfo> eligible;
    for (const auto& a : agents) {
      if (Matches(spec.models(i), a)) eligible.push_back(a);
    }
    for (auto& p : CheckAgainstAgentLimits(spec, i, eligible)) problems.push_back(std::move(p));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(FormatProblems(problems));
}

std::optional<size_t> PickNodeSlot(const std::vector<std::string>& free_node_slots,
                                   std::vector<bool>& taken,
                                   const std::vector<std::string>& measured_on,
                                   const std::vector<std::string>& prefer_on,
                                   absl::FunctionRef<bool(const std::string& node)> accepts) {
  auto listed = [](const std::vector<std::string>& nodes, const std::string& node) {
    return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < free_node_slots.size(); ++i) {
      if (taken[i]) continue;
      const std::string node = ParseNodeSlot(free_node_slots[i]).node;
      const bool preferred =
          !listed(measured_on, node) && (prefer_on.empty() || listed(prefer_on, node));
      if ((pass == 0 && !preferred) || !accepts(node)) continue;
      taken[i] = true;
      return i;
    }
  }
  return std::nullopt;
}

std::vector<std::string> AssignNodes(const crest::v1::CampaignSpec& spec,
                                     const std::vector<PlannedTrial>& trials,
                                     const std::vector<std::string>& free_nodes,
                                     const std::vector<crest::v1::AgentInfo>& agents) {
  std::vector<std::string> out;
  std::vector<bool> taken(free_nodes.size(), false);
  for (const PlannedTrial& t : trials) {
    auto accepts = [&](const std::string& node) {
      if (!t.only_on.empty() &&
          std::find(t.only_on.begin(), t.only_on.end(), node) == t.only_on.end()) {
        return false;
      }
      return std::any_of(agents.begin(), agents.end(), [&](const crest::v1::AgentInfo& a) {
        return a.node_name() == node && RefusalAt(a, spec, t.parameters.max_batch_size()).empty();
      });
    };
    const std::optional<size_t> node_slot =
        PickNodeSlot(free_nodes, taken, t.measured_on, t.prefer_on, accepts);
    out.push_back(node_slot ? free_nodes[*node_slot] : std::string());
  }
  return out;
}

}  // namespace crest::controller
