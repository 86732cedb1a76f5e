// search-bench's ground: a case (a mindie-sim profile at one npuBlockNum and
// MaxOutputLen, or a replayed curve file), its noise-free truth and noisy
// runs, and a search strategy played out on it in synchronous rounds over
// virtual time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "common/curve_file.h"
#include "controller/search/search.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace crest::bench {

struct Case {
  // The simulator's case (unused when `curve` is set).
  crest::sim::Profile profile;
  double npu_mem = 0;
  int max_output = 0;
  std::vector<crest::sim::WorkloadRequest> requests;
  int64_t blocks = 0;
  // A curve file replayed instead of the simulator.
  std::optional<crest::ThroughputCurve> curve;
  crest::controller::SearchSpace space;
};

// GSM8K's questions as shipped under `share` (ShareDir()); NOT_FOUND when
// there are none.
absl::StatusOr<std::vector<std::string>> Gsm8kQuestions(const std::string& share);

// The simulator's case of `profile` at npuMemSize `npu_mem` GiB and
// MaxOutputLen `max_output`: `questions` (GSM8K's) as its requests, and the
// range and knee guess the controller's auto range gives that workload.
absl::StatusOr<Case> SimCase(const crest::sim::Profile& profile, double npu_mem, int max_output,
                             const std::vector<std::string>& questions);

// "llama3-8b-910b mem 17 out 512", or the curve's name.
std::string CaseName(const Case& c);

// The case a curve file stands for: its range (given, or the controller's
// auto range from its npuBlockNum and request shape), the knee guess, and
// the practice's step.
Case CurveCase(const crest::ThroughputCurve& curve);

// One case's truth and noisy runs, memoised.
class Bench {
 public:
  explicit Bench(const Case& c) : c_(c) {}

  struct Point {
    bool feasible = true;  // a curve's daemon fails to start outside its points
    double speed = 0;
    double elapsed = 0;
    double tokens = 0;
    std::optional<int64_t> preemptions;
  };
  const Point& At(int64_t b);
  double Truth(int64_t b) { return At(b).speed; }
  // Model loading before a daemon is ready, at time scale 1.
  double StartupSeconds() const;
  // The true peak over the case's range.
  std::pair<int64_t, double> Peak();
  // One noisy run: the noise-free one with its clock warped by the case's
  // AR(1) noise process (simulate.h), epoch by epoch; infeasible where the
  // truth is.
  crest::controller::PointOutcome Measure(int64_t b, uint64_t seed, size_t repeat, bool signal);

 private:
  crest::sim::WorkloadResult Run(int64_t b, double cv, uint64_t seed);
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
  std::string basis;              // the answer's basis (knee search only)
  std::string trace;              // "point:throughput/preemptions" of every run, in order
  std::vector<int64_t> measured;  // the point of every feasible run, in order
};

// Where a play's runs go: `node_slots` places (daemon slots of a node) run at
// once, place i on host i % hosts (every host's first slot first, as the
// controller orders them), host h measuring `speed[h]` times the truth (a
// cluster whose nodes differ; empty: alike). `adjust`: compare points within
// a node first, as the controller does (node_effects.h); off, the raw
// figures compare.
struct Cluster {
  size_t node_slots = 1;
  size_t hosts = 1;
  std::vector<double> speed;
  bool adjust = true;
};

// Synchronous rounds on `cluster`: each round measures what the strategy
// wants, at most one run per place; a repeat goes to a host that has not
// measured the point when one is free (PickNodeSlot, as the controller does).
Play PlayOut(const crest::controller::SearchStrategy& strategy,
             const crest::controller::SearchSpace& space, Bench& bench, uint64_t seed,
             const Cluster& cluster, bool signal);
// `nodes` alike hosts of one slot each.
Play PlayOut(const crest::controller::SearchStrategy& strategy,
             const crest::controller::SearchSpace& space, Bench& bench, uint64_t seed, size_t nodes,
             bool signal);

// A strategy as the bench plays it: `key` names it in --json (contract:
// "knee", "practice", "grid"; "knee-no-signal" too), `label` in the tables.
struct Strategy {
  std::string key;
  std::string label;
  std::unique_ptr<crest::controller::SearchStrategy> impl;
  bool signal = true;  // the daemon publishes preemptions
  std::function<crest::controller::SearchSpace(crest::controller::SearchSpace)> adjust =
      [](crest::controller::SearchSpace s) { return s; };
};

// The strategies in the tables' order, the default first.
std::vector<Strategy> Strategies();

// `play(i)` for every i < n, `threads` at once (each index once).
void PlayEach(size_t n, int threads, const std::function<void(size_t)>& play);
// The q-quantile of `v` (nearest rank); 0 when empty.
double Quantile(std::vector<double> v, double q);
// `argv` as a shell command line, each word quoted when the shell would
// read it otherwise: the command a generated results file names.
std::string CommandLine(int argc, char** argv);
// "median / worst" of found/peak shares, in percent.
std::string MedianWorst(const std::vector<double>& v);

// The runs of `design` (points in order, a repeated point measured again)
// with `seed`'s noise, as the controller would hold them.
crest::controller::Outcomes MeasureDesign(Bench& bench, const crest::controller::SearchSpace& space,
                                          const std::vector<int64_t>& design, uint64_t seed);

}  // namespace crest::bench
