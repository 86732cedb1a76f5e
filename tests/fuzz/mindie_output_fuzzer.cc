// The printed output of MindIE's benchmark tool, which the agent parses into
// a result. Invariants: parsing never crashes, and a parsed result has no
// negative or non-finite speeds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "loadgen/mindie_adapter.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view output(reinterpret_cast<const char*>(data), size);
  const auto result = crest::loadgen::ParseMindieBenchmarkOutput(output);
  if (!result.ok()) return 0;
  CREST_FUZZ_CHECK(std::isfinite(result->generate_speed()) && result->generate_speed() >= 0);
  CREST_FUZZ_CHECK(std::isfinite(result->generate_speed_per_client()) &&
                   result->generate_speed_per_client() >= 0);
  return 0;
}
