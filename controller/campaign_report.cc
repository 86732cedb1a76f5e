#include "controller/campaign_report.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/trial_kind.h"
#include "controller/search/fleet.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/rate_search.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

namespace {

// The calibration and the rate search of `model`, once its search has an answer.
void AddAfterSearch(const StoredCampaign& stored, const crest::v1::ModelSpec& model_spec,
                    crest::v1::ModelReport* out) {
  const auto& spec = stored.campaign.spec();
  const std::string& model = model_spec.name();
  if (!spec.calibrate() && !spec.has_rate_search() && !model_spec.fleet()) return;
  std::optional<ChosenPoint> chosen =
      ChosenPointOf(spec, model, ModelStateOf(stored, model), stored.trials);
  if (!chosen) return;
  std::optional<crest::v1::CalibrationReport> calibration;
  if (spec.calibrate()) {
    calibration = EvaluateCalibration(spec, model, stored.trials, *chosen);
    *out->mutable_calibration() = *calibration;
  }
  if (calibration && calibration->outcome() == "pending") return;
  const FinalConfig config =
      FinalConfigOf(spec, *chosen, calibration ? &*calibration : nullptr, stored.trials, model);
  if (model_spec.fleet()) {
    // The search's nodes first (they measured the final configuration).
    std::vector<FleetNodeRuns> nodes = FleetNodes(stored.trials, model, config.parameters, {});
    std::stable_partition(nodes.begin(), nodes.end(),
                          [](const FleetNodeRuns& n) { return n.searched; });
    for (const FleetNodeRuns& n : nodes) {
      auto* f = out->add_fleet();
      f->set_node(n.node);
      f->set_generate_speed(n.generate_speed);
      f->set_runs(n.runs);
      f->set_ratio(config.generate_speed > 0 ? n.generate_speed / config.generate_speed : 0);
      f->set_searched(n.searched);
      if (n.runs == 0) f->set_reason(n.reason);
    }
  }
  if (!spec.has_rate_search()) return;
  *out->mutable_rate_search() =
      EvaluateRateSearch(spec, model, stored.trials, config, chosen->noise, nullptr);
}

// The nodes the search could compare for `model`, with the factors it used
// (the spec's noise prior, as the planner: schedule_plan.cc).
void AddNodeSpeeds(const StoredCampaign& stored, const std::string& model,
                   crest::v1::ModelReport* out) {
  const auto& spec = stored.campaign.spec();
  auto ms = stored.models.find(model);
  const int64_t blocks = ms == stored.models.end() ? 0 : ms->second.npu_block_num;
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  const auto factors =
      NodeFactorsOf(RepeatOutcomes(stored.trials, model, /*calibration=*/false, max_attempts),
                    SearchSpaceFor(spec, blocks).noise_prior);
  for (const auto& [node, f] : factors) {
    if (f.shared_runs == 0) continue;
    auto* speed = out->add_node_speeds();
    speed->set_node(node);
    speed->set_factor(f.factor);
    speed->set_shared_runs(static_cast<uint32_t>(f.shared_runs));
  }
}

// The distinct trust flags on the ok search runs of `model`, sorted.
std::set<std::string> FlagsOf(const std::vector<crest::v1::Trial>& trials,
                              const std::string& model) {
  std::set<std::string> flags;
  for (const auto& t : trials) {
    if (t.model() == model && IsSearchRun(t) && t.status() == crest::v1::TRIAL_OK) {
      flags.insert(t.flags().begin(), t.flags().end());
    }
  }
  return flags;
}

}  // namespace

crest::v1::CampaignReport BuildReport(const StoredCampaign& stored) {
  crest::v1::CampaignReport report;
  report.set_id(stored.campaign.id());
  report.set_name(stored.campaign.spec().name());
  report.set_state(stored.campaign.state());
  *report.mutable_warnings() = stored.campaign.warnings();
  for (const auto& m : stored.campaign.spec().models()) {
    auto* mr = report.add_models();
    mr->set_model(m.name());
    if (auto best = ChosenBest(stored, m.name())) {
      *mr->mutable_best() = *best;
      if (best->untrusted()) {
        report.add_warnings(absl::StrCat(
            m.name(), ": every run was flagged (",
            absl::StrJoin(FlagsOf(stored.trials, m.name()), ", "),
            "), so no maxBatchSize is recommended; the best shown is the fastest flagged point, "
            "measured while the client or the counts could not be trusted (docs/search.md)"));
      }
    }
    mr->set_rounds(Rounds(stored.trials, m.name()));
    const ModelState ms = ModelStateOf(stored, m.name());
    mr->set_strategy(ModelStrategy(stored.campaign.spec().search().strategy(), ms)->Name());
    if (!ms.prior_note.empty()) report.add_warnings(absl::StrCat(m.name(), ": ", ms.prior_note));
    if (!ms.prior_curve.empty()) {
      for (const auto& [b, speed] : ms.prior_curve) {
        auto* p = mr->add_predicted();
        p->set_max_batch_size(b);
        p->set_generate_speed(speed);
      }
      mr->set_predicted_source(ms.prior_source);
    }
    for (const auto& t : stored.trials) {
      if (t.model() == m.name()) *mr->add_trials() = t;
    }
    AddNodeSpeeds(stored, m.name(), mr);
    AddAfterSearch(stored, m, mr);
  }
  return report;
}

void SetCampaignEnd(const StoredCampaign& stored, const std::vector<std::string>& unrestored,
                    crest::v1::Campaign* c) {
  std::vector<std::string> unsolved;
  for (const auto& m : c->spec().models()) {
    if (!BestOf(stored.trials, m.name())) {
      auto ms = stored.models.find(m.name());
      unsolved.push_back(absl::StrCat(
          m.name(), " (", ms == stored.models.end() ? "" : ms->second.done_reason, ")"));
    }
  }
  if (c->cancel_requested()) {
    c->set_state(crest::v1::CAMPAIGN_CANCELLED);
  } else if (unsolved.empty()) {
    c->set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  } else {
    c->set_state(crest::v1::CAMPAIGN_FAILED);
    c->set_reason(absl::StrCat("no ok trial for ", absl::StrJoin(unsolved, ", ")));
  }
  if (!unrestored.empty()) {
    c->set_reason(
        absl::StrCat(c->reason(), c->reason().empty() ? "" : "; ", "host settings not restored on ",
                     absl::StrJoin(unrestored, ", "),
                     " (restored when heard from again, or at the next controller start)"));
  }
}

}  // namespace crest::controller
