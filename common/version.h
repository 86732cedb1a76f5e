// The version every Crest binary and the agent's NodeInfo report.
#pragma once

namespace crest {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace crest
