// Where the knee search (search_knee.cc) measures next: while it brackets
// the knee (on preemptions, or a throughput drop) or the peak (on
// throughput alone), and which measured points rival its answer and so
// earn a deciding repeat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/search/knee_reading.h"
#include "controller/search/search.h"

namespace crest::controller::knee {

// The next points to measure, k at most, while the knee is not bracketed
// to the resolution; empty when it is (or the range is exhausted). `wide`:
// the spacing of a wide search (WideSpacing), which also sets its steps out
// and its resolution.
std::vector<int64_t> Probes(const SearchSpace& space, const Outcomes& finished, const Reading& r,
                            size_t k, std::optional<double> wide, std::string* why_done);

// Points of the coarse scan on throughput alone when no block count
// predicts where the peak lies (SearchSpace::knee_guess 0).
constexpr size_t kScanPoints = 6;
// Throughput alone brackets the peak to this fraction of maxBatchSize at
// best: closer, neighbours differ by less than one run's noise.
constexpr double kPeakResolution = 0.03;
// A bracket at most this fraction of maxBatchSize wide whose neighbours lie
// within one standard error of the best is level: the search ends there.
constexpr double kLevelBracket = 0.2;

// Throughput alone: the peak lies between the neighbours of the best mean
// (unimodality). Without a guess, a coarse scan of the range first. Step
// out from the best while it has no neighbour on a side, doubling; then
// split the sides (one node: the higher neighbour's) until both neighbours
// lie within the resolution, or the bracket is narrow and level with the
// best (kLevelBracket), and no side reads level with the best throughout.
std::vector<int64_t> PeakProbes(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, size_t k, std::string* why_done);

// On throughput alone: the best other point the noise band cannot tell
// from `best`, if any.
std::optional<int64_t> RunnerUp(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, int64_t best);

// The points measured once (trusted, below the cap) whose mean the noise
// band cannot tell from `answer`'s, or with `any` every such point, the
// highest mean first.
std::vector<int64_t> Rivals(const SearchSpace& space, const Outcomes& finished, int64_t answer,
                            bool any);

// Measurements overrule the model and the knee rule: the point whose mean
// beats `chosen`'s by more than the noise band, the best such, is the
// answer. The model cannot see everything a run measures (a benchmark of
// few requests per client, whose last wave fills the batch only at some
// sizes, is the e2e test's case: +6% between two neighbours).
int64_t MeasuredBetter(const SearchSpace& space, const Outcomes& finished, int64_t chosen);

}  // namespace crest::controller::knee
