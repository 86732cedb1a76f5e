#include "controller/search/trial_outcomes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

#include "common/mindie_limits.h"
#include "controller/campaign_io/spec_limits.h"
#include "controller/campaign_io/trial_kind.h"
#include "controller/search/calibration.h"
#include "controller/search/kv_blocks.h"
#include "controller/store.h"

namespace crest::controller {

using crest::v1::Trial;

std::map<RepeatKey, RepeatOutcome> RepeatOutcomes(const std::vector<Trial>& trials,
                                                  const std::string& model, bool calibration,
                                                  int max_attempts) {
  std::map<RepeatKey, RepeatOutcome> outcomes;
  for (const auto& t : trials) {
    if (t.model() != model || t.calibration() != calibration || t.rate_search() ||
        t.confirmation()) {
      continue;
    }
    RepeatOutcome& s = outcomes[{t.parameters().max_batch_size(), t.repeat()}];
    ++s.attempts;
    switch (t.status()) {
      case crest::v1::TRIAL_OK:
        s.ok = true;
        s.speed = t.result().generate_speed();
        s.untrusted = t.flags_size() > 0;
        s.neighbours = t.neighbours();
        s.node = t.node();
        if (t.result().daemon().has_preemptions()) {
          s.preemptions = static_cast<int64_t>(t.result().daemon().preemptions());
        } else {
          s.preemptions.reset();
        }
        break;
      case crest::v1::TRIAL_RUNNING:
      case crest::v1::TRIAL_PENDING:
        s.running = true;
        break;
      case crest::v1::TRIAL_INFEASIBLE:
        s.infeasible = true;
        s.reason = t.reason();
        break;
      case crest::v1::TRIAL_FAILED:
      case crest::v1::TRIAL_CANCELLED:
        s.failed = true;
        s.reason = t.reason();
        break;
      default:  // interrupted: re-run while attempts remain
        s.reason = t.reason();
        break;
    }
  }
  for (auto& [key, s] : outcomes) {
    if (!s.ok && !s.running && !s.infeasible && !s.failed && s.attempts >= max_attempts) {
      s.failed = true;
      s.reason = absl::StrCat("interrupted ", s.attempts, " times (last: ", s.reason, ")");
    }
  }
  return outcomes;
}

std::map<std::string, NodeFactor> NodeFactorsOf(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                                double noise) {
  if (noise <= 0) return {};
  std::vector<NodeRun> runs;
  for (const auto& [key, s] : outcomes) {
    if (s.ok && !s.untrusted) runs.push_back({key.first, s.node, s.speed});
  }
  return NodeFactors(runs, noise);
}

WalkedRepeats WalkRepeats(const std::map<RepeatKey, RepeatOutcome>& outcomes, int64_t point,
                          const RepeatWalk& walk) {
  WalkedRepeats out;
  uint32_t made_up = 0;
  for (uint32_t r = 0;
       out.counted.size() < walk.runs && (walk.max_repeats == 0 || r < walk.max_repeats); ++r) {
    auto it = outcomes.find({point, r});
    const RepeatOutcome s = it == outcomes.end() ? RepeatOutcome{} : it->second;
    if (s.ok && s.untrusted) {
      const bool beyond_base = out.counted.size() >= walk.base_runs;
      if (beyond_base || made_up < walk.makeups) {
        if (!beyond_base) ++made_up;
        ++out.passed_over;
        continue;
      }
    }
    out.counted.emplace_back(r, s);
  }
  return out;
}

bool BaseRunsEnded(const std::map<RepeatKey, RepeatOutcome>& outcomes, int64_t point,
                   uint32_t repeats, uint32_t makeups) {
  const WalkedRepeats walked =
      WalkRepeats(outcomes, point, {.runs = repeats, .base_runs = repeats, .makeups = makeups});
  return std::all_of(walked.counted.begin(), walked.counted.end(), [](const auto& counted) {
    const RepeatOutcome& s = counted.second;
    return s.ok || s.infeasible || s.failed;
  });
}

uint32_t SearchMakeups(const std::map<RepeatKey, RepeatOutcome>& outcomes, uint32_t max_trials,
                       uint32_t max_retries) {
  uint32_t ended = 0;
  for (const auto& [key, s] : outcomes) ended += s.ok || s.infeasible || s.failed ? 1 : 0;
  return ended < max_trials ? max_retries : 0;
}

std::map<int64_t, PointOutcome> FinishedPoints(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                               uint32_t repeats, double node_noise,
                                               uint32_t makeups) {
  return FinishedPoints(outcomes, repeats, NodeFactorsOf(outcomes, node_noise), makeups);
}

std::map<int64_t, PointOutcome> FinishedPoints(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                               uint32_t repeats,
                                               const std::map<std::string, NodeFactor>& factors,
                                               uint32_t makeups) {
  std::map<int64_t, std::vector<const RepeatOutcome*>> by_point;
  for (const auto& [key, s] : outcomes) by_point[key.first].push_back(&s);
  std::map<int64_t, PointOutcome> out;
  for (const auto& [point, list] : by_point) {
    PointOutcome o;
    o.runs = 0;
    bool any_infeasible = false;
    bool any_failed = false;
    double all_sum = 0;
    size_t all_ok = 0;
    for (const RepeatOutcome* s : list) {
      const bool ended = s->ok || s->infeasible || s->failed;
      if (ended) ++o.runs;
      any_infeasible |= s->infeasible;
      any_failed |= s->failed;
      if ((s->infeasible || s->failed) && o.reason.empty()) o.reason = s->reason;
      if (!s->ok) continue;
      ++all_ok;
      all_sum += s->speed;
      if (!s->untrusted) {
        o.samples.push_back(s->speed / FactorOf(factors, s->node));
        if (s->neighbours > 0) ++o.beside_neighbours;
      }
      if (s->preemptions) o.preemptions = std::max(o.preemptions.value_or(0), *s->preemptions);
    }
    if (any_infeasible) {
      o.kind = PointOutcome::Kind::kInfeasible;
    } else if (any_failed) {
      o.kind = PointOutcome::Kind::kFailed;
    } else if (!BaseRunsEnded(outcomes, point, repeats, makeups)) {
      continue;  // unfinished
    } else if (!o.samples.empty()) {
      double sum = 0;
      for (double v : o.samples) sum += v;
      o.objective = sum / static_cast<double>(o.samples.size());
    } else {
      o.untrusted = true;
      o.objective = all_sum / static_cast<double>(std::max<size_t>(1, all_ok));
    }
    out[point] = o;
  }
  return out;
}

std::optional<crest::v1::BestConfig> BestOf(const std::vector<Trial>& trials,
                                            const std::string& model) {
  std::map<int64_t, std::vector<const Trial*>> by_point;
  for (const auto& t : trials) {
    if (t.model() == model && IsSearchRun(t) && t.status() == crest::v1::TRIAL_OK) {
      by_point[t.parameters().max_batch_size()].push_back(&t);
    }
  }
  std::optional<crest::v1::BestConfig> best;
  for (const auto& [point, list] : by_point) {
    double speed = 0;
    double per_client = 0;
    for (const Trial* t : list) {
      speed += t->result().generate_speed();
      per_client += t->result().generate_speed_per_client();
    }
    speed /= static_cast<double>(list.size());
    per_client /= static_cast<double>(list.size());
    if (!best || speed > best->generate_speed()) {
      best.emplace();
      *best->mutable_parameters() = list.front()->parameters();
      best->set_generate_speed(speed);
      best->set_generate_speed_per_client(per_client);
      const auto trusted = static_cast<uint32_t>(std::count_if(
          list.begin(), list.end(), [](const Trial* t) { return t->flags().empty(); }));
      best->set_runs(trusted);
      best->set_untrusted(trusted == 0);
    }
  }
  return best;
}

std::optional<crest::v1::BestConfig> ChosenBest(const StoredCampaign& stored,
                                                const std::string& model) {
  const auto& spec = stored.campaign.spec();
  std::optional<ChosenPoint> chosen =
      ChosenPointOf(spec, model, ModelStateOf(stored, model), stored.trials);
  // The strategy answers from trusted runs only; without one (every run
  // flagged, or none finished yet) the fastest point stands in, marked.
  if (!chosen) return BestOf(stored.trials, model);
  // The recommendation carries the calibration only when it was kept.
  std::optional<crest::v1::CalibrationReport> calibration;
  if (spec.calibrate()) calibration = EvaluateCalibration(spec, model, stored.trials, *chosen);
  const FinalConfig final_config =
      FinalConfigOf(spec, *chosen, calibration ? &*calibration : nullptr, stored.trials, model);
  crest::v1::BestConfig best;
  *best.mutable_parameters() = final_config.parameters;
  best.set_generate_speed(final_config.generate_speed);
  best.set_generate_speed_per_client(final_config.generate_speed_per_client);
  best.set_runs(final_config.runs);
  if (chosen->answer.noise) best.set_noise(*chosen->answer.noise);
  if (chosen->answer.confidence) best.set_confidence(*chosen->answer.confidence);
  best.set_basis(chosen->answer.basis);
  best.set_basis_reason(chosen->answer.basis_reason);
  return best;
}

uint32_t Rounds(const std::vector<Trial>& trials, const std::string& model) {
  std::vector<const Trial*> mine;
  for (const auto& t : trials) {
    if (t.model() == model && IsSearchRun(t)) mine.push_back(&t);
  }
  auto before = [](const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
    return a.seconds() < b.seconds() || (a.seconds() == b.seconds() && a.nanos() <= b.nanos());
  };
  std::stable_sort(mine.begin(), mine.end(), [](const Trial* a, const Trial* b) {
    return a->started().seconds() < b->started().seconds() ||
           (a->started().seconds() == b->started().seconds() &&
            a->started().nanos() < b->started().nanos());
  });
  std::vector<uint32_t> round(mine.size(), 0);
  uint32_t rounds = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    uint32_t r = 1;
    for (size_t j = 0; j < i; ++j) {
      if (IsFinal(mine[j]->status()) && before(mine[j]->finished(), mine[i]->started())) {
        r = std::max(r, round[j] + 1);
      }
    }
    round[i] = r;
    rounds = std::max(rounds, r);
  }
  return rounds;
}

