#include "controller/after_search.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "controller/kv_blocks.h"
#include "controller/report.h"
#include "controller/spec_limits.h"
#include "controller/trial_outcomes.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;

// The rate search's automatic start, as a share of the QPS measured at the
// chosen configuration (which saturates the batch): low enough that the
// first steps still rise.
constexpr double kAutoStartShare = 0.7;

bool OkTrusted(const Trial& t) { return t.status() == crest::v1::TRIAL_OK && t.flags_size() == 0; }

// A fall beyond `band` (relative) from `before` to `after`.
bool FellBeyond(double before, double after, double band) { return after < before * (1 - band); }

}  // namespace

std::optional<ChosenPoint> ChosenPointOf(const crest::v1::CampaignSpec& spec,
                                         const std::string& model, int64_t npu_block_num,
                                         const std::vector<Trial>& trials) {
  auto strategy = MakeStrategy(spec.search().strategy());
  if (!strategy.ok()) return std::nullopt;
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  const SearchSpace space = SearchSpaceFor(spec, npu_block_num);
  const auto slots = Slots(trials, model, false, max_attempts);
  // The factors the search compared its points with are also reported.
  std::map<std::string, NodeFactor> factors = NodeFactorsOf(slots, space.noise_prior);
  const auto finished =
      FinishedPoints(slots, std::max<uint32_t>(1, spec.search().repeats()), factors,
                     SearchMakeups(slots, space.max_points, spec.limits().max_retries()));
  std::optional<SearchAnswer> answer = (*strategy)->Best(space, finished);
  if (!answer) return std::nullopt;
  ChosenPoint chosen;
  chosen.answer = *answer;
  chosen.noise = answer->noise.value_or(space.noise_prior);
  chosen.node_factors = std::move(factors);
  int n = 0;
  double speed = 0;
  for (const auto& t : trials) {
    if (t.model() != model || t.calibration() || t.rate_search() || !OkTrusted(t) ||
        t.parameters().max_batch_size() != answer->point) {
      continue;
    }
    chosen.first_token_ms += t.result().first_token_time().average_ms();
    chosen.decode_ms += t.result().decode_time().average_ms();
    chosen.qps += t.result().qps();
    chosen.speed_per_client += t.result().generate_speed_per_client();
    speed += t.result().generate_speed();
    chosen.runs.push_back({answer->point, t.node(), t.result().generate_speed()});
    ++n;
  }
  if (n > 0) {
    // The search compared its points across nodes (node_effects.h); what is
    // reported, and what calibration is compared with, is what was measured.
    chosen.answer.objective = speed / n;
    chosen.first_token_ms /= n;
    chosen.decode_ms /= n;
    chosen.qps /= n;
    chosen.speed_per_client /= n;
  }
  return chosen;
}

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
                                        const std::map<SlotKey, Slot>& slots, int64_t point) {
  return WalkRepeats(
      slots, point,
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
  auto slots = Slots(trials, model, /*calibration=*/true, max_attempts);
  const WalkedRepeats repeats = CountedCalibrationRepeats(spec, slots, point);
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
    if (t.model() != model || !t.calibration() || !OkTrusted(t) ||
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

crest::v1::RateSearchReport EvaluateRateSearch(const crest::v1::CampaignSpec& spec,
                                               const std::string& model,
                                               const std::vector<Trial>& trials,
                                               const FinalConfig& config, double noise,
                                               std::optional<RateRun>* next) {
  const crest::v1::RateSearchSpec& rs = spec.rate_search();
  crest::v1::RateSearchReport r;
  r.set_max_batch_size(config.parameters.max_batch_size());
  r.set_concurrency(rs.concurrency());
  const double band = NoiseBand(noise, 1, 1);
  r.set_band(band);
  if (next != nullptr) next->reset();
  const double start = rs.start() > 0 ? rs.start() : kAutoStartShare * config.qps;
  if (start <= 0) {
    r.set_done(true);
    r.set_reason(
        "no QPS was measured at the chosen configuration to start from: set rate_search.start");
    return r;
  }
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  auto finish = [&](const std::string& reason) {
    r.set_done(true);
    r.set_reason(reason);
    // The highest rate that still rose; the first when none after it did.
    for (const auto& p : r.points()) {
      if (p.status() != "ok") continue;
      if (p.rises() || r.best_rate() == 0) {
        r.set_best_rate(p.request_rate());
        r.set_best_generate_speed(p.generate_speed());
      }
    }
  };
  double rate = start;
  double previous = 0;
  for (uint32_t i = 0; i < rs.max_runs(); ++i, rate *= rs.factor()) {
    // This rate's attempts, in order: interrupted and flagged runs are made
    // up by the next attempt, up to max_attempts; the first run that failed
    // or was trusted is the rate's figure.
    const Trial* counted = nullptr;
    const Trial* last_flagged = nullptr;
    int attempts = 0;
    int flagged = 0;
    std::vector<std::string> flags;
    bool running = false;
    for (const auto& t : trials) {
      if (t.model() != model || !t.rate_search() || t.repeat() != i) continue;
      ++attempts;
      if (!IsFinal(t.status())) {
        running = true;
      } else if (t.status() == crest::v1::TRIAL_OK && t.flags_size() > 0) {
        ++flagged;
        last_flagged = &t;
        for (const auto& f : t.flags()) {
          if (std::find(flags.begin(), flags.end(), f) == flags.end()) flags.push_back(f);
        }
      } else if (t.status() != crest::v1::TRIAL_INTERRUPTED && counted == nullptr) {
        counted = &t;
      }
    }
    auto add_point = [&](const Trial& t) {
      crest::v1::RatePoint* p = r.add_points();
      p->set_request_rate(t.parameters().request_rate());
      p->set_status(TrialStatusName(t.status()));
      p->set_trial(t.id());
      p->set_daemon_pid(t.result().daemon_pid());
      p->set_flagged_runs(static_cast<uint32_t>(flagged));
      for (const auto& f : flags) p->add_flags(f);
      return p;
    };
    if (counted == nullptr) {
      if (running) return r;
      if (attempts >= max_attempts) {
        if (flagged == 0) {
          finish(absl::StrFormat("the run at %.4g requests/s was interrupted %d times", rate,
                                 attempts));
          return r;
        }
        crest::v1::RatePoint* p = add_point(*last_flagged);
        p->set_status("flagged");
        p->set_generate_speed(last_flagged->result().generate_speed());
        p->set_qps(last_flagged->result().qps());
        const std::string flag_names = absl::StrJoin(flags, ", ");
        finish(flagged == attempts
                   ? absl::StrFormat("every run at %.4g requests/s was flagged (%s), %d runs: its "
                                     "throughput is not the server's",
                                     rate, flag_names, attempts)
                   : absl::StrFormat("no run at %.4g requests/s was trusted: %d flagged (%s), "
                                     "%d interrupted",
                                     rate, flagged, flag_names, attempts - flagged));
        return r;
      }
      if (next != nullptr) {
        RateRun run;
        run.index = i;
        run.attempt = static_cast<uint32_t>(attempts + 1);
        run.parameters = config.parameters;
        run.parameters.set_concurrency(rs.concurrency());
        run.parameters.set_request_rate(rate);
        *next = run;
      }
      return r;
    }
    crest::v1::RatePoint* p = add_point(*counted);
    if (counted->status() != crest::v1::TRIAL_OK) {
      finish(absl::StrFormat("the run at %.4g requests/s ended %s (%s)", rate, p->status(),
                             counted->reason()));
      return r;
    }
    const double speed = counted->result().generate_speed();
    p->set_generate_speed(speed);
    p->set_qps(counted->result().qps());
    if (i > 0) {
      p->set_rises(speed > previous * (1 + band));
      if (!p->rises()) {
        finish(absl::StrFormat(
            "throughput stopped rising at %.4g requests/s (%.1f -> %.1f tokens/s, within the "
            "noise band of %.1f%%)",
            rate, previous, speed, 100 * band));
        return r;
      }
    }
    previous = speed;
  }
  finish(absl::StrCat("max_runs (", rs.max_runs(), ") measured; throughput still rose"));
  return r;
}

bool SameServerConfig(const crest::v1::TrialParameters& a, const crest::v1::TrialParameters& b) {
  return a.max_batch_size() == b.max_batch_size() &&
         a.max_prefill_batch_size() == b.max_prefill_batch_size() &&
         a.support_select_batch() == b.support_select_batch() &&
         a.prefill_time_ms_per_req() == b.prefill_time_ms_per_req() &&
         a.decode_time_ms_per_req() == b.decode_time_ms_per_req();
}

}  // namespace crest::controller
