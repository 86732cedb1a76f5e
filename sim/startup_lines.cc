#include "sim/startup_lines.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The warm-up cache of older builds: 24 blocks in a real 1.0 capture
// (tests/data/real/daemon-log/atb-run_pa-...-end-warm_up.log).
constexpr int64_t kOldWarmUpBlocks = 24;

SimLogLine Logged(const char* level, const char* component, std::string text) {
  return {level, component, std::move(text), true, false};
}
SimLogLine Bare(std::string text, bool to_stderr = false) {
  return {"", "", std::move(text), false, to_stderr};
}

// atb_llm's flash_causal_lm.py line for a cache of `blocks` blocks.
SimLogLine KCaches(const SimConfig& config, const KvCacheLayout& kv, const Profile& profile,
                   int64_t blocks, const char* prefix = "<<<<<<< ori") {
  return Logged("INFO", "llmmodels",
                absl::StrFormat("[flash_causal_lm.py-408] : %s k_caches[0].shape=torch.Size([%d, "
                                "%d, %d, %d])",
                                prefix, blocks, config.cache_block_size, kv.kv_heads_per_card,
                                profile.head_dim));
}

// The two WARNING lines of a normal start that mention memory.
void MemoryWarnings(const SimConfig& config, const Profile& profile, std::vector<SimLogLine>& out) {
  if (profile.kv_cache_int8) {
    out.push_back(Logged("WARNING", "llmmodels",
                         "[flash_causal_lm.py-219] : If the model's max_positional_embedding is "
                         "large, AclNN attention backend may result in NPU out of memory."));
  }
  if (profile.multimodal && config.npu_mem_size_gb == -1) {
    out.push_back(Logged(
        "WARNING", "llm",
        "[generator.py-301] : When `npuMemSize` set to -1, the multimodal model may exhibit poor "
        "performance or may be out of memory during inference. Please manually configure "
        "`npuMemSize` according to the document."));
  }
}

StartupLines Current(const StartupStyle& style, const SimConfig& config, const KvCacheLayout& kv,
                     const Profile& profile, const std::string& config_path, int pid) {
  StartupLines lines;
  std::vector<SimLogLine>& out = lines.before_success;
  out.push_back(Logged("INFO", "llm",
                       absl::StrFormat("[generator.py-280] : One block during warmup needs npu "
                                       "memory(GiB): %.4f",
                                       static_cast<double>(kv.bytes_per_block) / kGiB)));
  out.push_back(Logged(
      "INFO", "llm",
      absl::StrFormat("[generator.py-284] : warmup params: max_prefill_tokens=%d, max_seq_len=%d, "
                      "max_input_len=%d, max_iter_times=%d",
                      config.max_prefill_tokens, config.max_seq_len, config.max_input_token_len,
                      config.max_iter_times)));
  out.push_back(KCaches(config, kv, profile, 1));
  MemoryWarnings(config, profile, out);
  const double weights = profile.weights_gib / config.world_size;
  out.push_back(
      Logged("INFO", "llm",
             absl::StrFormat("[npu_mem_tool.py-88] : After warmup, peak mem: %.2fG, "
                             "total_mem: %.2fG",
                             weights + profile.runtime_overhead_gib, profile.device_memory_gib)));
  if (style.executor_line) {
    out.push_back(Logged(
        "INFO", "llm",
        absl::StrFormat("[executor.cpp:612] [Executor::HandleInitResult]: Initialized KV cache "
                        "overview: CPU blocks = %d, NPU blocks = %d, MaxPosEmb = %d",
                        0, kv.usable_blocks, config.max_seq_len)));
  }
  out.push_back(Bare(absl::StrCat("g_mainPid = ", pid), /*to_stderr=*/true));
  lines.success = Bare("Daemon start success!");
  lines.after_success = {
      Bare(absl::StrCat("ConfigManager: Load Config from ", config_path, ".")),
      Bare("[ConfigManager::InitConfigManager] Successfully init config manager")};
  lines.first_forward = KCaches(config, kv, profile, kv.computed_blocks);
  return lines;
}

StartupLines Older(const SimConfig& config, const KvCacheLayout& kv, const Profile& profile) {
  StartupLines lines;
  std::vector<SimLogLine>& out = lines.before_success;
  out.push_back(KCaches(config, kv, profile, kOldWarmUpBlocks));
  out.push_back(KCaches(config, kv, profile, kOldWarmUpBlocks, "<<<<<<<after transdata"));
  MemoryWarnings(config, profile, out);
  out.push_back(
      Logged("INFO", "llm",
             absl::StrFormat("[run_pa.py-231] : warmup_memory(GB):  %.2f",
                             static_cast<double>(kv.bytes_per_block * kOldWarmUpBlocks) / kGiB)));
  out.push_back(
      Logged("INFO", "llm", "[run_pa.py-236] : ---------------end warm_up---------------"));
  lines.success = Bare("Daemon start success!");
  lines.first_forward = KCaches(config, kv, profile, kv.computed_blocks);
  return lines;
}

}  // namespace

absl::StatusOr<LogStyle> ParseLogStyle(absl::string_view text) {
  if (text == "2.x") return LogStyle::k2x;
  if (text == "1.0") return LogStyle::k1_0;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-style: \"", text, "\" is not a style; expected 2.x or 1.0"));
}

StartupLines StartupLinesFor(const StartupStyle& style, const SimConfig& config,
                             const KvCacheLayout& kv, const Profile& profile,
                             const std::string& config_path, int pid) {
  if (style.style == LogStyle::k1_0) return Older(config, kv, profile);
  return Current(style, config, kv, profile, config_path, pid);
}

}  // namespace crest::sim
