// StartupLog on every real start-up log of tests/data/real/daemon-log/ (one
// table row per file: what it reads there, and what it would say were the
// daemon ready), on mindie-sim's output, and on one synthetic log per rule:
// the executor's count, warm-up caches never taken, a first request when the
// serving cache is not logged at start, out of memory only when fatal.
#include "agent/startup_log.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string CorpusDir() { return crest::testing::SourceDir() + "/tests/data/real/daemon-log"; }

void Feed(StartupLog& log, const std::vector<std::string>& lines) {
  for (const std::string& line : lines) log.OnLine(line);
}

// A line in MindIE's Python log format, from process `pid`.
std::string Py(int pid, const std::string& level, const std::string& message) {
  return "[2025-02-10 10:55:23,153] [" + std::to_string(pid) + "] [281473644918960] [llm] [" +
         level + "] [logging.py-227] : " + message;
}
std::string KCaches(int pid, int blocks) {
  return Py(
      pid, "INFO",
      "<<<<<<< ori k_caches[0].shape=torch.Size([" + std::to_string(blocks) + ", 128, 8, 128])");
}
std::string Executor(int blocks) {
  return "[2025-09-29 10:42:01.123] [378828] [281473145560576] [llm] [INFO] [executor.cpp:612] "
         "[Executor::HandleInitResult]: Initialized KV cache overview: CPU blocks = 512, NPU "
         "blocks = " +
         std::to_string(blocks) + ", MaxPosEmb = 32768";
}
constexpr char kReady[] = "Daemon start success!";

// The count read, -1 without one; the source, nullopt without one.
int64_t ReadCount(const StartupLog& log) {
  absl::StatusOr<NpuBlocks> blocks = log.npu_blocks();
  return blocks.ok() ? blocks->count : -1;
}
std::optional<BlockSource> ReadSource(const StartupLog& log) {
  absl::StatusOr<NpuBlocks> blocks = log.npu_blocks();
  if (!blocks.ok()) return std::nullopt;
  return blocks->source;
}

// ---------------------------------------------------------------- the corpus

struct CorpusCase {
  std::string file;
  // After the file: the first fatal out-of-memory line contains this, or none.
  std::optional<std::string> fatal_oom;
  bool config_error;
  StartFailureCause exit_cause;
  bool ready;                    // the file has READY
  BlockNumState state;           // after the file
  std::vector<int64_t> warm_up;  // warm-up caches judged so
  // After READY (OnReady() for a file without it) and then a first request
  // that printed nothing: the reason contains this.
  std::string unknown_reason;
};

