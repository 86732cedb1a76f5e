#include "bench/search/play.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

#include "controller/search/kv_blocks.h"
#include "controller/search/node_slot.h"
#include "controller/search/schedule_plan.h"
#include "controller/search/trial_outcomes.h"
#include "sim/kv_cache.h"
#include "sim/profile_fit.h"

namespace crest::bench {

using crest::controller::NodeSlotKey;
using crest::controller::Outcomes;
using crest::controller::PickNodeSlot;
using crest::controller::PointOutcome;
using crest::controller::RepeatKey;
using crest::controller::RepeatOutcome;
using crest::controller::SearchSpace;
using crest::controller::SearchStrategy;

namespace {

// A replayed curve's benchmark: GSM8K's 1319 requests of the curve's
// average output, the count the noise averages over as in the simulator.
constexpr double kCurveRequests = 1319;
// A replayed curve's daemon start (the simulator's profiles take 60-180 s).
constexpr double kCurveStartupSeconds = 90;

}  // namespace

std::string CaseName(const Case& c) {
  if (c.curve) return c.curve->name;
  return absl::StrFormat("%s mem %.0f out %d", c.profile.name, c.npu_mem, c.max_output);
}

absl::StatusOr<std::vector<std::string>> Gsm8kQuestions(const std::string& share) {
  std::vector<std::string> questions;
  std::ifstream in(share + "/datasets/gsm8k/test.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("question")) questions.push_back(j["question"]);
  }
  if (questions.empty()) return absl::NotFoundError("no GSM8K questions in " + share);
  return questions;
}

absl::StatusOr<Case> SimCase(const crest::sim::Profile& profile, double npu_mem, int max_output,
                             const std::vector<std::string>& questions) {
  auto kv = crest::sim::ComputeKvCache(profile, profile.reference_world_size, npu_mem, 128);
  if (!kv.ok()) return kv.status();
  Case c;
  c.profile = profile;
  c.npu_mem = npu_mem;
  c.max_output = max_output;
  c.blocks = kv->computed_blocks;
  auto requests = crest::sim::RequestsFor(profile, "", questions, max_output);
  if (!requests.ok()) return requests.status();
  c.requests = *std::move(requests);
  // The controller's own auto range, as a campaign with this workload gets it.
  crest::v1::CampaignSpec spec;
  auto* s = spec.mutable_search();
  s->set_range_auto(true);
  s->set_initial_auto(true);
  s->set_step(100);
  s->set_tolerance(0.02);
  s->set_max_trials(20);
  s->set_cache_block_size(128);
  spec.mutable_client()->mutable_dataset()->set_type(crest::v1::DATASET_TYPE_GSM8K);
  spec.mutable_client()->set_max_output_len(static_cast<uint32_t>(max_output));
  c.space = crest::controller::SearchSpaceFor(spec, c.blocks);
  return c;
}

Case CurveCase(const crest::ThroughputCurve& curve) {
  Case c;
  c.curve = curve;
  crest::v1::CampaignSpec spec;
  auto* s = spec.mutable_search();
  if (curve.range) {
    s->set_range_lo(curve.range->first);
    s->set_range_hi(curve.range->second);
  } else {
    s->set_range_auto(true);
  }
  // The guide's start from the block count; without one, the range's bottom.
  if (curve.npu_block_num) {
    s->set_initial_auto(true);
  } else {
    s->set_initial(curve.range->first);
  }
  s->set_step(static_cast<uint32_t>(curve.step));
  s->set_tolerance(0.02);
  s->set_max_trials(20);
  s->set_cache_block_size(static_cast<uint32_t>(curve.cache_block_size));
  auto* client = spec.mutable_client();
  client->mutable_dataset()->set_type(crest::v1::DATASET_TYPE_GSM8K);
  if (curve.max_output_len > 0)
    client->set_max_output_len(static_cast<uint32_t>(curve.max_output_len));
  if (curve.avg_input_tokens > 0)
    client->set_avg_input_tokens(static_cast<uint32_t>(curve.avg_input_tokens));
  if (curve.avg_output_tokens > 0) {
    client->set_avg_output_tokens(static_cast<uint32_t>(curve.avg_output_tokens));
  }
  c.blocks = curve.npu_block_num.value_or(0);
  c.space = crest::controller::SearchSpaceFor(spec, c.blocks);
  return c;
}

crest::sim::WorkloadResult Bench::Run(int64_t b, double cv, uint64_t seed) {
  crest::sim::SchedulerConfig config;
  config.max_batch_size = static_cast<int>(b);
  config.max_prefill_batch_size = std::max<int>(1, static_cast<int>(b / 2));
  config.max_prefill_tokens = 8192;
  config.block_size = 128;
  config.num_blocks = c_.blocks - 1;  // the engine keeps one in reserve
  return crest::sim::SimulateWorkload(config, c_.profile.TimingAt(c_.profile.reference_world_size),
                                      c_.requests, static_cast<int>(std::max<int64_t>(1, b - 1)),
                                      cv, seed);
}

const Bench::Point& Bench::At(int64_t b) {
  auto it = truth_.find(b);
  if (it != truth_.end()) return it->second;
  Point p;
  if (c_.curve) {
    const auto speed = c_.curve->SpeedAt(b);
    p.feasible = speed.has_value() && *speed > 0;
    p.speed = speed.value_or(0);
    p.tokens =
        kCurveRequests * static_cast<double>(std::max<int64_t>(1, c_.curve->avg_output_tokens));
    p.elapsed = p.feasible ? p.tokens / p.speed : 0;
    p.preemptions = c_.curve->PreemptionsAt(b);
  } else {
    auto r = Run(b, 0, 1);
    p = Point{true, r.generate_speed, r.elapsed_seconds, static_cast<double>(r.generated_tokens),
              r.stats.preemptions};
  }
  return truth_[b] = p;
}

double Bench::StartupSeconds() const {
  return c_.curve ? kCurveStartupSeconds : c_.profile.startup_seconds;
}

std::pair<int64_t, double> Bench::Peak() {
  const SearchSpace& s = c_.space;
  if (c_.curve) {
    auto peak = c_.curve->PeakWithin(s.lo, s.hi);
    return peak ? *peak : std::pair<int64_t, double>{s.lo, 0};
  }
  // A grid of ~60 points, then every point around the best.
  const int64_t step = std::max<int64_t>(1, (s.hi - s.lo) / 60);
  int64_t best = s.lo;
  for (int64_t b = s.lo; b <= s.hi; b += step) {
    if (Truth(b) > Truth(best)) best = b;
  }
  const int64_t center = best;
  for (int64_t b = std::max(s.lo, center - step); b <= std::min(s.hi, center + step); ++b) {
    if (Truth(b) > Truth(best)) best = b;
  }
  return {best, Truth(best)};
}

// The batching does not depend on time (supportSelectBatch false), so a
// noisy run is the noise-free one with its clock warped: what
// SimulateWorkload with that seed gives, but without re-simulating.
PointOutcome Bench::Measure(int64_t b, uint64_t seed, size_t repeat, bool signal) {
  const Point& p = At(b);
  PointOutcome o;
  if (!p.feasible) {
    o.kind = PointOutcome::Kind::kInfeasible;
    o.reason = absl::StrCat("the daemon does not start at maxBatchSize ", b);
    return o;
  }
  const double cv = c_.curve ? c_.curve->noise_cv : c_.profile.noise_cv;
  crest::sim::NoiseProcess noise(cv,
                                 seed * 1000003ULL + static_cast<uint64_t>(b) * 7919ULL + repeat);
  constexpr double kEpoch = 10;  // NoiseProcess's default epoch, seconds
  double base_left = p.elapsed;
  double t = 0;
  while (base_left > 0) {
    const double f = noise.Factor(t);
    const double epoch_end = (std::floor(t / kEpoch) + 1) * kEpoch;
    const double base_needed = (epoch_end - t) / f;
    if (base_needed >= base_left) {
      t += base_left * f;
      break;
    }
    base_left -= base_needed;
    t = epoch_end;
  }
  o.objective = t > 0 ? p.tokens / t : 0;
  o.samples = {o.objective};
  if (signal) o.preemptions = p.preemptions;
  return o;
}

Play PlayOut(const SearchStrategy& strategy, const SearchSpace& space, Bench& bench, uint64_t seed,
             const Cluster& cluster, bool signal) {
  Play play;
  play.seconds = bench.StartupSeconds();
  std::map<RepeatKey, RepeatOutcome> outcomes;
  Outcomes finished;
  const size_t node_slots = std::max<size_t>(1, cluster.node_slots);
  const size_t hosts = std::clamp<size_t>(cluster.hosts, 1, node_slots);
  std::vector<std::string> node_slot_keys;
  for (size_t i = 0; i < node_slots; ++i) {
    node_slot_keys.push_back(
        NodeSlotKey(absl::StrCat("n", i % hosts), static_cast<uint32_t>(i / hosts)));
  }
  for (int guard = 0; guard < 200; ++guard) {
    auto d = strategy.Decide(space, finished, node_slots);
    if (d.done) {
      absl::StrAppend(&play.trace, " [", d.reason, "]");
      break;
    }
    std::vector<int64_t> round;
    for (int64_t p : d.wanted) {
      auto want = std::max<size_t>(1, d.runs.count(p) != 0 ? d.runs.at(p) : 1);
      size_t have = finished.count(p) != 0 ? finished.at(p).runs : 0;
      for (; have < want && round.size() < node_slots; ++have) round.push_back(p);
    }
    if (round.empty()) break;
    ++play.rounds;
    double longest = 0;
    for (int64_t p : round) longest = std::max(longest, bench.At(p).elapsed);
    play.seconds += bench.StartupSeconds() + longest;
    if (node_slots > 1) play.trace += " |";
    std::vector<bool> taken(node_slots, false);
    for (int64_t p : round) {
      uint32_t repeat = 0;
      std::vector<std::string> measured_on;
      for (auto it = outcomes.lower_bound({p, 0}); it != outcomes.end() && it->first.first == p;
           ++it) {
        ++repeat;
        measured_on.push_back(it->second.node);
      }
      const size_t node_slot = *PickNodeSlot(node_slot_keys, taken, measured_on, {},
                                             [](const std::string&) { return true; });
      const size_t host = node_slot % hosts;
      PointOutcome m = bench.Measure(p, seed, repeat, signal);
      RepeatOutcome& run = outcomes[{p, repeat}];
      run.attempts = 1;
      run.node = absl::StrCat("n", host);
      ++play.runs;
      if (m.kind == PointOutcome::Kind::kInfeasible) {
        run.infeasible = true;
        run.reason = m.reason;
        absl::StrAppend(&play.trace, " ", p, ":infeasible");
        continue;
      }
      run.ok = true;
      play.measured.push_back(p);
      run.speed = m.samples[0] * (host < cluster.speed.size() ? cluster.speed[host] : 1.0);
      run.preemptions = m.preemptions;
      absl::StrAppend(&play.trace, " ", p, ":", std::lround(run.speed));
      if (m.preemptions) absl::StrAppend(&play.trace, "/", *m.preemptions);
    }
    finished =
        crest::controller::FinishedPoints(outcomes, 1, cluster.adjust ? space.noise_prior : 0);
  }
  auto best = strategy.Best(space, finished);
  play.found = best ? best->point : 0;
  if (best) play.basis = best->basis;
  return play;
}

Play PlayOut(const SearchStrategy& strategy, const SearchSpace& space, Bench& bench, uint64_t seed,
             size_t nodes, bool signal) {
  return PlayOut(strategy, space, bench, seed, Cluster{nodes, nodes, {}, true}, signal);
}

std::string CommandLine(int argc, char** argv) {
  std::vector<std::string> words;
  for (int i = 0; i < argc; ++i) {
    std::string w = argv[i];
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("_./=,:+-%@").find(c) != std::string_view::npos;
    });
    words.push_back(plain ? w : absl::StrCat("'", absl::StrReplaceAll(w, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(words, " ");
}

std::vector<Strategy> Strategies() {
  std::vector<Strategy> strategies;
  strategies.push_back(
      {"knee", "knee (default)", std::make_unique<crest::controller::KneeSearch>()});
  strategies.push_back({"knee-no-signal", "knee, no preemption signal",
                        std::make_unique<crest::controller::KneeSearch>(), false});
  strategies.push_back(
      {"practice", "practice", std::make_unique<crest::controller::PracticeSearch>()});
  strategies.push_back({"grid", "grid (20 steps)",
                        std::make_unique<crest::controller::GridSearch>(), true, [](SearchSpace s) {
                          s.step = std::max<int64_t>(1, (s.hi - s.lo) / 20);
                          s.max_points = 40;
                          return s;
                        }});
  return strategies;
}

void PlayEach(size_t n, int threads, const std::function<void(size_t)>& play) {
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= n) return;
        i = next++;
      }
      play(i);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
}

std::string MedianWorst(const std::vector<double>& v) {
  return absl::StrFormat("%.2f%% / %.2f%%", 100 * Quantile(v, 0.5), 100 * Quantile(v, 0));
}

Outcomes MeasureDesign(Bench& bench, const SearchSpace& space, const std::vector<int64_t>& design,
                       uint64_t seed) {
  std::map<RepeatKey, RepeatOutcome> outcomes;
  for (int64_t p : design) {
    uint32_t repeat = 0;
    while (outcomes.count({p, repeat}) != 0) ++repeat;
    PointOutcome m = bench.Measure(p, seed, repeat, true);
    RepeatOutcome& run = outcomes[{p, repeat}];
    run.attempts = 1;
    run.node = "n0";
    if (m.kind == PointOutcome::Kind::kInfeasible) {
      run.infeasible = true;
      run.reason = m.reason;
      continue;
    }
    run.ok = true;
    run.speed = m.samples[0];
    run.preemptions = m.preemptions;
  }
  return crest::controller::FinishedPoints(outcomes, 1, space.noise_prior);
}

}  // namespace crest::bench
