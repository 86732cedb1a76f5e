// The scheduling policy for one model of a campaign, as a pure function of
// what is recorded and what runs: probe for npuBlockNum, end the search, or
// start which (point, repeat) attempts; once the search is over, the
// calibration runs at its answer and the rate search (after_search.h). The
// campaign manager carries the plan out on free nodes and records it; a
// restarted controller plans the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

#include "controller/search/search.h"
#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// One trial to start.
struct PlannedTrial {
  crest::v1::TrialParameters parameters;
  uint32_t repeat = 0;
  bool calibration = false;
  // A run of the rate search: it reuses the daemon of the run before it.
  bool rate_search = false;
  // A fleet's confirmation: the final configuration on a node the search did
  // not measure it on.
  bool confirmation = false;
  uint32_t attempt = 1;
  // Nodes that measured this point already: a repeat goes to another node
  // when one is free, so that a final answer is confirmed on a second node.
  std::vector<std::string> measured_on;
  // Nodes to run on first when one is free: a calibration runs where its
  // answer was measured, so that before and after compare on one node.
  std::vector<std::string> prefer_on;
  // When set, the only nodes it may run on (a confirmation's node).
  std::vector<std::string> only_on;
};

struct ModelPlan {
  // The model's search is over, for this reason (to be recorded).
  std::optional<std::string> done_reason;
  // Start the npuBlockNum probe on the first free node.
  bool probe = false;
  // Trials to start, in order, one per free node.
  std::vector<PlannedTrial> trials;
  // Nothing of the model runs and nothing will be started: it is finished.
  bool finished = false;
};

// The record of `planned` as it starts: trial `number` of `campaign` (id
// "c1-t<number>"), running on `node_slot` (node_slot.h: its node and slot) since `now`.
crest::v1::Trial StartedTrial(const PlannedTrial& planned, const std::string& campaign,
                              const std::string& model, const std::string& node_slot,
                              int64_t number, const google::protobuf::Timestamp& now);

// `state`: the model's recorded search state; `trials`: the campaign's;
// `running`: the model's jobs running now; `free_nodes`: how many free,
// ready, eligible nodes there are; `probe_failures`: failed probes so far;
// `node_slots`: how many node_slots the model's eligible agents have, busy or not
// (EligibleNodeSlots): a round of the search proposes at most that many points
// and at most `parallel`, so that one round is measured at once.
// `fleet_nodes`: the ready eligible nodes of a fleet model (ModelSpec.fleet),
// each confirmed at the final configuration once the search is over.
ModelPlan PlanModel(const crest::v1::CampaignSpec& spec, const crest::v1::ModelSpec& model,
                    const ModelState& state, const std::vector<crest::v1::Trial>& trials,
                    const SearchStrategy& strategy, int running, size_t free_nodes,
                    int probe_failures, size_t node_slots = std::numeric_limits<size_t>::max(),
                    const std::vector<std::string>& fleet_nodes = {});

// The node_slots of the ready agents `model` may use, busy or not: their slots,
// or their nodes when the model is exclusive (one job per node).
size_t EligibleNodeSlots(const crest::v1::ModelSpec& model,
                         const std::vector<crest::v1::AgentInfo>& agents);

// The node_slots (node_slot.h) that may run a job of `model` now: the slots, not
// `busy`, of ready, eligible (Matches) nodes, in the order the model lists the
// nodes, else in the agents' order; every node's slot 0 first, then every
// node's slot 1, and so on.
std::vector<std::string> FreeEligibleNodes(const crest::v1::ModelSpec& model,
                                           const std::vector<crest::v1::AgentInfo>& agents,
                                           const std::function<bool(const std::string&)>& busy);

// INVALID_ARGUMENT naming, per model, the values of `spec` that no agent
// eligible for it accepts (spec_limits.h); every known agent counts, in any
// state, since a lost one may come back. OK when each model can run.
absl::Status CheckAgentLimits(const crest::v1::CampaignSpec& spec,
                              const std::vector<crest::v1::AgentInfo>& agents);

// Of `free_node_slots` (node_slot.h keys) not `taken` yet, the first whose node
// `accepts` the run, preferring a node not in `measured_on` and, when
// `prefer_on` has any, one in it; marks it taken. nullopt when no free node_slot
// accepts it. AssignNodes' rule for one trial, which search-bench plays too.
std::optional<size_t> PickNodeSlot(const std::vector<std::string>& free_node_slots,
                                   std::vector<bool>& taken,
                                   const std::vector<std::string>& measured_on,
                                   const std::vector<std::string>& prefer_on,
                                   absl::FunctionRef<bool(const std::string& node)> accepts);

// The node for each of `trials`, in order: the first of `free_nodes` not
// taken yet whose agent accepts the trial's point, preferring one not in its
// `measured_on` and, when it has any, one in its `prefer_on`, or "" when
// none does (the trial waits for a node that accepts it).
std::vector<std::string> AssignNodes(const crest::v1::CampaignSpec& spec,
                                     const std::vector<PlannedTrial>& trials,
                                     const std::vector<std::string>& free_nodes,
                                     const std::vector<crest::v1::AgentInfo>& agents);

}  // namespace crest::controller