const std::vector<CorpusCase>& Corpus() {
  static const auto* cases = new std::vector<CorpusCase>{
      {"2.0.RC1-wang-junjian-blog-daemon-setpgrp-error.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      // Its WARN line names config.json and "failed": no config error.
      {"2.1.RC2-gpustack-issue-3153-startup-head-log-format.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      // Its ERROR line names config.json too: out of memory, not a config error.
      {"2.2.RC1-gpustack-issue-3541-warmup-fail-out-of-memory.log",
       "Warmup failed, because of multimodal model inference out of memory",
       false,
       StartFailureCause::kOutOfMemory,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      {"2.2.RC1-single-node-verify-report-engine-startup-daemon-start-success.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       true,
       BlockNumState::kNeedsFirstRequest,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      {"2.x-gpustack-issue-2849-300IDuo-mindieservice_daemon-startup-fragments.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      // The 24-block cache is followed by warmup_memory(GB) and end warm_up.
      {"atb-run_pa-deepseek-r1-distill-qwen-kcache-shape-end-warm_up.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       false,
       BlockNumState::kPending,
       {24},
       "only warm-up caches were logged (k_caches[0].shape of 24 blocks)"},
      {"gpustack-issue-1909-310P-startup-fail-driver-out-of-memory.log",
       "ErrCode=207001, desc=[driver error:out of memory]",
       false,
       StartFailureCause::kOutOfMemory,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
      // Lower-case [error] lines about a free: neither out of memory nor config.
      {"gpustack-issue-2892-block_mem_allocation_solver-free-fail.log",
       std::nullopt,
       false,
       StartFailureCause::kExited,
       false,
       BlockNumState::kPending,
       {},
       "no \"NPU blocks =\" line from the executor and no k_caches[0].shape line"},
  };
  return *cases;
}

TEST(StartupLogCorpusTest, EveryFileHasARow) {
  std::set<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(CorpusDir(), error)) {
    if (entry.path().extension() == ".log") files.insert(entry.path().filename().string());
  }
  ASSERT_FALSE(error) << CorpusDir() << ": " << error.message();
  std::set<std::string> rows;
  for (const CorpusCase& c : Corpus()) rows.insert(c.file);
  EXPECT_EQ(files, rows);
}

class StartupLogCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(StartupLogCorpus, ReadsWhatTheFileSays) {
  const CorpusCase& c = GetParam();
  absl::StatusOr<std::string> text = ReadFileToString(CorpusDir() + "/" + c.file);
  ASSERT_TRUE(text.ok()) << text.status();
  StartupLog log;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) log.OnLine(line);

  if (c.fatal_oom) {
    ASSERT_TRUE(log.fatal_oom_line().has_value());
    EXPECT_THAT(*log.fatal_oom_line(), HasSubstr(*c.fatal_oom));
  } else {
    EXPECT_EQ(log.fatal_oom_line(), std::nullopt) << *log.fatal_oom_line();
  }
  EXPECT_EQ(log.config_error_line().has_value(), c.config_error);
  EXPECT_EQ(log.ExitBeforeReadyCause(), c.exit_cause);
  EXPECT_EQ(log.ready(), c.ready);
  EXPECT_EQ(log.state(), c.state) << BlockNumStateName(log.state());
  EXPECT_EQ(log.warm_up_blocks(), c.warm_up);

  // Had the daemon been ready here, no file gives a count at READY: a
  // warm-up figure is never one.
  log.OnReady();
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest) << BlockNumStateName(log.state());
  EXPECT_THAT(log.npu_blocks(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("only logged at the first forward pass")));
  log.OnFirstRequestDone(absl::OkStatus());
  EXPECT_EQ(log.state(), BlockNumState::kUnknown);
  EXPECT_THAT(
      log.npu_blocks(),
      StatusIs(absl::StatusCode::kNotFound,
               AllOf(HasSubstr(c.unknown_reason), HasSubstr("MINDIE_LOG_LEVEL=INFO"),
                     HasSubstr("MINDIE_LOG_TO_STDOUT=1"), HasSubstr("explicit search.range"))));
}

INSTANTIATE_TEST_SUITE_P(RealDaemonLogs, StartupLogCorpus, ::testing::ValuesIn(Corpus()),
                         [](const ::testing::TestParamInfo<CorpusCase>& info) {
                           std::string name = info.param.file;
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char ch) {
                                 return !std::isalnum(static_cast<unsigned char>(ch));
                               },
                               '_');
                           return name;
                         });

// ------------------------------------------------------------------ mindie-sim

// sim/daemon.cc's WarmUp(): its log lines, then the k_caches line with the
// real count and READY, no warm-up marker between.
TEST(StartupLogTest, MindieSimCountBeforeReady) {
  StartupLog log;
  Feed(log, {"[2026-01-01 10:00:00.000] [4242] [llm] [INFO] Loading weights (30.0 s simulated "
             "model loading, time scale 1)",
             "[2026-01-01 10:00:30.000] [4242] [llm] [INFO] npuMemSize 17 GiB, cacheBlockSize "
             "128, 8388608 bytes per block, npuBlockNum 2176 (usable 2175, one reserved)",
             "[2026-01-01 10:00:30.001] [4242] [llm] [INFO] <<<<<<< ori "
             "k_caches[0].shape=torch.Size([2176, 128, 8, 128])"});
  EXPECT_EQ(log.state(), BlockNumState::kPending);
  EXPECT_THAT(log.npu_blocks(), StatusIs(absl::StatusCode::kUnavailable));
  log.OnLine(kReady);
  ASSERT_EQ(log.state(), BlockNumState::kKnown);
  absl::StatusOr<NpuBlocks> blocks = log.npu_blocks();
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->count, 2176);
  EXPECT_EQ(blocks->source, BlockSource::kKCachesBeforeReady);
  EXPECT_THAT(log.warm_up_blocks(), IsEmpty());
}

