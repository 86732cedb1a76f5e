// The names `search.strategy` accepts. Header-only so that spec validation
// (linked by the CLI) knows them without linking the strategies themselves.
#pragma once

#include <string>
#include <vector>

namespace crest::controller {

inline std::vector<std::string> KnownStrategies() { return {"step"}; }

}  // namespace crest::controller
