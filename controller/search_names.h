// The names `search.strategy` accepts. Header-only so that spec validation
// (linked by the CLI) knows them without linking the strategies themselves.
#pragma once

#include <string>
#include <vector>

namespace crest::controller {

// The strategy used when `search.strategy` is absent (docs/search.md).
inline constexpr char kDefaultStrategy[] = "knee";

// "step" is the practice's ladder under its first name, kept as an alias.
inline std::vector<std::string> KnownStrategies() { return {"knee", "practice", "step", "grid"}; }

}  // namespace crest::controller