// mindie-sim's out-of-memory start: an ERROR line, then the exit.
TEST(StartupLogTest, MindieSimOutOfMemory) {
  StartupLog log;
  Feed(log, {"[2026-01-01 10:00:00.000] [4242] [llm] [ERROR] NPU out of memory: weights 15.00 "
             "GiB/card + KV cache 1000 GiB (npuMemSize) + runtime 3.0 GiB exceed the 64 GiB of "
             "one Ascend 910B3 (worldSize 1)"});
  EXPECT_EQ(log.ExitBeforeReadyCause(), StartFailureCause::kOutOfMemory);
  EXPECT_EQ(log.config_error_line(), std::nullopt);
}

// ------------------------------------------------------------ one rule each

// Current MindIE-LLM: a one-block warm-up cache, then the executor's count.
TEST(StartupLogTest, OneBlockWarmUpThenExecutorLine) {
  StartupLog log;
  Feed(log, {Py(100, "INFO", "One block during warmup needs npu memory(GiB): 0.0625"),
             Py(100, "INFO",
                "warmup params: max_prefill_tokens=8192, max_seq_len=2560, max_input_len=2048, "
                "max_iter_times=512"),
             KCaches(100, 1),
             Py(100, "INFO", "Requested memory: 0.8 (util), 51.20 GiBnpu_mem: 17.0 GiB"),
             Py(100, "INFO", "After warmup, peak mem: 30.10G, total_mem: 64.00G")});
  EXPECT_EQ(log.state(), BlockNumState::kPending);
  log.OnLine(Executor(2175));
  // The executor's count is final as soon as it is printed.
  EXPECT_EQ(log.state(), BlockNumState::kKnown);
  log.OnLine(kReady);
  absl::StatusOr<NpuBlocks> blocks = log.npu_blocks();
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->count, 2176);  // the reserved block counted, as in k_caches
  EXPECT_EQ(blocks->source, BlockSource::kExecutor);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(1));
  // The first forward pass's k_caches line does not overrule it.
  log.OnLine(KCaches(100, 3000));
  EXPECT_EQ(ReadCount(log), 2176);
  EXPECT_EQ(ReadSource(log), BlockSource::kExecutor);
}

// Multi-node: the master's count, then lowered by a slave's.
TEST(StartupLogTest, ExecutorSlaveUpdateKeepsTheMinimum) {
  StartupLog log;
  Feed(log, {Executor(3000),
             "[llm] [INFO] [Executor::MasterHandleSlaveInitResponse]: Updated KV cache overview "
             "from slave: CPU blocks = 512, NPU blocks = 2800, MaxPosEmb = 32768",
             kReady});
  EXPECT_EQ(ReadCount(log), 2801);
}

// Older builds: a 24-block warm-up cache (two lines: ori and after
// transdata), warmup_memory and end warm_up; the serving cache only at the
// first forward pass after READY.
TEST(StartupLogTest, SmallWarmUpThenEndWarmUpThenServingAfterReady) {
  StartupLog log;
  Feed(log,
       {KCaches(2687, 24),
        Py(2687, "INFO", "<<<<<<<after transdata k_caches[0].shape=torch.Size([24, 32, 128, 16])"),
        Py(2687, "INFO", "warmup_memory(GB):  1.18"),
        Py(2687, "INFO", "---------------end warm_up---------------"), kReady});
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest);
  EXPECT_THAT(log.npu_blocks(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("warm-up caches of 24")));
  log.OnLine(KCaches(2687, 2176));
  ASSERT_EQ(log.state(), BlockNumState::kKnown);
  EXPECT_EQ(ReadCount(log), 2176);
  EXPECT_EQ(ReadSource(log), BlockSource::kKCachesFirstForward);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(24));
}