// Under a max-throughput load the measured first-token time often exceeds a
// second because it includes queueing; it is capped rather than failing
// every later trial (the agent refuses times outside MindIE's range).
double SelectBatchTimeMs(double measured_ms) {
  return std::clamp(std::round(measured_ms), 1.0,
                    static_cast<double>(mindie::kSelectBatchTimeMs.max));
}

bool Matches(const crest::v1::ModelSpec& model, const crest::v1::AgentInfo& agent) {
  if (!model.nodes().empty()) {
    return std::find(model.nodes().begin(), model.nodes().end(), agent.node_name()) !=
           model.nodes().end();
  }
  for (const auto& [k, v] : model.selector()) {
    auto it = agent.labels().find(k);
    if (it == agent.labels().end() || it->second != v) return false;
  }
  return true;
}

std::vector<Trial> InterruptUnfinished(std::vector<Trial>* trials,
                                       const google::protobuf::Timestamp& now) {
  std::vector<Trial> interrupted;
  for (auto& t : *trials) {
    if (!IsFinal(t.status())) {
      t.set_status(crest::v1::TRIAL_INTERRUPTED);
      t.set_reason("controller restarted while the trial ran");
      *t.mutable_finished() = now;
      interrupted.push_back(t);
    }
  }
  return interrupted;
}

