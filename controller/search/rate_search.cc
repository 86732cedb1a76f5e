#include "controller/search/rate_search.h"

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

// The rate search's automatic start, as a share of the QPS measured at the
// chosen configuration (which saturates the batch): low enough that the
// first steps still rise.
constexpr double kAutoStartShare = 0.7;

// One rate's attempts, in order: interrupted and flagged runs are made up by
// the next attempt, up to max_attempts; the first run that failed or was
// trusted is the rate's figure (`counted`).
struct RateAttempts {
  const Trial* counted = nullptr;
  const Trial* last_flagged = nullptr;
  int attempts = 0;
  int flagged = 0;
  std::vector<std::string> flags;  // the flagged runs' flags, each once
  bool running = false;
};

RateAttempts AttemptsAt(const std::vector<Trial>& trials, const std::string& model,
                        uint32_t index) {
  RateAttempts a;
  for (const auto& t : trials) {
    if (t.model() != model || !t.rate_search() || t.repeat() != index) continue;
    ++a.attempts;
    if (!IsFinal(t.status())) {
      a.running = true;
    } else if (t.status() == crest::v1::TRIAL_OK && t.flags_size() > 0) {
      ++a.flagged;
      a.last_flagged = &t;
      for (const auto& f : t.flags()) {
        if (std::find(a.flags.begin(), a.flags.end(), f) == a.flags.end()) a.flags.push_back(f);
      }
    } else if (t.status() != crest::v1::TRIAL_INTERRUPTED && a.counted == nullptr) {
      a.counted = &t;
    }
  }
  return a;
}

crest::v1::RatePoint* AddPoint(const Trial& t, const RateAttempts& a,
                               crest::v1::RateSearchReport& r) {
  crest::v1::RatePoint* p = r.add_points();
  p->set_request_rate(t.parameters().request_rate());
  p->set_status(TrialStatusName(t.status()));
  p->set_trial(t.id());
  p->set_daemon_pid(t.result().daemon_pid());
  p->set_flagged_runs(static_cast<uint32_t>(a.flagged));
  for (const auto& f : a.flags) p->add_flags(f);
  return p;
}

void Finish(const std::string& reason, crest::v1::RateSearchReport& r) {
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
}

// Every attempt at `rate` was interrupted or flagged: the search ends there,
// the last flagged run's figures shown as a flagged point.
void FinishUntrusted(const RateAttempts& a, double rate, crest::v1::RateSearchReport& r) {
  if (a.flagged == 0) {
    Finish(absl::StrFormat("the run at %.4g requests/s was interrupted %d times", rate, a.attempts),
           r);
    return;
  }
  crest::v1::RatePoint* p = AddPoint(*a.last_flagged, a, r);
  p->set_status("flagged");
  p->set_generate_speed(a.last_flagged->result().generate_speed());
  p->set_qps(a.last_flagged->result().qps());
  const std::string flag_names = absl::StrJoin(a.flags, ", ");
  Finish(a.flagged == a.attempts
             ? absl::StrFormat("every run at %.4g requests/s was flagged (%s), %d runs: its "
                               "throughput is not the server's",
                               rate, flag_names, a.attempts)
             : absl::StrFormat("no run at %.4g requests/s was trusted: %d flagged (%s), "
                               "%d interrupted",
                               rate, a.flagged, flag_names, a.attempts - a.flagged),
         r);
}

}  // namespace

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
  double rate = start;
  double previous = 0;
  for (uint32_t i = 0; i < rs.max_runs(); ++i, rate *= rs.factor()) {
    const RateAttempts a = AttemptsAt(trials, model, i);
    if (a.counted == nullptr) {
      if (a.running) return r;
      if (a.attempts >= max_attempts) {
        FinishUntrusted(a, rate, r);
        return r;
      }
      if (next != nullptr) {
        RateRun run;
        run.index = i;
        run.attempt = static_cast<uint32_t>(a.attempts + 1);
        run.parameters = config.parameters;
        run.parameters.set_concurrency(rs.concurrency());
        run.parameters.set_request_rate(rate);
        *next = run;
      }
      return r;
    }
    crest::v1::RatePoint* p = AddPoint(*a.counted, a, r);
    if (a.counted->status() != crest::v1::TRIAL_OK) {
      Finish(absl::StrFormat("the run at %.4g requests/s ended %s (%s)", rate, p->status(),
                             a.counted->reason()),
             r);
      return r;
    }
    const double speed = a.counted->result().generate_speed();
    p->set_generate_speed(speed);
    p->set_qps(a.counted->result().qps());
    if (i > 0) {
      p->set_rises(speed > previous * (1 + band));
      if (!p->rises()) {
        Finish(absl::StrFormat(
                   "throughput stopped rising at %.4g requests/s (%.1f -> %.1f tokens/s, within "
                   "the noise band of %.1f%%)",
                   rate, previous, speed, 100 * band),
               r);
        return r;
      }
    }
    previous = speed;
  }
  Finish(absl::StrCat("max_runs (", rs.max_runs(), ") measured; throughput still rose"), r);
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
