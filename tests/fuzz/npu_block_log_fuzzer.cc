// The daemon's log lines are read for npuBlockNum
// ("k_caches[0].shape=torch.Size([N, ...])"); a line is whatever the daemon
// printed. Invariant: a block count found is positive.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/daemon_supervisor.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const auto blocks = crest::agent::ParseKCacheBlocks(line);
  if (blocks.has_value()) CREST_FUZZ_CHECK(*blocks > 0);
  return 0;
}
