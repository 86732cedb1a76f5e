#include "controller/campaign_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/search/kv_blocks.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {
namespace {

// "measuring 500 on a (120/1000 requests)" for the job running `trial_id`.
void AddTrialActivity(const StoredCampaign& stored, const RunningJob& job,
                      const std::map<std::string, crest::v1::BenchmarkProgress>& progress,
                      crest::v1::ModelProgress* mp, std::vector<std::string>* activity) {
  for (const auto& t : stored.trials) {
    if (t.id() != job.trial_id) continue;
    if (mp->current_point() == 0) mp->set_current_point(t.parameters().max_batch_size());
    std::string what = absl::StrCat(t.calibration()    ? "calibrating at "
                                    : t.confirmation() ? "confirming "
                                                       : "measuring ",
                                    t.parameters().max_batch_size(), " on ", job.node);
    if (t.rate_search()) {
      what = absl::StrCat("rate search at ", t.parameters().max_batch_size(), ": ",
                          absl::SixDigits(t.parameters().request_rate()), " requests/s on ",
                          job.node, " (same daemon)");
    }
    auto pr = progress.find(t.id());
    if (pr != progress.end() && pr->second.requests_total() > 0) {
      absl::StrAppend(&what, " (", pr->second.requests_done(), "/", pr->second.requests_total(),
                      " requests)");
    }
    activity->push_back(what);
  }
}

}  // namespace

crest::v1::Campaign CampaignView(
    const StoredCampaign& stored, const std::vector<RunningJob>& jobs,
    const std::map<std::string, crest::v1::BenchmarkProgress>& progress, absl::string_view halted) {
  crest::v1::Campaign c = stored.campaign;
  const auto& spec = c.spec();
  for (const auto& m : spec.models()) {
    auto* mp = c.add_models();
    mp->set_model(m.name());
    const ModelState ms = ModelStateOf(stored, m.name());
    uint32_t done = 0;
    uint32_t failed = 0;
    uint32_t interrupted = 0;
    for (const auto& t : stored.trials) {
      if (t.model() != m.name() || !IsFinal(t.status())) continue;
      ++done;
      if (t.status() != crest::v1::TRIAL_OK) ++failed;
      if (t.status() == crest::v1::TRIAL_INTERRUPTED) ++interrupted;
    }
    mp->set_trials_done(done);
    mp->set_trials_failed(failed);
    if (auto best = ChosenBest(stored, m.name())) *mp->mutable_best() = *best;
    mp->set_npu_block_num(ms.npu_block_num);
    mp->set_prior_peak(ms.prior_peak);
    if (!ms.prior_profile.empty()) mp->set_prior_source(ms.prior_source);
    mp->set_done(ms.done);
    bool known = !NeedsBlockNum(spec.search()) || ms.npu_block_num > 0;
    if (known) {
      SearchSpace space = SearchSpaceFor(spec, ms.npu_block_num);
      mp->set_range_lo(space.lo);
      mp->set_range_hi(space.hi);
      uint32_t planned =
          static_cast<uint32_t>(ModelStrategy(spec.search().strategy(), ms)->PlannedPoints(space)) *
              spec.search().repeats() +
          (spec.calibrate() ? std::max<uint32_t>(1, spec.search().repeats()) : 0) +
          (spec.has_rate_search() ? spec.rate_search().max_runs() : 0) + interrupted;
      mp->set_trials_planned(ms.done ? done : std::max(planned, done));
    }
    std::vector<std::string> activity;
    for (const auto& job : jobs) {
      if (job.model != m.name()) continue;
      if (job.trial_id.empty()) {
        activity.push_back(absl::StrCat("probing npuBlockNum on ", job.node));
        continue;
      }
      AddTrialActivity(stored, job, progress, mp, &activity);
    }
    if (ms.done) {
      mp->set_activity(ms.done_reason);
    } else if (!halted.empty() && !IsFinal(c.state())) {
      mp->set_activity(absl::StrCat("halted: ", halted));
    } else if (!activity.empty()) {
      mp->set_activity(absl::StrJoin(activity, "; "));
    } else if (!IsFinal(c.state())) {
      mp->set_activity("waiting for a ready eligible node");
    }
  }
  return c;
}

}  // namespace crest::controller
