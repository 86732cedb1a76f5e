// What one line of the serving daemon's output says, taken alone: its log
// level, a KV block count (a `k_caches[0].shape` line, the C++ executor's KV
// cache overview), a warm-up marker, a fatal out-of-memory failure, a config
// error. A line is whatever the daemon printed (real MindIE or mindie-sim;
// tests/data/real/FINDINGS-configs-logs-metrics.md). Which count is the
// serving cache's depends on the lines around it: StartupLog (startup_log.h)
// reads the start-up log as a whole.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace crest::agent {

// The level a line was logged at, from its bracketed prefix ("[INFO]",
// "[WARN]", "[WARNING]", "[error]", ... among the first bracketed tokens:
// MindIE's C++ and Python loggers, the CANN plog, mindie-sim), else from a
// leading "WARNING:"/"ERROR:" word or a Python "...Warning: " text. kNone: no
// level (a traceback line, a plain print).
enum class LogLevel { kNone, kDebug, kInfo, kWarning, kError };
LogLevel LineLogLevel(absl::string_view line);

// "...k_caches[0].shape=torch.Size([2176, 128, 8, 128])" -> 2176; nullopt
// without the text or for a count that is not a positive number. Whether the
// cache is the serving one is StartupLog's question.
std::optional<int64_t> ParseKCacheBlocks(absl::string_view line);

// The C++ executor's count, already the minimum over ranks and net of the
// reserved block: "[Executor::HandleInitResult]: Initialized KV cache
// overview: CPU blocks = X, NPU blocks = Y[, MaxPosEmb = Z]" or the multi-node
// "[Executor::MasterHandleSlaveInitResponse]: Updated KV cache overview from
// slave: ..." -> Y. nullopt without it, for 0 or for the executor's "unset"
// value 4294967295.
std::optional<int64_t> ParseExecutorNpuBlocks(absl::string_view line);

// The line speaks of the warm-up ("---------------end warm_up---------------",
// "warmup_memory(GB):", "One block during warmup needs npu memory(GiB)",
// "warmup params:", "After warmup, peak mem", ...): any case of "warm_up",
// "warmup", "warm-up" or "warm up".
bool IsWarmUpMarker(absl::string_view line);

// The line reports an allocation failure that ends the start: never a
// WARNING (or INFO/DEBUG) line, such as "AclNN attention backend may result
// in NPU out of memory." or the multimodal "npuMemSize set to -1 ... may be
// out of memory" note. An ERROR-level line that says out of memory, or on an
// ERROR line or a line without a level (a traceback's last line) one of
// MindIE's fatal texts: "ErrCode=207001" (rtMalloc: driver error:out of
// memory), "RuntimeError: NPU out of memory", "Warmup failed ... out of
// memory", "Out-of-memory exception occurred during warmup", "Invalid number
// of NPU blocks", "Num_npu_blocks must be non-negative", "Device out of memory
// (OOM)", "Npu out of memory, OOM".
bool IsFatalOutOfMemory(absl::string_view line);

// The line reports a config error: "invalid config", or "error" with
// "config"; never on a WARNING, INFO or DEBUG line (a permission warning on
// config.json is no error) nor on a fatal out-of-memory line (whose advice
// names config.json).
bool IsConfigError(absl::string_view line);

}  // namespace crest::agent
