// search-bench: plays every search strategy against mindie-sim's model in
// virtual time (SimulateWorkload: MindIE's benchmark, GSM8K, Concurrency =
// maxBatchSize - 1) with the profile's run-to-run noise, over seeds, shipped
// profiles, MaxOutputLen values and npuMemSize values. Truth is the
// noise-free curve on a fine grid. Prints, per strategy, the benchmark runs
// used, the rounds with 1, 2 and 4 nodes, and the found point's true
// throughput as a share of the true peak. docs/search.md shows the table;
// --slots-projection and --node-spread print its "Slots" and "Nodes that
// differ" tables instead; --fit-limit, what the answer rule and the cost fit
// make of given points measured over seeds (docs/search.md, "What still
// misses").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "common/command_line.h"
#include "common/paths.h"
#include "controller/knee_cost_model.h"
#include "controller/knee_reading.h"
#include "controller/kv_blocks.h"
#include "controller/place.h"
#include "controller/schedule_plan.h"
#include "controller/search.h"
#include "controller/trial_outcomes.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace {

using crest::controller::Outcomes;
using crest::controller::PickPlace;
using crest::controller::PlaceKey;
using crest::controller::PointOutcome;
using crest::controller::SearchSpace;
using crest::controller::SearchStrategy;
using crest::controller::Slot;
using crest::controller::SlotKey;

struct Case {
  crest::sim::Profile profile;
  double npu_mem = 0;
  int max_output = 0;
  std::vector<crest::sim::WorkloadRequest> requests;
  SearchSpace space;
  int64_t blocks = 0;
};

// One case's simulator: noise-free and noisy runs, memoised.
class Bench {
 public:
  explicit Bench(const Case& c) : c_(c) {}

