// The search strategies by kind and the names `search.strategy` accepts: the
// one table both spec validation and MakeStrategy (search.h) read.
// Header-only and free of the strategies' code, so that spec validation
// (linked by the CLI) knows the names without linking the strategies.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crest::controller {

// Every strategy MakeStrategy builds; a new kind is a case there (the
// compiler flags a missing one) and a name here.
enum class StrategyKind {
  kKnee,      // Crest's default: brackets the KV-cache knee
  kPractice,  // the practice's ascending ladder
  kGrid,      // brute force, as a reference
};

struct StrategyName {
  std::string_view name;
  StrategyKind kind;
};

// Every name `search.strategy` accepts, in the order docs/search.md lists
// them. "step" is the practice's ladder under its first name, kept as an alias.
inline constexpr std::array<StrategyName, 4> kStrategyNames = {{
    {"knee", StrategyKind::kKnee},
    {"practice", StrategyKind::kPractice},
    {"step", StrategyKind::kPractice},
    {"grid", StrategyKind::kGrid},
}};

// The kind a name stands for; nullopt for a name not in the table.
constexpr std::optional<StrategyKind> StrategyKindOf(std::string_view name) {
  for (const StrategyName& entry : kStrategyNames) {
    if (entry.name == name) return entry.kind;
  }
  return std::nullopt;
}

// The strategy used when `search.strategy` is absent (docs/search.md).
inline constexpr char kDefaultStrategy[] = "knee";
static_assert(StrategyKindOf(kDefaultStrategy) == StrategyKind::kKnee,
              "the default strategy must be a name of the table");

// The accepted names, in the table's order (for messages and did-you-mean).
inline std::vector<std::string> KnownStrategies() {
  std::vector<std::string> names;
  names.reserve(kStrategyNames.size());
  for (const StrategyName& entry : kStrategyNames) names.emplace_back(entry.name);
  return names;
}

}  // namespace crest::controller
