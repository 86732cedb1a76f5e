// Reads the serving daemon's start-up log, line by line in order, for what
// the supervisor needs from it: npuBlockNum of the serving KV cache (never a
// warm-up cache's) with where it came from, and whether the start failed for
// lack of memory or for a config error. Pure: the supervisor feeds it lines
// and events, there is no I/O and no clock. One StartupLog per daemon start.
//
// Where MindIE prints the serving cache's size (FINDINGS-configs-logs-metrics.md):
// - the C++ executor's "[Executor::HandleInitResult]: Initialized KV cache
//   overview: CPU blocks = X, NPU blocks = Y[, MaxPosEmb = Z]" (multi-node:
//   "...Updated KV cache overview from slave: ..."), at INFO before READY; Y is
//   the minimum over ranks, net of the reserved block;
// - a `k_caches[0].shape=torch.Size([N, ...])` line (Python, INFO; some models
//   log it at DEBUG only), printed whenever the model sees a new cache: the
//   warm-up cache during the warm-up (one block in current MindIE-LLM, a small
//   one in older builds: 24 blocks in a real 1.0 capture, before `end warm_up`),
//   and the serving cache at its first forward pass, i.e. at the first request
//   after READY. mindie-sim prints one line with the real count before READY.
//   N counts the reserved block too.
//
// The rule for k_caches lines (it holds for every log of
// tests/data/real/daemon-log/ and for mindie-sim):
// 1. A cache of one block is the warm-up cache, always.
// 2. After READY ("Daemon start success!" or OnReady()) a k_caches line is the
//    serving cache (the first forward pass); the minimum over such lines.
// 3. Before READY, k_caches lines collect into a pending group (the minimum
//    over ranks). The group is the warm-up cache when a warm-up marker
//    (IsWarmUpMarker: "end warm_up", "warmup_memory(GB)", "After warmup", ...)
//    or a one-block cache follows it before READY, or when the same process
//    (the log's pid) then logs a cache of another size (it replaced its cache:
//    the earlier one was the warm-up's). A group still pending at READY is the
//    serving cache (mindie-sim; builds that size the cache before READY).
// Authority: the executor's line, then a k_caches line after READY, then a
// pending group taken at READY. With none of them at READY the state is
// kNeedsFirstRequest: the supervisor sends one short request, feeds the lines
// that follow, then calls OnFirstRequestDone(); still nothing is kUnknown
// with a reason that names the fix. A late line still counts: the state
// follows whatever has been read so far.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace crest::agent {

// Where npuBlockNum was read.
enum class BlockSource {
  kExecutor,             // the executor's "NPU blocks = Y" (net of the reserved block: Y + 1)
  kKCachesFirstForward,  // a k_caches shape after READY (its first dimension)
  kKCachesBeforeReady,   // a k_caches shape before READY that no warm-up marker followed
};
absl::string_view BlockSourceName(BlockSource source);

struct NpuBlocks {
  // npuBlockNum as the practice reads it: the first dimension of the serving
  // k_caches[0].shape, the reserved block included (the executor's figure
  // plus one).
  int64_t count = 0;
  BlockSource source = BlockSource::kExecutor;
};

enum class BlockNumState {
  kPending,            // the daemon is not ready and no executor line was read yet
  kKnown,              // npu_blocks() has the count
  kNeedsFirstRequest,  // ready, the serving cache not logged yet: send one short request
  kUnknown,            // the first request did not make it appear: npu_blocks() says why
};
absl::string_view BlockNumStateName(BlockNumState state);

// Why a daemon that exited before READY failed.
enum class StartFailureCause { kExited, kOutOfMemory, kInvalidConfig };

class StartupLog {
 public:
  // One line of the daemon's stdout+stderr, without its newline. The line
  // "Daemon start success!" is READY.
  void OnLine(absl::string_view line);
  // The daemon is ready (its success line, or /v2/health/ready); idempotent.
  void OnReady();
  // The short request sent in kNeedsFirstRequest has finished (`request` is
  // its outcome) and its output lines were fed.
  void OnFirstRequestDone(const absl::Status& request);

  BlockNumState state() const;
  // kKnown: the count. Else kPending: Unavailable; kNeedsFirstRequest:
  // FailedPrecondition (send a short request); kUnknown: NotFound with the
  // reason and the fix.
  absl::StatusOr<NpuBlocks> npu_blocks() const;
  bool ready() const { return ready_; }
  // First dimensions of the caches judged warm-up, in order (the least over
  // the ranks of each).
  const std::vector<int64_t>& warm_up_blocks() const { return warm_up_; }

  // The first fatal out-of-memory line (IsFatalOutOfMemory) before READY;
  // out of memory is a start-up failure only.
  const std::optional<std::string>& fatal_oom_line() const { return fatal_oom_; }
  // The first config error line (IsConfigError) before READY.
  const std::optional<std::string>& config_error_line() const { return config_error_; }
  // For a daemon that exited before READY: out of memory when it printed a
  // fatal allocation failure, else a config error when it printed one, else
  // just exited.
  StartFailureCause ExitBeforeReadyCause() const;

 private:
  void OnKCaches(absl::string_view line, int64_t blocks);
  // The least count of the pending group, 0 when there is none.
  int64_t PendingLeast() const;
  void DemotePending();
  std::string UnknownReason() const;

  bool ready_ = false;
  bool first_request_done_ = false;
  absl::Status first_request_;
  std::optional<int64_t> executor_;
  std::optional<int64_t> after_ready_;
  std::optional<int64_t> before_ready_;
  // The pending group: first dimension per process (pid text, "" without one).
  std::map<std::string, int64_t> pending_;
  std::vector<int64_t> warm_up_;
  std::optional<std::string> fatal_oom_;
  std::optional<std::string> config_error_;
};

}  // namespace crest::agent