// Only a warm-up cache at start: a first request makes the serving cache
// appear.
TEST(StartupLogTest, OnlyWarmUpNeedsAFirstRequestThenReadsTheLine) {
  StartupLog log;
  Feed(log, {KCaches(100, 1), kReady});
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest);
  log.OnLine(Py(100, "INFO", "k cache's shape k_caches[0].shape=torch.Size([1900, 128, 1, 576])"));
  log.OnFirstRequestDone(absl::OkStatus());
  ASSERT_EQ(log.state(), BlockNumState::kKnown);
  EXPECT_EQ(ReadCount(log), 1900);
  EXPECT_EQ(ReadSource(log), BlockSource::kKCachesFirstForward);
}

// A first request that printed nothing (the line at DEBUG level only) gives a
// reason with the fix; a line read late still counts.
TEST(StartupLogTest, NothingAfterTheFirstRequestIsUnknownWithTheFix) {
  StartupLog log;
  Feed(log, {KCaches(100, 1), kReady});
  log.OnFirstRequestDone(absl::OkStatus());
  EXPECT_EQ(log.state(), BlockNumState::kUnknown);
  EXPECT_THAT(log.npu_blocks(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("only warm-up caches were logged (k_caches[0].shape of 1 "
                                       "blocks)"),
                             HasSubstr("DEBUG for models"), HasSubstr("explicit search.range"))));
  log.OnLine(KCaches(100, 2000));
  EXPECT_EQ(log.state(), BlockNumState::kKnown);
  EXPECT_EQ(ReadCount(log), 2000);
}

TEST(StartupLogTest, FailedFirstRequestIsInTheReason) {
  StartupLog log;
  log.OnReady();
  log.OnFirstRequestDone(absl::DeadlineExceededError("no answer within 60s"));
  EXPECT_THAT(log.npu_blocks(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("the first request after READY failed (no answer within 60s)")));
}

// No marker between, but the same process logs a cache of another size: it
// replaced its warm-up cache.
TEST(StartupLogTest, SameProcessReplacingItsCacheDemotesTheFirst) {
  StartupLog log;
  Feed(log, {KCaches(100, 24), KCaches(100, 2176), kReady});
  ASSERT_EQ(log.state(), BlockNumState::kKnown);
  EXPECT_EQ(ReadCount(log), 2176);
  EXPECT_EQ(ReadSource(log), BlockSource::kKCachesBeforeReady);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(24));
}

// Ranks are processes of their own: the minimum over them.
TEST(StartupLogTest, RanksBeforeReadyGiveTheMinimum) {
  StartupLog log;
  Feed(log, {KCaches(100, 2176), KCaches(101, 2170), KCaches(100, 2176), kReady});
  EXPECT_EQ(ReadCount(log), 2170);
  EXPECT_THAT(log.warm_up_blocks(), IsEmpty());
}

// A one-block cache is the warm-up's even with nothing after it.
TEST(StartupLogTest, OneBlockCacheAtReadyIsNotTheServingCache) {
  StartupLog log;
  Feed(log, {KCaches(100, 1), kReady});
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(1));
}

// A one-block cache after a pending one, even from another process: a
// warm-up is running, so the pending cache was no serving cache either.
TEST(StartupLogTest, OneBlockCacheAfterAPendingCacheDemotesIt) {
  StartupLog log;
  Feed(log, {KCaches(100, 300), KCaches(101, 1), KCaches(100, 1), kReady});
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(300, 1));
}

