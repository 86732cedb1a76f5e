// The lines mindie-sim prints while it starts and at its first request, in
// the style of a real MindIE build, so the agent's tests meet each real shape
// (tests/data/real/FINDINGS-configs-logs-metrics.md names the sources):
// - "2.x" (current MindIE-LLM, the default): a one-block warm-up cache, the
//   warm-up's memory lines, the C++ executor's "Initialized KV cache
//   overview: ... NPU blocks = Y" (Y net of the reserved block; left out with
//   `executor_line` false, as when MINDIE_LOG_LEVEL hides the executor's INFO),
//   `g_mainPid = N` on stderr, the success line, then config-manager lines;
//   the serving cache's k_caches line only at the first forward pass.
// - "1.0" (older builds, the ATB runner's lines): a 24-block warm-up cache
//   (ori and after transdata), `warmup_memory(GB):`, `end warm_up`, the success
//   line; the serving cache at the first forward pass.
// The two memory warnings of a normal start are printed when their
// conditions hold: the AclNN note for a model whose KV cache is int8 (MindIE
// then decodes with the AclNN attention backend) and the multimodal note for
// a multimodal model with npuMemSize -1.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "sim/config.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"

namespace crest::sim {

enum class LogStyle { k2x, k1_0 };
// "2.x" or "1.0"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<LogStyle> ParseLogStyle(absl::string_view text);

// One line as the daemon prints it. `logged`: through the daemon's logger
// ("[time] [pid] [component] [LEVEL] text"); else printed bare, as the
// daemon's std::cout / std::cerr lines are.
struct SimLogLine {
  std::string level;      // "INFO", "WARNING", ...; logged lines only
  std::string component;  // "llm", "llmmodels", "server"; logged lines only
  std::string text;
  bool logged = true;
  bool to_stderr = false;
};

struct StartupLines {
  std::vector<SimLogLine> before_success;  // the warm-up, the executor, g_mainPid
  SimLogLine success;                      // "Daemon start success!"
  std::vector<SimLogLine> after_success;   // config-manager lines
  SimLogLine first_forward;                // the serving cache's k_caches line
};

struct StartupStyle {
  LogStyle style = LogStyle::k2x;
  bool executor_line = true;  // 2.x only
};

StartupLines StartupLinesFor(const StartupStyle& style, const SimConfig& config,
                             const KvCacheLayout& kv, const Profile& profile,
                             const std::string& config_path, int pid);

}  // namespace crest::sim
