// The per-line classifiers of daemon_output.h on MindIE's real line formats
// (tests/data/real/FINDINGS-configs-logs-metrics.md) and mindie-sim's.
#include "agent/daemon_output.h"

#include <optional>

#include "gtest/gtest.h"

namespace crest::agent {
namespace {

// The two warnings a normal start prints (atb_llm flash_causal_lm.py and
// mindie_llm generator.py), in MindIE's Python log format.
constexpr absl::string_view kAclnnWarning =
    "[2025-09-29 10:40:47,790] [378937] [281471361216736] [llm] [WARNING] "
    "[flash_causal_lm.py-219] : If the model's max_positional_embedding is large, AclNN attention "
    "backend may result in NPU out of memory.";
constexpr absl::string_view kMultimodalWarning =
    "[2025-11-25 17:22:50,101] [249] [281471718846752] [llm] [WARNING] [generator.py-792] : When "
    "`npuMemSize` set to -1, the multimodal model may exhibit poor performance or may be out of "
    "memory during inference. Please manually configure `npuMemSize` according to the document.";

TEST(ParseKCacheBlocksTest, Forms) {
  EXPECT_EQ(ParseKCacheBlocks("<<<<<<< ori k_caches[0].shape=torch.Size([2175, 128, 8, 128])"),
            2175);
  EXPECT_EQ(ParseKCacheBlocks("[2025-02-10 10:55:23,153] [2687] [281473644918960] [llm] "
                              "[INFO][logging.py-227] : <<<<<<< ori "
                              "k_caches[0].shape=torch.Size([24, 32, 128, 16])"),
            24);
  // model_input_managers.py's form.
  EXPECT_EQ(ParseKCacheBlocks("k cache's shape k_caches[0].shape=torch.Size([1, 128, 1, 576])"), 1);
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([])"), std::nullopt);
  // Found by tests/fuzz/npu_block_log_fuzzer: zero blocks is no cache size.
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([0, 128, 8, 128])"), std::nullopt);
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([99999999999999999999, 1])"),
            std::nullopt);
  EXPECT_EQ(ParseKCacheBlocks("nothing here"), std::nullopt);
}

TEST(ParseExecutorNpuBlocksTest, Forms) {
  // MindIE-LLM executor.cpp, with and without the newer MaxPosEmb.
  EXPECT_EQ(ParseExecutorNpuBlocks(
                "[2025-09-29 10:42:01.123] [378828] [281473145560576] [llm] [INFO] "
                "[executor.cpp:612] [Executor::HandleInitResult]: Initialized KV cache overview: "
                "CPU blocks = 512, NPU blocks = 2175, MaxPosEmb = 32768"),
            2175);
  EXPECT_EQ(ParseExecutorNpuBlocks("[Executor::HandleInitResult]: Initialized KV cache overview: "
                                   "CPU blocks = 512, NPU blocks = 9000"),
            9000);
  EXPECT_EQ(ParseExecutorNpuBlocks("[Executor::MasterHandleSlaveInitResponse]: Updated KV cache "
                                   "overview from slave: CPU blocks = 7, NPU blocks = 4321, "
                                   "MaxPosEmb = 4096"),
            4321);
  // CPU blocks alone, the executor's "unset" value, zero, no overview.
  EXPECT_EQ(ParseExecutorNpuBlocks("Initialized KV cache overview: CPU blocks = 512"),
            std::nullopt);
  EXPECT_EQ(ParseExecutorNpuBlocks("Initialized KV cache overview: CPU blocks = 0, NPU blocks = "
                                   "4294967295, MaxPosEmb = 0"),
            std::nullopt);
  EXPECT_EQ(ParseExecutorNpuBlocks("KV cache overview: CPU blocks = 0, NPU blocks = 0"),
            std::nullopt);
  EXPECT_EQ(ParseExecutorNpuBlocks("NPU blocks = 12"), std::nullopt);
}

TEST(LineLogLevelTest, EveryPrefixSeenInRealLogs) {
  EXPECT_EQ(LineLogLevel("[2025-11-05 20:32:25.735] [34] [281473375264256] [llm] [WARN] "
                         "[param_checker.cpp:98]  Check Other group permission failed"),
            LogLevel::kWarning);
  EXPECT_EQ(LineLogLevel(kAclnnWarning), LogLevel::kWarning);
  EXPECT_EQ(LineLogLevel("[2025-02-10 10:55:26,025] [2687] [281473644918960] [llm] "
                         "[INFO][logging.py-227] : ---------------end warm_up---------------"),
            LogLevel::kInfo);
  EXPECT_EQ(LineLogLevel("[ERROR] RUNTIME(29167,mindie_llm_backend_connector):2025-04-27-07:23:17"
                         ".709.136 [api_c_memory.cc:28]29953 rtMalloc:"),
            LogLevel::kError);
  EXPECT_EQ(LineLogLevel("[2025-10-10 13:38:41.190629] [error] [3590832] "
                         "[block_mem_allocation_solver.cpp:63] can't find block"),
            LogLevel::kError);
  EXPECT_EQ(LineLogLevel("[2025-01-01 10:00:00.123] [42] [llm] [ERROR] NPU out of memory: x"),
            LogLevel::kError);
  EXPECT_EQ(LineLogLevel("WARNING: something"), LogLevel::kWarning);
  EXPECT_EQ(LineLogLevel("/x/y.py:12: UserWarning: deprecated"), LogLevel::kWarning);
  EXPECT_EQ(LineLogLevel("RuntimeError: NPU out of memory."), LogLevel::kNone);
  EXPECT_EQ(LineLogLevel("[ConfigManager::InitConfigManager] Successfully init config manager"),
            LogLevel::kNone);
  // A level word inside the message does not count: the prefix's does.
  EXPECT_EQ(LineLogLevel("[2025-01-01 10:00:00.123] [42] [llm] [INFO] saw [ERROR] earlier"),
            LogLevel::kInfo);
  EXPECT_EQ(LineLogLevel(""), LogLevel::kNone);
}

TEST(IsWarmUpMarkerTest, Forms) {
  EXPECT_TRUE(IsWarmUpMarker("---------------end warm_up---------------"));
  EXPECT_TRUE(IsWarmUpMarker("warmup_memory(GB):  1.18"));
  EXPECT_TRUE(IsWarmUpMarker("One block during warmup needs npu memory(GiB): 0.0625"));
  EXPECT_TRUE(IsWarmUpMarker("After warmup, peak mem: 40.10G, total_mem: 64.00G"));
  EXPECT_FALSE(IsWarmUpMarker("Daemon start success!"));
  EXPECT_FALSE(IsWarmUpMarker("k_caches[0].shape=torch.Size([2175, 128, 8, 128])"));
}

// The warnings of a normal start mention memory and are never fatal, with
// or without their prefix.
TEST(IsFatalOutOfMemoryTest, WarningsAreNotFatal) {
  EXPECT_FALSE(IsFatalOutOfMemory(kAclnnWarning));
  EXPECT_FALSE(IsFatalOutOfMemory(kMultimodalWarning));
  EXPECT_FALSE(IsFatalOutOfMemory(
      "If the model's max_positional_embedding is large, AclNN attention backend may result in "
      "NPU out of memory."));
  EXPECT_FALSE(IsFatalOutOfMemory("[WARN] rtMalloc ErrCode=207001 retried"));
  EXPECT_FALSE(IsFatalOutOfMemory("[INFO] Warmup failed due to NPU out of memory, retrying"));
  EXPECT_FALSE(IsFatalOutOfMemory("npuMemSize=8 GiB, memory in use 40%"));
  // No level and no known fatal text.
  EXPECT_FALSE(IsFatalOutOfMemory("OUT OF MEMORY"));
  EXPECT_FALSE(IsFatalOutOfMemory(""));
}

TEST(IsFatalOutOfMemoryTest, RealFatalTexts) {
  // gpustack #1909 (310P): the driver's allocation failure.
  EXPECT_TRUE(IsFatalOutOfMemory(
      "[ERROR] RUNTIME(29167,mindie_llm_backend_connector):2025-04-27-07:23:17.709.136 "
      "[api_c_memory.cc:28]29953 rtMalloc:[INIT][DEFAULT]ErrCode=207001, desc=[driver error:out "
      "of memory], Inn"));
  // gpustack #3541 (2.2.RC1): the multimodal warm-up check.
  EXPECT_TRUE(IsFatalOutOfMemory(
      "[2025-11-25 17:23:11,888] [249] [281471718846752] [llm] [ERROR] [logging.py-348] : Warmup "
      "failed, because of multimodal model inference out of memory when `maxInputTokenLen` set to "
      "8192. Please try to decrease `maxPrefillTokens` in config.json of mindie-service."));
  // MindIE-LLM's texts, as a traceback's last line (no level).
  EXPECT_TRUE(IsFatalOutOfMemory("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_TRUE(
      IsFatalOutOfMemory("ValueError: Invalid number of NPU blocks: -3. It must be "
                         "non-negative. This is due to warm_up out of memory."));
  EXPECT_TRUE(IsFatalOutOfMemory("NPU out of memory. Warmup failed, because of multimodal"));
  EXPECT_TRUE(IsFatalOutOfMemory("RuntimeError: Npu out of memory, OOM."));
  EXPECT_TRUE(IsFatalOutOfMemory("torch.OutOfMemoryError: NPU out of memory."));
  EXPECT_TRUE(IsFatalOutOfMemory(
      "[2025-01-01 10:00:00,000] [7] [7] [llm] [ERROR] [generator.py-1045] : Warmup failed due to "
      "NPU out of memory when `npuMemSize` set to 40. Try to decrease `npuMemSize` or "
      "`maxPrefillTokens`"));
  EXPECT_TRUE(IsFatalOutOfMemory("[ERROR] Out-of-memory exception occurred during warmup"));
  // mindie-sim's start-up failure, and any ERROR line that says it.
  EXPECT_TRUE(IsFatalOutOfMemory(
      "[2025-01-01 10:00:00.123] [42] [llm] [ERROR] NPU out of memory: weights 15.00 GiB/card"));
  EXPECT_TRUE(IsFatalOutOfMemory("[ERROR] OutOfMemory while allocating the KV cache"));
  EXPECT_TRUE(IsFatalOutOfMemory("[ERROR] OutOfMemory while allocating the KV cache"));
  // An ERROR line about something else.
  EXPECT_FALSE(IsFatalOutOfMemory(
      "[ERROR] RUNTIME(29167,mindie_llm_backend_connector):2025-04-27-07:23:17.709.121 "
      "[api_error.cc:1052]29953 DevMalloc:[INIT][DEFAULT]Device malloc failed, size=32(Byte)"));
}

TEST(IsConfigErrorTest, ErrorsNotWarnings) {
  EXPECT_TRUE(IsConfigError("Invalid config: maxPrefillTokens must be >= maxSeqLen"));
  EXPECT_TRUE(IsConfigError("[ERROR] failed to load config.json"));
  EXPECT_TRUE(
      IsConfigError("[2025-01-01 10:00:00.123] [42] [server] [ERROR] invalid config: "
                    "BackendConfig.ScheduleConfig.maxBatchSize: 0 is out of range"));
  EXPECT_FALSE(IsConfigError("loaded config from /opt/mindie/conf/config.json"));
  EXPECT_FALSE(IsConfigError("[ERROR] connection reset by peer"));
  // A permission warning on config.json (2.1.RC2) is no error.
  EXPECT_FALSE(
      IsConfigError("[2025-11-05 20:32:25.735] [34] [281473375264256] [llm] [WARN] "
                    "[param_checker.cpp:98]  config.json error: permission 644"));
  EXPECT_FALSE(IsConfigError("[INFO] config error count 0"));
  // The warm-up's out-of-memory advice names config.json: it is out of memory.
  EXPECT_FALSE(IsConfigError(
      "[2025-11-25 17:23:11,888] [249] [281471718846752] [llm] [ERROR] [logging.py-348] : Warmup "
      "failed, because of multimodal model inference out of memory when `maxInputTokenLen` set to "
      "8192. Please try to decrease `maxPrefillTokens` in config.json of mindie-service."));
}

}  // namespace
}  // namespace crest::agent
