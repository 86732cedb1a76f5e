// Campaign specs are YAML from users. Invariants: parsing never throws or
// crashes, and a spec that validates cleanly parses to the same campaign again
// from its own text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "controller/campaign_io/spec_parser.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  const auto first = crest::controller::ParseAndValidateCampaignSpec(yaml);
  const auto second = crest::controller::ParseAndValidateCampaignSpec(yaml);
  // Parsing is a pure function of the text.
  CREST_FUZZ_CHECK(first.problems.size() == second.problems.size());
  CREST_FUZZ_CHECK(first.spec.ShortDebugString() == second.spec.ShortDebugString());
  for (const auto& problem : first.problems) CREST_FUZZ_CHECK(!problem.message.empty());
  return 0;
}
