#include "agent/startup_log.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

#include "agent/daemon_output.h"

namespace crest::agent {
namespace {

constexpr absl::string_view kReadyLine = "Daemon start success!";

// Bracketed tokens looked at for the pid: "[date] [pid] [tid] [llm] ...".
constexpr int kPidTokens = 3;

// The process that printed the line: the first all-digit bracketed token of
// its prefix ("[2025-02-10 10:55:23,153] [2687] [281473644918960] [llm] ..."
// -> "2687"); "" when there is none.
std::string LinePid(absl::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  for (int i = 0; i < kPidTokens && absl::StartsWith(rest, "["); ++i) {
    size_t close = rest.find(']');
    if (close == absl::string_view::npos) break;
    absl::string_view token = rest.substr(1, close - 1);
    if (!token.empty() && std::all_of(token.begin(), token.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return std::string(token);
    }
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(close + 1));
  }
  return "";
}

std::string WarmUpNote(const std::vector<int64_t>& warm_up) {
  if (warm_up.empty()) return "";
  return absl::StrCat(" (warm-up caches of ", absl::StrJoin(warm_up, ", "),
                      " blocks seen and ignored)");
}

constexpr absl::string_view kFix =
    "set MINDIE_LOG_TO_STDOUT=1 and MINDIE_LOG_LEVEL=INFO (the agent sets both unless the "
    "daemon's env in its config says otherwise) so the executor prints "
    "\"[Executor::HandleInitResult]: Initialized KV cache overview: ... NPU blocks = N\"; "
    "MINDIE_LOG_LEVEL=DEBUG for models that log k_caches[0].shape at debug level only; or give "
    "the model an explicit search.range";

}  // namespace

absl::string_view BlockSourceName(BlockSource source) {
  switch (source) {
    case BlockSource::kExecutor:
      return "executor KV cache overview";
    case BlockSource::kKCachesFirstForward:
      return "k_caches shape at the first forward pass";
    case BlockSource::kKCachesBeforeReady:
      return "k_caches shape before ready";
  }
  return "unknown";
}

absl::string_view BlockNumStateName(BlockNumState state) {
  switch (state) {
    case BlockNumState::kPending:
      return "pending";
    case BlockNumState::kKnown:
      return "known";
    case BlockNumState::kNeedsFirstRequest:
      return "needs a first request";
    case BlockNumState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

void StartupLog::OnLine(absl::string_view line) {
  if (absl::StrContains(line, kReadyLine)) {
    OnReady();
    return;
  }
  if (!ready_) {
    if (!fatal_oom_ && IsFatalOutOfMemory(line)) fatal_oom_ = std::string(line);
    if (!config_error_ && IsConfigError(line)) config_error_ = std::string(line);
  }
  if (std::optional<int64_t> n = ParseExecutorNpuBlocks(line)) {
    // The multi-node master may lower it as slaves answer: keep the minimum.
    executor_ = executor_ ? std::min(*executor_, *n) : *n;
    return;
  }
  if (std::optional<int64_t> n = ParseKCacheBlocks(line)) {
    OnKCaches(line, *n);
    return;
  }
  if (!ready_ && IsWarmUpMarker(line)) DemotePending();
}

void StartupLog::OnKCaches(absl::string_view line, int64_t blocks) {
  if (ready_) {
    if (blocks == 1) {
      warm_up_.push_back(blocks);
    } else {
      after_ready_ = after_ready_ ? std::min(*after_ready_, blocks) : blocks;
    }
    return;
  }
  std::string pid = LinePid(line);
  auto it = pending_.find(pid);
  // The same process with a cache of another size replaced its cache, and a
  // one-block cache is a warm-up's: either way the pending one was a warm-up
  // cache too.
  if ((it != pending_.end() && it->second != blocks) || (blocks == 1 && PendingLeast() > 1)) {
    DemotePending();
  }
  int64_t& slot = pending_.try_emplace(pid, blocks).first->second;
  slot = std::min(slot, blocks);
}

int64_t StartupLog::PendingLeast() const {
  int64_t least = 0;
  for (const auto& [pid, blocks] : pending_) least = least == 0 ? blocks : std::min(least, blocks);
  return least;
}

void StartupLog::DemotePending() {
  if (pending_.empty()) return;
  warm_up_.push_back(PendingLeast());
  pending_.clear();
}

void StartupLog::OnReady() {
  if (ready_) return;
  ready_ = true;
  if (pending_.empty()) return;
  int64_t least = PendingLeast();
  pending_.clear();
  // A cache of one block is the warm-up's, whatever follows it.
  if (least == 1) {
    warm_up_.push_back(least);
  } else {
    before_ready_ = least;
  }
}

void StartupLog::OnFirstRequestDone(const absl::Status& request) {
  first_request_done_ = true;
  first_request_ = request;
}

BlockNumState StartupLog::state() const {
  if (executor_ || after_ready_) return BlockNumState::kKnown;
  if (!ready_) return BlockNumState::kPending;
  if (before_ready_) return BlockNumState::kKnown;
  return first_request_done_ ? BlockNumState::kUnknown : BlockNumState::kNeedsFirstRequest;
}

absl::StatusOr<NpuBlocks> StartupLog::npu_blocks() const {
  // The executor's figure is net of the reserved block; npuBlockNum counts it.
  if (executor_) return NpuBlocks{*executor_ + 1, BlockSource::kExecutor};
  if (after_ready_) return NpuBlocks{*after_ready_, BlockSource::kKCachesFirstForward};
  switch (state()) {
    case BlockNumState::kKnown:
      return NpuBlocks{*before_ready_, BlockSource::kKCachesBeforeReady};
    case BlockNumState::kPending:
      return absl::UnavailableError(
          absl::StrCat("npuBlockNum not read yet: the daemon is not ready", WarmUpNote(warm_up_)));
    case BlockNumState::kNeedsFirstRequest:
      return absl::FailedPreconditionError(absl::StrCat(
          "npuBlockNum is not in the start-up log", WarmUpNote(warm_up_),
          ": the serving KV cache is only logged at the first forward pass; send one short "
          "request, then read the k_caches[0].shape line it prints"));
    case BlockNumState::kUnknown:
      return absl::NotFoundError(UnknownReason());
  }
  return absl::InternalError("npuBlockNum: unhandled state");
}

std::string StartupLog::UnknownReason() const {
  std::string why;
  if (!first_request_.ok()) {
    why = absl::StrCat("the first request after READY failed (", first_request_.message(),
                       "), so the serving KV cache was never logged");
  } else if (!warm_up_.empty()) {
    why = absl::StrCat("only warm-up caches were logged (k_caches[0].shape of ",
                       absl::StrJoin(warm_up_, ", "),
                       " blocks), not the serving cache, even after a first request");
  } else {
    why =
        "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line, even after a "
        "first request";
  }
  return absl::StrCat("npuBlockNum unknown: ", why, "; ", kFix);
}

StartFailureCause StartupLog::ExitBeforeReadyCause() const {
  if (fatal_oom_) return StartFailureCause::kOutOfMemory;
  if (config_error_) return StartFailureCause::kInvalidConfig;
  return StartFailureCause::kExited;
}

}  // namespace crest::agent