  crest::sim::WorkloadResult Run(int64_t b, double cv, uint64_t seed) {
    crest::sim::SchedulerConfig config;
    config.max_batch_size = static_cast<int>(b);
    config.max_prefill_batch_size = std::max<int>(1, static_cast<int>(b / 2));
    config.max_prefill_tokens = 8192;
    config.block_size = 128;
    config.num_blocks = c_.blocks - 1;  // the engine keeps one in reserve
    return crest::sim::SimulateWorkload(
        config, c_.profile.TimingAt(c_.profile.reference_world_size), c_.requests,
        static_cast<int>(std::max<int64_t>(1, b - 1)), cv, seed);
  }
  struct Point {
    double speed = 0;
    double elapsed = 0;
    double tokens = 0;
    int64_t preemptions = 0;
  };
  const Point& At(int64_t b) {
    auto it = truth_.find(b);
    if (it != truth_.end()) return it->second;
    auto r = Run(b, 0, 1);
    return truth_[b] = Point{r.generate_speed, r.elapsed_seconds,
                             static_cast<double>(r.generated_tokens), r.stats.preemptions};
  }
  double Truth(int64_t b) { return At(b).speed; }
  // Model loading before a daemon is ready, at time scale 1 (the profile's).
  double StartupSeconds() const { return c_.profile.startup_seconds; }
  // The true peak: a grid of ~60 points, then every point around the best.
  std::pair<int64_t, double> Peak() {
    const SearchSpace& s = c_.space;
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
  // One noisy run. The batching does not depend on time (supportSelectBatch
  // false), so the run is the noise-free one with its clock warped by the
  // profile's noise process (simulate.h), epoch by epoch: what
  // SimulateWorkload with that seed gives, but without re-simulating.
  PointOutcome Measure(int64_t b, uint64_t seed, size_t repeat, bool signal) {
    const Point& p = At(b);
    crest::sim::NoiseProcess noise(c_.profile.noise_cv,
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
    PointOutcome o;
    o.objective = t > 0 ? p.tokens / t : 0;
    o.samples = {o.objective};
    if (signal) o.preemptions = p.preemptions;
    return o;
  }

 private:
  const Case& c_;
  std::map<int64_t, Point> truth_;
};

struct Play {
  size_t runs = 0;
  size_t rounds = 0;
  // Wall-clock at time scale 1: a round takes a daemon start and its longest
  // benchmark (its places run side by side); the campaign's npuBlockNum
  // probe, one start, comes first.
  double seconds = 0;
  int64_t found = 0;
  std::string trace;  // "point:throughput/preemptions" of every run, in order
};

// Where a play's runs go: `places` run at once, place i on host i % hosts
// (every host's first slot first, as the controller orders places), host h
// measuring `speed[h]` times the simulator's figure (a cluster whose nodes
// differ; empty: alike). `adjust`: compare points within a node first, as
// the controller does (node_effects.h); off, the raw figures compare.
struct Cluster {
  size_t places = 1;
  size_t hosts = 1;
  std::vector<double> speed;
  bool adjust = true;
};

// Synchronous rounds on `cluster`: each round measures what the strategy
// wants, at most one run per place; a repeat goes to a host that has not
// measured the point when one is free (PickPlace, as the controller does).
Play PlayOut(const SearchStrategy& strategy, const SearchSpace& space, Bench& bench, uint64_t seed,
             const Cluster& cluster, bool signal) {
  Play play;
  play.seconds = bench.StartupSeconds();
  std::map<SlotKey, Slot> slots;
  Outcomes finished;
  const size_t places = std::max<size_t>(1, cluster.places);
  const size_t hosts = std::clamp<size_t>(cluster.hosts, 1, places);
  for (int guard = 0; guard < 200; ++guard) {
    auto d = strategy.Decide(space, finished, places);
    if (d.done) {
      absl::StrAppend(&play.trace, " [", d.reason, "]");
      break;
    }
    std::vector<int64_t> round;
    for (int64_t p : d.wanted) {
      auto want = std::max<size_t>(1, d.runs.count(p) != 0 ? d.runs.at(p) : 1);
      size_t have = finished.count(p) != 0 ? finished.at(p).samples.size() : 0;
      for (; have < want && round.size() < places; ++have) round.push_back(p);
    }
    if (round.empty()) break;
    ++play.rounds;
    double longest = 0;
    for (int64_t p : round) longest = std::max(longest, bench.At(p).elapsed);
    play.seconds += bench.StartupSeconds() + longest;
    if (places > 1) play.trace += " |";
    std::vector<std::string> place_keys;
    for (size_t i = 0; i < places; ++i) {
      place_keys.push_back(
          PlaceKey(absl::StrCat("n", i % hosts), static_cast<uint32_t>(i / hosts)));
    }
    std::vector<bool> taken(places, false);
    for (int64_t p : round) {
      uint32_t repeat = 0;
      std::vector<std::string> measured_on;
      for (auto it = slots.lower_bound({p, 0}); it != slots.end() && it->first.first == p; ++it) {
        ++repeat;
        measured_on.push_back(it->second.node);
      }
      const size_t place =
          *PickPlace(place_keys, taken, measured_on, {}, [](const std::string&) { return true; });
      const size_t host = place % hosts;
      PointOutcome m = bench.Measure(p, seed, repeat, signal);
      Slot& run = slots[{p, repeat}];
      run.attempts = 1;
      run.ok = true;
      run.speed = m.samples[0] * (host < cluster.speed.size() ? cluster.speed[host] : 1.0);
      run.preemptions = m.preemptions;
      run.node = absl::StrCat("n", host);
      ++play.runs;
      absl::StrAppend(&play.trace, " ", p, ":", std::lround(run.speed));
      if (m.preemptions) absl::StrAppend(&play.trace, "/", *m.preemptions);
    }
    finished = FinishedPoints(slots, 1, cluster.adjust ? space.noise_prior : 0);
  }
  auto best = strategy.Best(space, finished);
  play.found = best ? best->point : 0;
  return play;
}

// `nodes` alike hosts of one place each.
Play PlayOut(const SearchStrategy& strategy, const SearchSpace& space, Bench& bench, uint64_t seed,
             size_t nodes, bool signal) {
  return PlayOut(strategy, space, bench, seed, Cluster{nodes, nodes, {}, true}, signal);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
}

struct Row {
  std::vector<double> runs1, rounds1, rounds2, rounds4, share1, share2, share4;
};

// The runs of `design` (points in order, a repeated point measured again)
// with `seed`'s noise, as the controller would hold them.
Outcomes MeasureDesign(Bench& bench, const SearchSpace& space, const std::vector<int64_t>& design,
                       uint64_t seed) {
  std::map<SlotKey, Slot> slots;
  for (int64_t p : design) {
    uint32_t repeat = 0;
    while (slots.count({p, repeat}) != 0) ++repeat;
    PointOutcome m = bench.Measure(p, seed, repeat, true);
    Slot& run = slots[{p, repeat}];
    run.attempts = 1;
    run.ok = true;
    run.speed = m.samples[0];
    run.preemptions = m.preemptions;
    run.node = "n0";
  }
  return FinishedPoints(slots, 1, space.noise_prior);
}

// Median, worst and the share below `target` of found/peak figures (none
// when no seed gave one).
std::string ShareSummary(const std::vector<double>& shares, double target) {
  if (shares.empty()) return "none";
  const auto below =
      std::count_if(shares.begin(), shares.end(), [&](double v) { return v < target; });
  return absl::StrFormat("%.2f%% / %.2f%% / %.1f%%", 100 * Quantile(shares, 0.5),
                         100 * Quantile(shares, 0),
                         100 * static_cast<double>(below) / static_cast<double>(shares.size()));
}

// "129,134,139": maxBatchSize values in the order they are measured.
absl::StatusOr<std::vector<int64_t>> ParsePoints(const std::string& text) {
  std::vector<int64_t> points;
  for (absl::string_view t : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(t, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t, "' in '", text, "' is not a maxBatchSize (an integer >= 1)"));
    }
    points.push_back(v);
  }
  return points;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("search-bench: the search strategies against mindie-sim in virtual time",
               "search-bench");
  int seeds = 20;
  std::vector<std::string> profiles;
  std::vector<int> outputs = {256, 512, 1024};
  int threads = 2;
  bool verbose = false;
  app.add_option("--seeds", seeds, "noise seeds per case");
  int first_seed = 1;
  app.add_option("--first-seed", first_seed,
                 "the first noise seed (seeds first-seed .. first-seed + seeds - 1), to check a "
                 "result on seeds it was not tuned on");
  app.add_option("--profiles", profiles, "profile names (default: every shipped profile)");
  app.add_option("--max-output", outputs, "MaxOutputLen values");
  app.add_option("--threads", threads, "cases simulated at once");
  app.add_flag("--verbose", verbose, "one line per case");
  bool trace = false;
  app.add_flag("--trace", trace,
               "print every run of each seed (1 node) and the point found; with --node-spread, "
               "the seeds whose search found below 97% of the peak, both plays");
  size_t trace_nodes = 1;
  app.add_option("--trace-nodes", trace_nodes,
                 "nodes (places) of the runs --trace prints ('|' starts a round)");
  bool curves = false;
  app.add_flag("--curves", curves, "print each case's noise-free curve around its peak");
  bool projection = false;
  app.add_flag("--slots-projection", projection,
               "instead of the table: each case's campaign wall-clock at time scale 1 with 1, 4, "
               "8 and 32 places (1 server x 1 slot, 4 x 1, 1 x 8, 4 x 8)");
  double node_spread = 0;
  app.add_option("--node-spread", node_spread,
                 "instead of the table: nodes that differ, their speeds spread evenly over "
                 "1 -+ S/2 (S = 0.1: 0.95 to 1.05); found/peak with 2 and 4 nodes, points "
                 "compared within a node first (the controller's way) against raw figures")
      ->check(CLI::Range(0.0, 1.0));
  std::vector<std::string> designs;
  app.add_option("--fit-limit", designs,
                 "instead of the table: for each list of points (comma-separated, a repeated "
                 "point measured again), what the knee search's answer rule and its cost fit "
                 "make of those runs over the seeds, on every case whose range holds them")
      ->check([](const std::string& text) -> std::string {
        auto points = ParsePoints(text);
        return points.ok() ? "" : std::string(points.status().message());
      });
  std::vector<double> mem_filter;
  app.add_option("--npu-mem", mem_filter, "only the cases of these npuMemSize values");
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  auto share = crest::ShareDir();
  if (!share.ok()) return crest::FailWithMessage(app, share.status().ToString());
  if (profiles.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(*share + "/profiles", ec)) {
      if (e.path().extension() == ".json") profiles.push_back(e.path().stem().string());
    }
    if (ec) return crest::FailWithMessage(app, *share + "/profiles: " + ec.message());
    std::sort(profiles.begin(), profiles.end());
  }
  // Two KV-cache sizes per profile: MindIE's reference 17 GiB and a larger
  // one (smaller for the 70B model, whose 8 cards hold far more blocks).
  const std::map<std::string, std::vector<double>> mems = {
      {"llama3-8b-910b", {17, 24}}, {"llama2-13b-910b", {17, 24}}, {"llama3-70b-910b", {4, 6}}};
  std::vector<std::string> questions;
  {
    std::ifstream in(*share + "/datasets/gsm8k/test.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.contains("question")) questions.push_back(j["question"]);
    }
  }
  if (questions.empty()) return crest::FailWithMessage(app, "no GSM8K questions in " + *share);
  std::vector<Case> cases;
  for (const auto& name : profiles) {
    auto profile = crest::sim::FindProfile(*share + "/profiles", name, "");
    if (!profile.ok()) return crest::FailWithMessage(app, profile.status().ToString());
    auto mem_it = mems.find(name);
    for (double mem : mem_it != mems.end() ? mem_it->second : std::vector<double>{17, 24}) {
      if (!mem_filter.empty() &&
          std::find(mem_filter.begin(), mem_filter.end(), mem) == mem_filter.end()) {
        continue;
      }
      auto kv = crest::sim::ComputeKvCache(*profile, profile->reference_world_size, mem, 128);
      if (!kv.ok()) return crest::FailWithMessage(app, kv.status().ToString());
      for (int out : outputs) {
        Case c;
        c.profile = *profile;
        c.npu_mem = mem;
        c.max_output = out;
        c.blocks = kv->computed_blocks;
        const auto& dist = profile->workloads.at(profile->default_workload);
        for (const auto& q : questions) {
          int o = std::min(crest::sim::NaturalOutputLength(dist, q), out);
          c.requests.push_back(
              {crest::sim::CountPromptTokens(q, profile->prompt_template_tokens), o});
        }
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
        spec.mutable_client()->set_max_output_len(static_cast<uint32_t>(out));
        c.space = crest::controller::SearchSpaceFor(spec, c.blocks);
        cases.push_back(std::move(c));
      }
    }
  }
  struct Strategy {
    std::string label;
    std::unique_ptr<SearchStrategy> impl;
    bool signal = true;
    std::function<SearchSpace(SearchSpace)> adjust = [](SearchSpace s) { return s; };
  };
  std::vector<Strategy> strategies;
  strategies.push_back({"knee (default)", std::make_unique<crest::controller::KneeSearch>()});
  strategies.push_back(
      {"knee, no preemption signal", std::make_unique<crest::controller::KneeSearch>(), false});
  strategies.push_back({"practice", std::make_unique<crest::controller::PracticeSearch>()});
  strategies.push_back({"grid (20 steps)", std::make_unique<crest::controller::GridSearch>(), true,
                        [](SearchSpace s) {
                          s.step = std::max<int64_t>(1, (s.hi - s.lo) / 20);
                          s.max_points = 40;
                          return s;
                        }});
  if (node_spread > 0) {
    std::printf(
        "nodes whose speeds spread over %.3f to %.3f, %zu cases x %d seeds (%d to %d)\n"
        "| strategy | nodes | found/peak, within a node first: median / worst | raw figures: "
        "median / worst | runs median / max (first / raw) |\n|---|---|---|---|---|\n",
        1 - node_spread / 2, 1 + node_spread / 2, cases.size(), seeds, first_seed,
        first_seed + seeds - 1);
    for (const auto& st : strategies) {
      if (st.label.rfind("knee", 0) != 0) continue;
      for (size_t nodes : {2, 4}) {
        std::vector<double> adjusted, raw, runs_adjusted, runs_raw;
        for (const Case& c : cases) {
          Bench bench(c);
          const double peak = bench.Peak().second;
          const SearchSpace space = st.adjust(c.space);
          for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
            // Which node is the fast one changes with the seed.
            Cluster cluster{nodes, nodes, {}, true};
            for (size_t h = 0; h < nodes; ++h) {
              const size_t rank = (h + static_cast<size_t>(seed)) % nodes;
              cluster.speed.push_back(1 - node_spread / 2 +
                                      node_spread * static_cast<double>(rank) /
                                          static_cast<double>(nodes - 1));
            }
            const auto u = static_cast<uint64_t>(seed);
            Play a = PlayOut(*st.impl, space, bench, u, cluster, st.signal);
            cluster.adjust = false;
            Play r = PlayOut(*st.impl, space, bench, u, cluster, st.signal);
            adjusted.push_back(a.found > 0 ? bench.Truth(a.found) / peak : 0);
            if (trace && adjusted.back() < 0.97) {
              std::printf(
                  "%s mem %.0f out %d seed %d nodes %zu:%s -> %lld (%.2f%%); raw:%s -> %lld\n",
                  c.profile.name.c_str(), c.npu_mem, c.max_output, seed, nodes, a.trace.c_str(),
                  static_cast<long long>(a.found), 100 * adjusted.back(), r.trace.c_str(),
                  static_cast<long long>(r.found));
            }
            raw.push_back(r.found > 0 ? bench.Truth(r.found) / peak : 0);
            runs_adjusted.push_back(static_cast<double>(a.runs));
            runs_raw.push_back(static_cast<double>(r.runs));
          }
        }
        std::printf(
            "| %s | %zu | %.2f%% / %.2f%% | %.2f%% / %.2f%% | %.0f / %.0f (%.0f / %.0f) |\n",
            st.label.c_str(), nodes, 100 * Quantile(adjusted, 0.5), 100 * Quantile(adjusted, 0),
            100 * Quantile(raw, 0.5), 100 * Quantile(raw, 0), Quantile(runs_adjusted, 0.5),
            Quantile(runs_adjusted, 1), Quantile(runs_raw, 0.5), Quantile(runs_raw, 1));
      }
    }
    return 0;
  }
  if (!designs.empty()) {
    // The misses' question (docs/search.md): is it the points measured or
    // the answer made of them? Each design's runs over the seeds, answered
    // by KneeSearch::Best and by the cost fit's optimum over every size
    // between the knee and the largest point.
    // Parsed once (the option checked each), then each checked against the
    // cases before any is measured.
    std::vector<std::vector<int64_t>> parsed;
    parsed.reserve(designs.size());
    for (const auto& text : designs) parsed.push_back(*ParsePoints(text));
    for (size_t i = 0; i < designs.size(); ++i) {
      const auto [lo, hi] = std::minmax_element(parsed[i].begin(), parsed[i].end());
      std::string ranges;
      bool held = false;
      for (const Case& c : cases) {
        absl::StrAppendFormat(&ranges, "\n  %s mem %.0f out %d: [%d, %d]", c.profile.name,
                              c.npu_mem, c.max_output, c.space.lo, c.space.hi);
        held |= *lo >= c.space.lo && *hi <= c.space.hi;
      }
      if (!held) {
        return crest::FailWithMessage(
            app, absl::StrCat("--fit-limit '", designs[i], "': no case's maxBatchSize range holds ",
                              *lo, " to ", *hi, "; the cases' ranges:", ranges));
      }
    }
    const double target = 0.985;
    std::printf(
        "%d seeds (%d to %d); found/peak median / worst / share of seeds below %.1f%%\n"
        "| case | points measured | runs | the search's answer | the cost fit's optimum |\n"
        "|---|---|---|---|---|\n",
        seeds, first_seed, first_seed + seeds - 1, 100 * target);
    const crest::controller::KneeSearch knee_search;
    for (size_t i = 0; i < designs.size(); ++i) {
      const std::vector<int64_t>& design = parsed[i];
      const auto [lo, hi] = std::minmax_element(design.begin(), design.end());
      for (const Case& c : cases) {
        if (*lo < c.space.lo || *hi > c.space.hi) continue;
        Bench bench(c);
        const double peak = bench.Peak().second;
        std::vector<double> answered, fitted;
        for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
          const Outcomes finished =
              MeasureDesign(bench, c.space, design, static_cast<uint64_t>(seed));
          auto best = knee_search.Best(c.space, finished);
          answered.push_back(best ? bench.Truth(best->point) / peak : 0);
          const auto reading = crest::controller::knee::Read(c.space, finished);
          auto fit = crest::controller::knee::FitCost(finished, reading);
          auto at = fit ? crest::controller::knee::ModelOptimum(*fit, reading) : std::nullopt;
          if (at) fitted.push_back(bench.Truth(*at) / peak);
        }
        std::printf("| %s mem %.0f out %d | %s | %zu | %s | %s (%d seeds without a fit) |\n",
                    c.profile.name.c_str(), c.npu_mem, c.max_output, designs[i].c_str(),
                    design.size(), ShareSummary(answered, target).c_str(),
                    ShareSummary(fitted, target).c_str(), seeds - static_cast<int>(fitted.size()));
      }
    }
    return 0;
  }
  if (projection) {
    std::printf(
        "| case | strategy | places | rounds med/max | hours med/max | vs 1 place (or 4) | "
        "found/peak med / worst |\n|---|---|---|---|---|---|---|\n");
    // Per strategy and place count, over every case: the ratio of the
    // median hours to the base's, and every seed's found/peak.
    std::map<std::pair<std::string, size_t>, std::vector<double>> ratios, all_shares;
    for (const Case& c : cases) {
      Bench bench(c);
      const double peak = bench.Peak().second;
      for (const auto& st : strategies) {
        if (!st.signal) continue;
        const SearchSpace space = st.adjust(c.space);
        std::map<size_t, double> hours_median;
        for (size_t places : {1, 4, 8, 32}) {
          std::vector<double> rounds, hours, shares;
          for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
            // 8 places are one server's slots; 32, four servers' (one host each).
            const size_t hosts = places == 8 ? 1 : places == 32 ? 4 : places;
            Play p = PlayOut(*st.impl, space, bench, static_cast<uint64_t>(seed),
                             Cluster{places, hosts, {}, true}, true);
            rounds.push_back(static_cast<double>(p.rounds));
            hours.push_back(p.seconds / 3600);
            shares.push_back(p.found > 0 ? bench.Truth(p.found) / peak : 0);
          }
          hours_median[places] = Quantile(hours, 0.5);
          const size_t base = places == 8 ? 1 : places == 32 ? 4 : places;
          ratios[{st.label, places}].push_back(hours_median[places] / hours_median[base]);
          auto& pooled = all_shares[{st.label, places}];
          pooled.insert(pooled.end(), shares.begin(), shares.end());
          std::printf(
              "| %s mem %.0f out %d | %s | %zu | %.0f / %.0f | %.3f / %.3f | %.3f | %.2f%% / "
              "%.2f%% |\n",
              c.profile.name.c_str(), c.npu_mem, c.max_output, st.label.c_str(), places,
              Quantile(rounds, 0.5), Quantile(rounds, 1), hours_median[places], Quantile(hours, 1),
              hours_median[places] / hours_median[base], 100 * Quantile(shares, 0.5),
              100 * Quantile(shares, 0));
        }
      }
    }
    std::printf(
        "\nover %zu cases x %d seeds: | strategy | places | hours vs 1 place (or 4), median "
        "/ max over cases | found/peak median / worst |\n|---|---|---|---|\n",
        cases.size(), seeds);
    for (const auto& [key, r] : ratios) {
      const auto& sh = all_shares[key];
      std::printf("| %s | %zu | %.3f / %.3f | %.2f%% / %.2f%% |\n", key.first.c_str(), key.second,
                  Quantile(r, 0.5), Quantile(r, 1), 100 * Quantile(sh, 0.5), 100 * Quantile(sh, 0));
    }
    return 0;
  }
  std::vector<Row> rows(strategies.size());
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= cases.size()) return;
        i = next++;
      }
      const Case& c = cases[i];
      Bench bench(c);
      auto [peak_at, peak] = bench.Peak();
      if (curves) {
        std::string text;
        for (int64_t b = std::max(c.space.lo, peak_at * 9 / 10);
             b <= std::min(c.space.hi, peak_at * 11 / 10); ++b) {
          text += std::to_string(b) + ":" + std::to_string(static_cast<int>(bench.Truth(b))) + "/" +
                  std::to_string(bench.At(b).preemptions) + " ";
        }
        std::lock_guard<std::mutex> lock(mu);
        std::printf("%s mem %.0f out %d: %s\n", c.profile.name.c_str(), c.npu_mem, c.max_output,
                    text.c_str());
      }
      std::vector<Row> local(strategies.size());
      std::string line;
      for (size_t k = 0; k < strategies.size(); ++k) {
        const SearchSpace space = strategies[k].adjust(c.space);
        double worst = 1;
        for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
          const auto u = static_cast<uint64_t>(seed);
          Play p1 = PlayOut(*strategies[k].impl, space, bench, u, 1, strategies[k].signal);
          Play p2 = PlayOut(*strategies[k].impl, space, bench, u, 2, strategies[k].signal);
          Play p4 = PlayOut(*strategies[k].impl, space, bench, u, 4, strategies[k].signal);
          double share1 = p1.found > 0 ? bench.Truth(p1.found) / peak : 0;
          double share2 = p2.found > 0 ? bench.Truth(p2.found) / peak : 0;
          double share4 = p4.found > 0 ? bench.Truth(p4.found) / peak : 0;
          worst = std::min({worst, share1, share2, share4});
          if (trace) {
            const Play shown = trace_nodes == 4   ? p4
                               : trace_nodes == 2 ? p2
                               : trace_nodes == 1 ? p1
                                                  : PlayOut(*strategies[k].impl, space, bench, u,
                                                            trace_nodes, strategies[k].signal);
            std::lock_guard<std::mutex> lock(mu);
            std::printf("%s mem %.0f out %d %s seed %d:%s -> %lld (%.2f%%)\n",
                        c.profile.name.c_str(), c.npu_mem, c.max_output,
                        strategies[k].label.c_str(), seed, shown.trace.c_str(),
                        static_cast<long long>(shown.found), 100 * bench.Truth(shown.found) / peak);
          }
          local[k].runs1.push_back(static_cast<double>(p1.runs));
          local[k].rounds1.push_back(static_cast<double>(p1.rounds));
          local[k].rounds2.push_back(static_cast<double>(p2.rounds));
          local[k].rounds4.push_back(static_cast<double>(p4.rounds));
          local[k].share1.push_back(share1);
          local[k].share2.push_back(share2);
          local[k].share4.push_back(share4);
        }
        char buf[96];
        std::snprintf(buf, sizeof buf, " %s %.1f%%", strategies[k].label.substr(0, 4).c_str(),
                      100 * worst);
        line += buf;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (verbose) {
        std::printf(
            "%-16s mem %4.0f out %4d range [%lld, %lld] guess %lld peak %lld (%.0f tok/s) "
            "worst:%s\n",
            c.profile.name.c_str(), c.npu_mem, c.max_output, static_cast<long long>(c.space.lo),
            static_cast<long long>(c.space.hi), static_cast<long long>(c.space.knee_guess),
            static_cast<long long>(peak_at), peak, line.c_str());
        std::fflush(stdout);
      }
      for (size_t k = 0; k < strategies.size(); ++k) {
        auto append = [](std::vector<double>& to, const std::vector<double>& from) {
          to.insert(to.end(), from.begin(), from.end());
        };
        append(rows[k].runs1, local[k].runs1);
        append(rows[k].rounds1, local[k].rounds1);
        append(rows[k].rounds2, local[k].rounds2);
        append(rows[k].rounds4, local[k].rounds4);
        append(rows[k].share1, local[k].share1);
        append(rows[k].share2, local[k].share2);
        append(rows[k].share4, local[k].share4);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  std::printf(
      "%zu cases x %d seeds (%d to %d); runs and rounds: median / max; share of the true peak "
      "(1, 2, 4 nodes): median / worst\n",
      cases.size(), seeds, first_seed, first_seed + seeds - 1);
  std::printf(
      "| strategy | runs, 1 node | rounds, 1 node | rounds, 2 nodes | rounds, 4 nodes | "
      "found/peak, 1 node | found/peak, 2 nodes | found/peak, 4 nodes |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < strategies.size(); ++k) {
    const Row& r = rows[k];
    std::printf(
        "| %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f%% / %.2f%% | "
        "%.2f%% / %.2f%% | %.2f%% / %.2f%% |\n",
        strategies[k].label.c_str(), Quantile(r.runs1, 0.5), Quantile(r.runs1, 1),
        Quantile(r.rounds1, 0.5), Quantile(r.rounds1, 1), Quantile(r.rounds2, 0.5),
        Quantile(r.rounds2, 1), Quantile(r.rounds4, 0.5), Quantile(r.rounds4, 1),
        100 * Quantile(r.share1, 0.5), 100 * Quantile(r.share1, 0), 100 * Quantile(r.share2, 0.5),
        100 * Quantile(r.share2, 0), 100 * Quantile(r.share4, 0.5), 100 * Quantile(r.share4, 0));
  }
  // The targets for the default strategy (the first row), all at once.
  const Row& d = rows[0];
  struct Target {
    std::string what;
    bool met;
    std::string detail;
  };
  // The worst share is one search's luck: how many searches fell below the
  // line says how far from the target a NOT MET is.
  auto below = [](const std::vector<double>& shares, double line) {
    return absl::StrFormat(
        "%d of %d", std::count_if(shares.begin(), shares.end(), [&](double v) { return v < line; }),
        shares.size());
  };
  const std::vector<Target> targets = {
      {"median found/peak >= 99.5% (1, 2, 4 nodes)",
       std::min({Quantile(d.share1, 0.5), Quantile(d.share2, 0.5), Quantile(d.share4, 0.5)}) >=
           0.995,
       ""},
      {"worst found/peak >= 98.5% (1, 2, 4 nodes)",
       std::min({Quantile(d.share1, 0), Quantile(d.share2, 0), Quantile(d.share4, 0)}) >= 0.985,
       absl::StrCat(" (searches below 98.5%: ", below(d.share1, 0.985), ", ",
                    below(d.share2, 0.985), ", ", below(d.share4, 0.985), ")")},
      {"runs on 1 node <= 10, median <= 8",
       Quantile(d.runs1, 1) <= 10 && Quantile(d.runs1, 0.5) <= 8, ""},
      {"rounds with 4 nodes <= 4 (max)", Quantile(d.rounds4, 1) <= 4, ""},
  };
  bool all = true;
  for (const auto& t : targets) {
    std::printf("target for %s: %s: %s%s\n", strategies[0].label.c_str(), t.what.c_str(),
                t.met ? "met" : "NOT MET", t.detail.c_str());
    all &= t.met;
  }
  std::printf("targets: %s\n", all ? "all met" : "NOT all met");
  return 0;
}
