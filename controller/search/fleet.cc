#include "controller/search/fleet.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/trial_kind.h"
#include "controller/search/node_slot.h"
#include "controller/search/rate_search.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

std::vector<FleetNodeRuns> FleetNodes(const std::vector<crest::v1::Trial>& trials,
                                      const std::string& model,
                                      const crest::v1::TrialParameters& final_parameters,
                                      const std::vector<std::string>& nodes) {
  std::vector<FleetNodeRuns> out;
  auto at = [&](const std::string& node) -> FleetNodeRuns& {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const FleetNodeRuns& n) { return n.node == node; });
    if (it != out.end()) return *it;
    FleetNodeRuns added;
    added.node = node;
    out.push_back(std::move(added));
    return out.back();
  };
  for (const std::string& n : nodes) at(n);
  for (const auto& t : trials) {
    if (t.model() != model || t.rate_search() ||
        !SameServerConfig(t.parameters(), final_parameters)) {
      continue;
    }
    FleetNodeRuns& n = at(ParseNodeSlot(t.node()).node);
    if (!t.confirmation()) {
      n.searched = true;
    } else if (t.status() == crest::v1::TRIAL_RUNNING || t.status() == crest::v1::TRIAL_PENDING) {
      n.running = true;
      continue;
    } else {
      ++n.confirmations;
      if (t.status() == crest::v1::TRIAL_OK) n.confirmed = true;
    }
    if (OkAndTrusted(t)) {
      n.generate_speed += t.result().generate_speed();
      ++n.runs;
    } else if (t.status() == crest::v1::TRIAL_OK) {
      n.reason = absl::StrCat("flagged: ", absl::StrJoin(t.flags(), ", "));
    } else if (IsFinal(t.status())) {
      n.reason = absl::StrCat(crest::v1::TrialStatus_Name(t.status()),
                              t.reason().empty() ? "" : ": ", t.reason());
    }
  }
  for (FleetNodeRuns& n : out) {
    if (n.runs > 0) {
      n.generate_speed /= n.runs;
      n.reason.clear();
    } else if (n.running) {
      n.reason = "confirming now";
    } else if (n.reason.empty()) {
      n.reason = "not run yet";
    }
  }
  return out;
}

bool NeedsConfirmation(const FleetNodeRuns& n, int max_attempts) {
  return !n.searched && !n.running && !n.confirmed &&
         static_cast<int>(n.confirmations) < max_attempts;
}

}  // namespace crest::controller
