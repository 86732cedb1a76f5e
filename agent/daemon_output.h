// What the serving daemon's output lines say to its supervisor
// (daemon_supervisor.h): npuBlockNum from the `k_caches[0].shape` line, an
// out-of-memory failure, a config error. A line is whatever the daemon
// printed (real MindIE or mindie-sim; mindie-facts.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace crest::agent {

// "...k_caches[0].shape=torch.Size([2176, 128, 8, 128])" -> 2176; nullopt
// without the line or for a count that is not a positive number.
std::optional<int64_t> ParseKCacheBlocks(const std::string& line);
// The line reports that memory ran out (any case, "out of memory" or "OutOfMemory").
bool IsOutOfMemory(const std::string& line);
// The line reports a config error: "invalid config", or "error" with "config".
bool IsConfigError(const std::string& line);

}  // namespace crest::agent