int64_t NextTrialNumber(const std::vector<Trial>& trials) {
  int64_t next = 1;
  for (const auto& t : trials) {
    next = std::max<int64_t>(next, std::stoll(t.id().substr(t.id().rfind('t') + 1)) + 1);
  }
  return next;
}

void NormalizeTimeScale(crest::v1::BenchmarkResult* r, double scale) {
  if (scale <= 0 || scale == 1) return;
  r->set_generate_speed(r->generate_speed() / scale);
  r->set_generate_speed_per_client(r->generate_speed_per_client() / scale);
  if (r->has_total_generate_speed()) r->set_total_generate_speed(r->total_generate_speed() / scale);
  if (r->has_input_generate_speed()) r->set_input_generate_speed(r->input_generate_speed() / scale);
  r->set_qps(r->qps() / scale);
  for (auto* stats :
       {r->mutable_first_token_time(), r->mutable_decode_time(), r->mutable_e2e_latency()}) {
    stats->set_average_ms(stats->average_ms() * scale);
    // A percentile the source lacks stays unset.
    if (stats->has_p50_ms()) stats->set_p50_ms(stats->p50_ms() * scale);
    if (stats->has_p75_ms()) stats->set_p75_ms(stats->p75_ms() * scale);
    if (stats->has_p90_ms()) stats->set_p90_ms(stats->p90_ms() * scale);
    if (stats->has_slo_p90_ms()) stats->set_slo_p90_ms(stats->slo_p90_ms() * scale);
    if (stats->has_p99_ms()) stats->set_p99_ms(stats->p99_ms() * scale);
    stats->set_max_ms(stats->max_ms() * scale);
    stats->set_min_ms(stats->min_ms() * scale);
  }
  auto nanos = static_cast<int64_t>(
      (static_cast<double>(r->duration().seconds()) * 1e9 + r->duration().nanos()) * scale);
  r->mutable_duration()->set_seconds(nanos / 1000000000);
  r->mutable_duration()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

}  // namespace crest::controller
