// A fleet (ModelSpec.fleet): the model's search runs on a few of its nodes;
// once it is over, the final configuration runs once on every other node,
// so each node of the fleet has its own figure at the answer for the cost of
// one round. A pure function of the recorded trials, as the search is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// One node of a fleet at the final configuration.
struct FleetNodeRuns {
  std::string node;
  double generate_speed = 0;  // mean of its trusted ok runs there
  uint32_t runs = 0;
  bool searched = false;       // the search (or the calibration) measured it here
  bool running = false;        // a confirmation runs there now
  uint32_t confirmations = 0;  // confirmation attempts that ended
  bool confirmed = false;      // a confirmation ended ok (trusted or not)
  std::string reason;          // why it has no figure
};

// `nodes` (their order kept), then any other node that ran `model`'s trials
// at `final_parameters`, with what they measured there.
std::vector<FleetNodeRuns> FleetNodes(const std::vector<crest::v1::Trial>& trials,
                                      const std::string& model,
                                      const crest::v1::TrialParameters& final_parameters,
                                      const std::vector<std::string>& nodes);

// Whether `n` still needs a confirmation run, given `max_attempts` per node.
bool NeedsConfirmation(const FleetNodeRuns& n, int max_attempts);

}  // namespace crest::controller
