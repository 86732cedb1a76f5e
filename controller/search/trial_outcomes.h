// Pure functions over a campaign's trial records: what each (point, repeat)
// came to, which points are finished for the search, the best configuration,
// the parameters of the next trial, and the time-scale correction of
// simulated nodes. They read nothing but their arguments, so the scheduler,
// the progress view, the report and a restarted controller agree on them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controller/search/node_effects.h"
#include "controller/search/search.h"
#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// Whether `t` ended ok and no trust check flagged it: a run whose figure
// counts as evidence.
inline bool OkAndTrusted(const crest::v1::Trial& t) {
  return t.status() == crest::v1::TRIAL_OK && t.flags_size() == 0;
}

// What the trials of one (point, repeat) came to so far.
struct RepeatOutcome {
  int attempts = 0;
  bool ok = false;
  bool running = false;
  bool infeasible = false;
  bool failed = false;
  double speed = 0;
  std::string reason;
  // From the ok run: the daemon's preemption count (nullopt: not published)
  // and whether a trust flag marks it (docs/search.md).
  std::optional<int64_t> preemptions;
  bool untrusted = false;
  // Other jobs that ran beside the ok run on its node, at most.
  uint32_t neighbours = 0;
  // The node of the ok run.
  std::string node;
};

// (maxBatchSize, repeat).
using RepeatKey = std::pair<int64_t, uint32_t>;

// The outcomes of the search trials (or only the calibration trials) of
// `model`; rate-search runs are never among them.
// A repeat whose `max_attempts` were all interrupted counts as failed.
std::map<RepeatKey, RepeatOutcome> RepeatOutcomes(const std::vector<crest::v1::Trial>& trials,
                                                  const std::string& model, bool calibration,
                                                  int max_attempts);

// How a point's repeats are walked, in repeat order as the planner launches
// them. A flagged run (ok but untrusted: a client-bound crest-bench measured
// the client, not the server) may be passed over, the next repeat making it
// up; the others count, whether ended, running or not yet started.
struct RepeatWalk {
  uint32_t runs = 1;  // repeats that must count
  // Among the first `base_runs` counted, at most `makeups` flagged runs are
  // passed over; once they are spent, a flagged run counts. Beyond
  // `base_runs`, a flagged run is always passed over.
  uint32_t base_runs = 1;
  uint32_t makeups = 0;
  uint32_t max_repeats = 0;  // repeats walked at most; 0: no bound
};
struct WalkedRepeats {
  // (repeat, its outcome: RepeatOutcome{} when it never started), in repeat order; fewer
  // than `runs` only when max_repeats ended the walk.
  std::vector<std::pair<uint32_t, RepeatOutcome>> counted;
  uint32_t passed_over = 0;  // flagged runs made up by a later repeat
};
// The one walk over a point's repeats: the search's base runs
// (BaseRunsEnded), the planner's launches and the calibration's verdict
// differ only in the knobs they pass.
WalkedRepeats WalkRepeats(const std::map<RepeatKey, RepeatOutcome>& outcomes, int64_t point,
                          const RepeatWalk& walk);

// Whether `point` has its `repeats` base runs: walked with at most `makeups`
// flagged runs made up (WalkRepeats), each counted run has ended.
bool BaseRunsEnded(const std::map<RepeatKey, RepeatOutcome>& outcomes, int64_t point,
                   uint32_t repeats, uint32_t makeups);

// The make-ups (BaseRunsEnded) a flagged base run of a model's search gets:
// `max_retries` while the model's ended search runs are fewer than
// `max_trials`, none after, so make-ups never carry a search past its budget
// (a point still waiting for one then counts as measured, untrusted). The
// planner and the report pass the same value, so they agree on the points.
uint32_t SearchMakeups(const std::map<RepeatKey, RepeatOutcome>& outcomes, uint32_t max_trials,
                       uint32_t max_retries);

// Point -> outcome for every point whose base runs ended (BaseRunsEnded;
// runs a strategy asked for beyond them count once they end); a point with
// an infeasible repeat is infeasible, else one with a failed repeat failed, else
// its objective is the mean speed over its unflagged ok runs (over all its
// ok runs, marked untrusted, when every one is flagged). With `node_noise`
// (a run's relative noise) above 0, each unflagged run's speed is divided by
// its node's factor first (node_effects.h): points compare as if measured on
// one node.
std::map<int64_t, PointOutcome> FinishedPoints(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                               uint32_t repeats, double node_noise = 0,
                                               uint32_t makeups = 0);

// The same, each unflagged run's speed divided by its node's factor in
// `factors` (NodeFactorsOf): for a caller that reports the factors too, so
// they are computed once.
std::map<int64_t, PointOutcome> FinishedPoints(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                               uint32_t repeats,
                                               const std::map<std::string, NodeFactor>& factors,
                                               uint32_t makeups);

// Node -> factor (node_effects.h) from the unflagged ok runs of `outcomes`, for
// a run's relative noise `noise`; none when `noise` is 0: points then compare
// as measured.
std::map<std::string, NodeFactor> NodeFactorsOf(const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                                double noise);

// Best configuration of a model from its ok search trials: the
// point whose mean GenerateSpeed over repeats is highest (nullopt: none ok),
// with its unflagged runs, marked `untrusted` when every run at it is flagged.
std::optional<crest::v1::BestConfig> BestOf(const std::vector<crest::v1::Trial>& trials,
                                            const std::string& model);

// The answer of the campaign's strategy for `model` from its recorded trials
// (SearchStrategy::Best), with the noise and confidence the report states,
// and with the select-batch calibration when it was kept (its parameters and
// its measured throughput); BestOf when the strategy has none (every run
// flagged).
std::optional<crest::v1::BestConfig> ChosenBest(const StoredCampaign& stored,
                                                const std::string& model);

// Search rounds of `model` so far: a trial's round is one more than the
// highest round among the model's search trials that had finished when it
// started (the calibration and rate runs after the search do not count).
uint32_t Rounds(const std::vector<crest::v1::Trial>& trials, const std::string& model);

// A measured latency as a select-batch time config.json accepts: whole
// milliseconds within MindIE's range.
double SelectBatchTimeMs(double measured_ms);

// Whether `agent` may run trials of `model`: listed in its nodes, or (with no
// list) carrying every label of its selector.
bool Matches(const crest::v1::ModelSpec& model, const crest::v1::AgentInfo& agent);

// What a restart makes of the recorded trials of a campaign: those a dead
// controller left unfinished are interrupted at `now` (and returned, to be
// recorded), since a result that was not recorded is never trusted.
std::vector<crest::v1::Trial> InterruptUnfinished(std::vector<crest::v1::Trial>* trials,
                                                  const google::protobuf::Timestamp& now);
// The number after the highest of the trial ids ("c1-t7" -> 8); 1 for none.
int64_t NextTrialNumber(const std::vector<crest::v1::Trial>& trials);

// Divides throughputs by `scale` and multiplies latencies and the duration by
// it: the figures the simulated hardware would show in real time.
void NormalizeTimeScale(crest::v1::BenchmarkResult* result, double scale);

}  // namespace crest::controller
