#include "agent/daemon_output.h"

#include <array>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace crest::agent {
namespace {

// Bracketed tokens looked at for a level: "[date] [pid] [tid] [llm] [INFO]"
// puts it fifth, the CANN plog first.
constexpr int kMaxPrefixTokens = 8;

// The executor's npuBlockNum before any rank answered (UINT32_MAX).
constexpr int64_t kExecutorUnset = 4294967295;

LogLevel LevelWord(absl::string_view word) {
  word = absl::StripAsciiWhitespace(word);
  auto is = [&](absl::string_view name) { return absl::EqualsIgnoreCase(word, name); };
  if (is("DEBUG") || is("TRACE")) return LogLevel::kDebug;
  if (is("INFO")) return LogLevel::kInfo;
  if (is("WARN") || is("WARNING")) return LogLevel::kWarning;
  if (is("ERROR") || is("CRITICAL") || is("FATAL")) return LogLevel::kError;
  return LogLevel::kNone;
}

// The positive number of digits that starts `text`, if it fits.
std::optional<int64_t> LeadingCount(absl::string_view text) {
  size_t end = 0;
  while (end < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[end]))) ++end;
  int64_t n = 0;
  if (end == 0 || !absl::SimpleAtoi(text.substr(0, end), &n)) return std::nullopt;
  // A cache of no blocks holds no request: not a size the range can follow from.
  if (n <= 0) return std::nullopt;
  return n;
}

// MindIE's texts of an allocation failure that ends the start (lower case).
constexpr std::array<absl::string_view, 9> kFatalTexts = {
    "errcode=207001",                                  // rtMalloc, driver error:out of memory
    "driver error:out of memory",                      //
    "error: npu out of memory",                        // RuntimeError: NPU out of memory. ...
    "out-of-memory exception occurred during warmup",  // generator.py
    "invalid number of npu blocks",                    // kvcache_pool.py: warm_up out of memory
    "num_npu_blocks must be non-negative",             //
    "device out of memory (oom)",                      // torch >= 2.6
    "npu out of memory, oom",                          // model_cache_pool.py
    "outofmemoryerror:",                               // torch.OutOfMemoryError: ...
};

bool HasFatalText(absl::string_view lower) {
  for (absl::string_view text : kFatalTexts) {
    if (absl::StrContains(lower, text)) return true;
  }
  // The bare RuntimeError text MindIE tests for ("NPU out of memory. ..."),
  // only at the start: the AclNN warning ends with "NPU out of memory.".
  if (absl::StartsWith(lower, "npu out of memory")) return true;
  return absl::StrContains(lower, "warmup failed") && absl::StrContains(lower, "out of memory");
}

bool SaysOutOfMemory(absl::string_view lower) {
  return absl::StrContains(lower, "out of memory") || absl::StrContains(lower, "outofmemory") ||
         absl::StrContains(lower, "out-of-memory");
}

}  // namespace

LogLevel LineLogLevel(absl::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  for (int i = 0; i < kMaxPrefixTokens && absl::StartsWith(rest, "["); ++i) {
    size_t close = rest.find(']');
    if (close == absl::string_view::npos) break;
    LogLevel level = LevelWord(rest.substr(1, close - 1));
    if (level != LogLevel::kNone) return level;
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(close + 1));
  }
  absl::string_view head = absl::StripLeadingAsciiWhitespace(line);
  size_t word_end = head.find_first_of(" :");
  if (word_end != absl::string_view::npos) {
    LogLevel level = LevelWord(head.substr(0, word_end));
    if (level != LogLevel::kNone) return level;
  }
  // Python's warnings module: "file.py:12: UserWarning: ...".
  if (absl::StrContains(line, "Warning: ")) return LogLevel::kWarning;
  return LogLevel::kNone;
}

std::optional<int64_t> ParseKCacheBlocks(absl::string_view line) {
  static constexpr absl::string_view kMarker = "k_caches[0].shape=torch.Size([";
  size_t pos = line.find(kMarker);
  if (pos == absl::string_view::npos) return std::nullopt;
  return LeadingCount(line.substr(pos + kMarker.size()));
}

std::optional<int64_t> ParseExecutorNpuBlocks(absl::string_view line) {
  static constexpr absl::string_view kNpuBlocks = "NPU blocks = ";
  size_t overview = line.find("KV cache overview");
  if (overview == absl::string_view::npos) return std::nullopt;
  size_t pos = line.find(kNpuBlocks, overview);
  if (pos == absl::string_view::npos) return std::nullopt;
  std::optional<int64_t> n = LeadingCount(line.substr(pos + kNpuBlocks.size()));
  if (n && *n >= kExecutorUnset) return std::nullopt;
  return n;
}

bool IsWarmUpMarker(absl::string_view line) {
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "warm_up") || absl::StrContains(lower, "warmup") ||
         absl::StrContains(lower, "warm-up") || absl::StrContains(lower, "warm up");
}

bool IsFatalOutOfMemory(absl::string_view line) {
  LogLevel level = LineLogLevel(line);
  if (level != LogLevel::kError && level != LogLevel::kNone) return false;
  std::string lower = absl::AsciiStrToLower(absl::StripLeadingAsciiWhitespace(line));
  if (HasFatalText(lower)) return true;
  return level == LogLevel::kError && SaysOutOfMemory(lower);
}

bool IsConfigError(absl::string_view line) {
  LogLevel level = LineLogLevel(line);
  if (level != LogLevel::kError && level != LogLevel::kNone) return false;
  if (IsFatalOutOfMemory(line)) return false;
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "invalid config") ||
         (absl::StrContains(lower, "error") && absl::StrContains(lower, "config"));
}

}  // namespace crest::agent
