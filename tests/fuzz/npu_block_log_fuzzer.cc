// The daemon's log lines are read for npuBlockNum
// ("k_caches[0].shape=torch.Size([N, ...])", the executor's "NPU blocks = N")
// and start-up failures; a line is whatever the daemon printed. The input is
// taken as one line for the line parsers, then as a log (split at newlines)
// for StartupLog, READY after its first half, then a first request.
// Invariants: a block count found is positive; a fatal line is no warning;
// StartupLog's state and npu_blocks() agree; a count read is one the log
// printed, and a k_caches count read is never the one-block warm-up cache.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "agent/daemon_output.h"
#include "agent/startup_log.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckAgrees(const crest::agent::StartupLog& log) {
  using crest::agent::BlockNumState;
  const auto blocks = log.npu_blocks();
  const BlockNumState state = log.state();
  CREST_FUZZ_CHECK(blocks.ok() == (state == BlockNumState::kKnown));
  if (blocks.ok()) CREST_FUZZ_CHECK(blocks->count > 0);
  if (state == BlockNumState::kPending) CREST_FUZZ_CHECK(!log.ready());
  if (state == BlockNumState::kNeedsFirstRequest) CREST_FUZZ_CHECK(log.ready());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto blocks = crest::agent::ParseKCacheBlocks(text);
  if (blocks.has_value()) CREST_FUZZ_CHECK(*blocks > 0);
  const auto executor = crest::agent::ParseExecutorNpuBlocks(text);
  if (executor.has_value()) CREST_FUZZ_CHECK(*executor > 0);
  // A fatal line is never a warning.
  if (crest::agent::IsFatalOutOfMemory(text)) {
    CREST_FUZZ_CHECK(crest::agent::LineLogLevel(text) != crest::agent::LogLevel::kWarning);
  }

  std::vector<absl::string_view> lines;
  absl::string_view rest = text;
  for (size_t nl = rest.find('\n'); nl != absl::string_view::npos; nl = rest.find('\n')) {
    lines.push_back(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  lines.push_back(rest);
  crest::agent::StartupLog log;
  std::vector<int64_t> printed;  // every count the log printed
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == lines.size() / 2) log.OnReady();
    log.OnLine(lines[i]);
    if (auto n = crest::agent::ParseKCacheBlocks(lines[i])) printed.push_back(*n);
    if (auto n = crest::agent::ParseExecutorNpuBlocks(lines[i])) printed.push_back(*n);
    CheckAgrees(log);
  }
  log.OnReady();
  CheckAgrees(log);
  log.OnFirstRequestDone(absl::OkStatus());
  CheckAgrees(log);
  if (const auto read = log.npu_blocks(); read.ok()) {
    CREST_FUZZ_CHECK(std::find(printed.begin(), printed.end(), read->count) != printed.end());
    CREST_FUZZ_CHECK(read->count > 1 || read->source == crest::agent::BlockSource::kExecutor);
  }
  return 0;
}
