#include "controller/search/calibration.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/report.h"
#include "controller/campaign_io/spec_limits.h"
#include "controller/search/kv_blocks.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;

// A fall beyond `band` (relative) from `before` to `after`.
bool FellBeyond(double before, double after, double band) { return after < before * (1 - band); }

}  // namespace

crest::v1::TrialParameters CalibrationParameters(const crest::v1::CampaignSpec& spec,
                                                 const ChosenPoint& chosen) {
  crest::v1::TrialParameters p = SearchParametersAt(spec, chosen.answer.point);
  p.set_support_select_batch(true);
  p.set_prefill_time_ms_per_req(SelectBatchTimeMs(chosen.first_token_ms));
  p.set_decode_time_ms_per_req(SelectBatchTimeMs(chosen.decode_ms));
  return p;
}

uint32_t CalibrationRuns(const crest::v1::CampaignSpec& spec) {
  return std::max<uint32_t>(1, spec.search().repeats());
}

uint32_t CalibrationRunsAtMost(const crest::v1::CampaignSpec& spec) {
  return CalibrationRuns(spec) + spec.limits().max_retries();
}

WalkedRepeats CountedCalibrationRepeats(const crest::v1::CampaignSpec& spec,
                                        const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                        int64_t point) {
  return WalkRepeats(
      outcomes, point,
      {.runs = CalibrationRuns(spec), .base_runs = 0, .max_repeats = CalibrationRunsAtMost(spec)});
}

crest::v1::CalibrationReport EvaluateCalibration(const crest::v1::CampaignSpec& spec,
                                                 const std::string& model,
                                                 const std::vector<Trial>& trials,
                                                 const ChosenPoint& chosen) {
  crest::v1::CalibrationReport r;
  const int64_t point = chosen.answer.point;
  r.set_max_batch_size(point);
  r.set_generate_speed_before(chosen.answer.objective);
  r.set_runs_before(static_cast<uint32_t>(chosen.answer.runs));
  if (spec.client().task_kind() == crest::v1::TASK_KIND_TEXT) {
    r.set_outcome("skipped");
    r.set_reason(
        "client.task_kind text measures no first-token or decode latency (one reply per "
        "request): calibration skipped");
    return r;
  }
  if (chosen.first_token_ms <= 0 || chosen.decode_ms <= 0) {
    r.set_outcome("skipped");
    r.set_reason(absl::StrCat("no first-token or decode latency was measured at maxBatchSize ",
                              point, ": calibration skipped"));
    return r;
  }
  const crest::v1::TrialParameters p = CalibrationParameters(spec, chosen);
  r.set_prefill_time_ms_per_req(p.prefill_time_ms_per_req());
  r.set_decode_time_ms_per_req(p.decode_time_ms_per_req());
  const uint32_t runs = CalibrationRuns(spec);
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  auto outcomes = RepeatOutcomes(trials, model, /*calibration=*/true, max_attempts);
  const WalkedRepeats repeats = CountedCalibrationRepeats(spec, outcomes, point);
  const uint32_t flagged = repeats.passed_over;
  std::vector<NodeRun> after;
  for (const auto& [rep, s] : repeats.counted) {
    if (s.infeasible || s.failed) {
      r.set_outcome("dropped");
      r.set_reason(absl::StrCat("the calibrated run at maxBatchSize ", point, " did not finish (",
                                s.reason, "): supportSelectBatch stays off"));
      return r;
    }
    if (!s.ok) {
      r.set_outcome("pending");
      r.set_reason(absl::StrCat(
          after.size(), " of ", runs, " calibrated runs measured",
          flagged > 0 ? absl::StrCat(" (", flagged, " flagged, made up)") : std::string()));
      return r;
    }
    after.push_back({point, s.node, s.speed});
  }
  if (after.empty()) {
    r.set_outcome("dropped");
    r.set_reason(absl::StrCat("every calibrated run was flagged (", flagged,
                              " runs; docs/search.md): supportSelectBatch stays off"));
    return r;
  }
  // What was measured, and the same runs each divided by its node's factor:
  // the verdict compares the latter, as if every run had been on one node.
  // The two differ only when the runs' nodes do.
  std::set<double> factors;
  auto means = [&](const std::vector<NodeRun>& runs) {
    std::pair<double, double> m{0, 0};  // measured, within a node
    for (const NodeRun& run : runs) {
      const double f = FactorOf(chosen.node_factors, run.node);
      factors.insert(f);
      m.first += run.speed;
      m.second += run.speed / f;
    }
    m.first /= static_cast<double>(runs.size());
    m.second /= static_cast<double>(runs.size());
    return m;
  };
  const auto [before_measured, before] =
      chosen.runs.empty() ? std::pair{chosen.answer.objective, chosen.answer.objective}
                          : means(chosen.runs);
  const auto [mean, after_within] = means(after);
  r.set_generate_speed_after(mean);
  r.set_runs_after(static_cast<uint32_t>(after.size()));
  const double band = NoiseBand(chosen.noise, chosen.answer.runs, after.size());
  r.set_band(band);
  const double change = before > 0 ? after_within / before - 1 : 0;
  r.set_change(change);
  std::string figures =
      factors.size() > 1
          ? absl::StrFormat(
                "%.1f -> %.1f tokens/s as measured, on nodes whose speeds differ: compared "
                "with each run divided by its node's speed",
                before_measured, mean)
          : absl::StrFormat("%.1f -> %.1f tokens/s", before_measured, mean);
  if (flagged > 0) {
    absl::StrAppend(&figures, "; ", flagged, " flagged calibrated run", flagged > 1 ? "s" : "",
                    " not counted");
  }
  if (FellBeyond(before, after_within, band)) {
    r.set_outcome("dropped");
    r.set_reason(absl::StrFormat(
        "throughput fell %.1f%% with supportSelectBatch (%s), beyond the noise band of %.1f%%: "
        "supportSelectBatch stays off",
        -100 * change, figures, 100 * band));
  } else {
    r.set_outcome("kept");
    r.set_reason(absl::StrFormat(
        "throughput %s %.1f%% with supportSelectBatch (%s; noise band %.1f%%)",
        change >= 0 ? "rose" : "fell only", 100 * std::abs(change), figures, 100 * band));
  }
  return r;
}

FinalConfig FinalConfigOf(const crest::v1::CampaignSpec& spec, const ChosenPoint& chosen,
                          const crest::v1::CalibrationReport* calibration,
                          const std::vector<Trial>& trials, const std::string& model) {
  FinalConfig f;
  f.calibrated = calibration != nullptr && calibration->outcome() == "kept";
  if (!f.calibrated) {
    f.parameters = SearchParametersAt(spec, chosen.answer.point);
    f.generate_speed = chosen.answer.objective;
    f.generate_speed_per_client = chosen.speed_per_client;
    f.qps = chosen.qps;
    f.runs = static_cast<uint32_t>(chosen.answer.runs);
    return f;
  }
  f.parameters = CalibrationParameters(spec, chosen);
  f.generate_speed = calibration->generate_speed_after();
  f.runs = calibration->runs_after();
  int n = 0;
  for (const auto& t : trials) {
    if (t.model() != model || !t.calibration() || !OkAndTrusted(t) ||
        t.parameters().max_batch_size() != chosen.answer.point) {
      continue;
    }
    f.generate_speed_per_client += t.result().generate_speed_per_client();
    f.qps += t.result().qps();
    ++n;
  }
  if (n > 0) {
    f.generate_speed_per_client /= n;
    f.qps /= n;
  }
  return f;
}

}  // namespace crest::controller
