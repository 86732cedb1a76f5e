// What the finished points of a knee search (search_knee.cc) say: each
// point's side of the KV-cache knee, the bracket around it, the noise a
// decision assumes, and the trusted points and the cap the other parts of
// the search (knee_probes.h, knee_cost_model.h) read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controller/search/search.h"

namespace crest::controller::knee {

// Spacing of the first points around the predicted knee, relative.
constexpr double kSpread = 0.04;

// From this many places per round on, the search's first round is wide: its
// points cover the window where the knee is expected, WideSpacing apart,
// and a bracket that narrow counts as located. A round costs a daemon start
// and a whole benchmark however many points it measures, so on a server of
// eight slots one wide round beats three narrow ones (docs/search.md,
// "Slots").
constexpr size_t kWideRound = 8;
// The window, relative to the predicted knee: the simulator's peaks lie
// from 3% below the prediction to 20% above it, most within 6% above
// (search-bench --verbose), since a peak may sit up a plateau past the knee.
constexpr double kWideBelow = 0.04;
constexpr double kWideAbove = 0.10;
// The points of the first round with `places` per round: every place, but
// at most half of max_trials (the other half for a knee outside its window).
size_t FirstRound(const SearchSpace& space, size_t places);
// The relative spacing of the search's wide first round with `places` per
// round; nullopt when that round is narrow (fewer than kWideRound points).
std::optional<double> WideSpacing(const SearchSpace& space, size_t places);

// Runs at most of each of two points the noise cannot tell apart.
constexpr size_t kMaxDecidingRuns = 2;

enum class Side { kBelow, kPast };

struct Reading {
  std::map<int64_t, Side> side;                        // every measured point's side of the knee
  bool signal = false;                                 // the daemon publishes preemptions
  int64_t past = std::numeric_limits<int64_t>::max();  // smallest point past the knee
  std::optional<int64_t> below;                        // largest point below it
  std::string past_why;
};

// Runs behind a point's mean (at least one).
size_t Runs(const PointOutcome& o);
// Whether `o`'s mean lies under `ref`'s beyond `z` standard errors of their
// difference (NoiseBand): the one comparison every rule of the search makes.
bool MeasuresUnder(double noise, const PointOutcome& o, const PointOutcome& ref, double z = 2.0);
// The noise a decision assumes: the measured one shrunk toward the prior
// with the weight of two runs, so that two close samples by chance do not
// make every small difference a fall; plus, in quadrature, the space's
// neighbour noise once a run was measured beside another job on its node.
double DecisionNoise(const SearchSpace& space, const Outcomes& finished);
// Each point's side of the knee, the bracket, and why its upper end is past.
// `use_counter` false: on throughput alone, whatever the daemon publishes.
Reading Read(const SearchSpace& space, const Outcomes& finished, bool use_counter = true);
// How far (standard errors of the difference) a point below the knee must
// fall under a smaller one before the knee model counts as broken: above
// NoiseBand's 2, so that the many pairs of a search seldom break it by chance.
constexpr double kBreakZ = 3.0;
// Relative distance between the located knee and the block-count guess
// beyond which the guess's arithmetic does not describe this engine: the
// reasons say so.
constexpr double kFarFromGuess = 0.25;
// Points at or above this fraction of the knee's lower end are the knee's
// neighbourhood, which the check point is compared with.
constexpr double kNearKnee = 0.9;
// The check point lies at most this fraction of the knee's lower end: closer,
// the rise to the knee hides in the noise.
constexpr double kFarBelowKnee = 0.85;
// Falls at or above this fraction of the knee's upper end are the knee's
// own edge, not a fall below it.
constexpr double kKneeEdge = 0.97;

// The knee model against the finished points (docs/search.md, "When the
// model does not hold"). With a preemption counter, throughput must rise
// with the batch below the knee. A point below it that falls under a
// smaller one, or the check point (CheckPoint) measuring as high as the
// knee, is a peak below the knee (a host-side cost, a collapse above a
// running-count threshold) or, with a counter that never leaves 0, a silent
// counter (swap instead of recompute). A clear fall (kBreakZ standard
// errors) breaks the model at once; a fall beyond the usual band, or a
// check point the knee's neighbourhood does not beat by two standard errors,
// first wants kMaxDecidingRuns runs of both points (`settle`), which then
// decide. Without a counter the search reads throughput alone anyway:
// nothing to break.
struct ModelCheck {
  std::optional<std::string> broken;  // what the model cannot explain
  std::vector<int64_t> settle;        // points whose repeats decide
  // A check point whose mean is at least the best near the knee's, and the
  // two not settled yet: the model is in doubt.
  bool doubted = false;
};
ModelCheck CheckKneeModel(const SearchSpace& space, const Outcomes& finished, const Reading& r);
// The point that checks the model against the rest of the range once the
// knee is bracketed: the practice's start, or 0.8 of the knee's lower end
// when the start is not well below it; nullopt when no point is below.
std::optional<int64_t> CheckPoint(const SearchSpace& space, const Reading& r);
// Whether the knee's lower end lies further than kFarFromGuess above the
// block-count guess: the guess's arithmetic does not describe this engine,
// and the stretch between the practice's start and the knee is long.
bool FarAboveGuess(const SearchSpace& space, const Reading& r);
// Every point that checks the model, in the order they are measured:
// CheckPoint, and when the knee lies far above the guess, also the middle
// between it and the guess, where the search expected the knee and measured
// nothing: a peak there hides from a check at the practice's start.
std::vector<int64_t> CheckPoints(const SearchSpace& space, const Reading& r);
// "the knee lies 29% below the block-count guess (574)" when it lies
// further than kFarFromGuess from it; "" otherwise or when not located.
std::string FarFromGuess(const SearchSpace& space, const Reading& r);

// The bracket width at which the knee counts as located, near `at`: the
// space's resolution, or a wide round's spacing when that is coarser.
int64_t Resolution(const SearchSpace& space, int64_t at, std::optional<double> wide = std::nullopt);
// Trusted ok points below the cap (infeasible / failed points), by point.
std::vector<std::pair<int64_t, const PointOutcome*>> Trusted(const Outcomes& finished,
                                                             const Reading& r);
// The cap from above: the smallest infeasible or failed point.
int64_t Cap(const Outcomes& finished);
// Whether `o`, measured at `point`, is a trusted ok point below `cap`.
bool TrustedBelow(int64_t point, const PointOutcome& o, int64_t cap);
// The best trusted ok point below the cap, whatever its side of the knee.
std::optional<int64_t> BestPoint(const Outcomes& finished);
// Its mean (0 when there is none): what a fall is judged against.
double BestMean(const Outcomes& finished);

}  // namespace crest::controller::knee
