// CPU lists arrive from the wire (PinningPolicy.cpu_list) and from sysfs.
// Invariants: a parsed list is ascending and unique, and formatting it gives
// text that parses back to the same list.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/cpu_list.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cpus = crest::ParseCpuList(absl::string_view(text.data(), text.size()));
  if (!cpus.ok()) return 0;
  for (size_t i = 1; i < cpus->size(); ++i) CREST_FUZZ_CHECK((*cpus)[i - 1] < (*cpus)[i]);
  auto again = crest::ParseCpuList(crest::FormatCpuList(*cpus));
  CREST_FUZZ_CHECK(again.ok() && *again == *cpus);
  return 0;
}
