// Where a job runs: one daemon slot of a node (the agent's `slots:`). The
// scheduler names a node_slot by a string: the node alone for slot 0, so that a
// node without slots schedules, reports and logs as before, and "node#k" for
// slot k (node names are host names: never a '#').
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace crest::controller {

struct NodeSlot {
  std::string node;
  uint32_t slot = 0;
};

inline std::string NodeSlotKey(const std::string& node, uint32_t slot) {
  return slot == 0 ? node : absl::StrCat(node, "#", slot);
}

inline NodeSlot ParseNodeSlot(const std::string& key) {
  const size_t hash = key.rfind('#');
  uint32_t slot = 0;
  if (hash == std::string::npos || !absl::SimpleAtoi(key.substr(hash + 1), &slot)) return {key, 0};
  return {key.substr(0, hash), slot};
}

// The slots an agent runs: at least one (an older agent reports none).
inline uint32_t SlotsOf(uint32_t reported) { return reported == 0 ? 1 : reported; }

}  // namespace crest::controller
