// config.json is read from the MindIE install and edited in place. The input
// is the file's text. Invariants: reading never crashes; an edit that
// succeeds yields valid JSON holding the new value at its path, and nothing
// else changes.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/config_json_editor.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)crest::agent::ParseMindieConfig(text);
  const std::vector<std::string> path = {"BackendConfig", "ScheduleConfig", "maxBatchSize"};
  const auto edited = crest::agent::ApplyJsonEdits(text, {{path, "435"}});
  if (!edited.ok()) return 0;
  const auto before = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto after = nlohmann::ordered_json::parse(*edited, nullptr, /*allow_exceptions=*/false);
  CREST_FUZZ_CHECK(!after.is_discarded());
  const auto pointer =
      nlohmann::ordered_json::json_pointer("/BackendConfig/ScheduleConfig/maxBatchSize");
  CREST_FUZZ_CHECK(after.contains(pointer) && after.at(pointer) == 435);
  if (!before.is_discarded()) {
    // Only the one value differs.
    auto expected = before;
    expected[pointer] = 435;
    CREST_FUZZ_CHECK(expected == after);
  }
  return 0;
}