// A serving-sized cache before READY followed by a warm-up marker was the
// warm-up's.
TEST(StartupLogTest, MarkerAfterAPendingCacheDemotesIt) {
  StartupLog log;
  Feed(log, {KCaches(100, 300), Py(100, "INFO", "After warmup, peak mem: 30.10G"), kReady});
  EXPECT_EQ(log.state(), BlockNumState::kNeedsFirstRequest);
  EXPECT_THAT(log.warm_up_blocks(), ElementsAre(300));
}

// ------------------------------------------------------------- out of memory

TEST(StartupLogTest, MemoryWarningsOfANormalStartAreNotFatal) {
  StartupLog log;
  Feed(log, {Py(100, "WARNING",
                "If the model's max_positional_embedding is large, AclNN attention backend may "
                "result in NPU out of memory."),
             Py(100, "WARNING",
                "When `npuMemSize` set to -1, the multimodal model may exhibit poor performance "
                "or may be out of memory during inference. Please manually configure "
                "`npuMemSize` according to the document."),
             Executor(2175), kReady});
  EXPECT_EQ(log.fatal_oom_line(), std::nullopt);
  EXPECT_EQ(log.config_error_line(), std::nullopt);
  EXPECT_EQ(log.ExitBeforeReadyCause(), StartFailureCause::kExited);
  EXPECT_EQ(ReadCount(log), 2176);
}

TEST(StartupLogTest, RealFatalTextsAreFatalAndTheFirstIsKept) {
  const std::string driver =
      "[ERROR] RUNTIME(29167,mindie_llm_backend_connector):2025-04-27-07:23:17.709.136 "
      "[api_c_memory.cc:28]29953 rtMalloc:[INIT][DEFAULT]ErrCode=207001, desc=[driver error:out "
      "of memory]";
  StartupLog log;
  Feed(log, {"[ERROR] RUNTIME(29167,mindie_llm_backend_connector):2025-04-27-07:23:17.709.121 "
             "[api_error.cc:1052]29953 DevMalloc:[INIT][DEFAULT]Device malloc failed, size=32",
             driver, "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB",
             "ValueError: Invalid number of NPU blocks: -3. It must be non-negative. This is due "
             "to warm_up out of memory."});
  EXPECT_EQ(log.fatal_oom_line(), driver);
  EXPECT_EQ(log.ExitBeforeReadyCause(), StartFailureCause::kOutOfMemory);

  for (const std::string& line :
       {std::string("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"),
        std::string("ValueError: Invalid number of NPU blocks: -3. It must be non-negative. This "
                    "is due to warm_up out of memory."),
        Py(100, "ERROR", "Out-of-memory exception occurred during warmup")}) {
    StartupLog one;
    one.OnLine(line);
    EXPECT_EQ(one.fatal_oom_line(), line);
  }
}

// Out of memory is a start-up failure only: after READY the supervisor
// reports an exit.
TEST(StartupLogTest, OutOfMemoryAfterReadyIsNotAStartFailure) {
  StartupLog log;
  Feed(log, {Executor(2175), kReady,
             Py(100, "ERROR",
                "Device out of memory (OOM) reported by PyTorch, but it can possibly triggered "
                "by HCCL.")});
  EXPECT_EQ(log.fatal_oom_line(), std::nullopt);
}

TEST(StartupLogTest, ConfigErrorOnlyFromErrorLines) {
  StartupLog warned;
  warned.OnLine(
      "[2025-11-05 20:32:25.735] [34] [281473375264256] [llm] [WARN] [param_checker.cpp:98] "
      "config.json error: Required permisssion is 750, but got permission is 644");
  EXPECT_EQ(warned.ExitBeforeReadyCause(), StartFailureCause::kExited);

  StartupLog failed;
  failed.OnLine(
      "[2026-01-01 10:00:00.000] [4242] [server] [ERROR] invalid config: "
      "BackendConfig.ScheduleConfig.maxBatchSize: 0 is out of range");
  EXPECT_EQ(failed.ExitBeforeReadyCause(), StartFailureCause::kInvalidConfig);
}

}  // namespace
}  // namespace crest::agent
