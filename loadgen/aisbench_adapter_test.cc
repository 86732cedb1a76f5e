#include "loadgen/aisbench_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"
#include "loadgen/testing/recorded_runner.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(crest::testing::SourceDir() + "/" + path);
  EXPECT_THAT(text, IsOk());
  return text.ok() ? *text : "";
}

std::string Real(const std::string& name) { return Read("tests/data/real/aisbench/" + name); }

using testing::RecordedRunner;

RunOptions Options() {
  RunOptions o;
  o.target.base_url = "http://127.0.0.1:1025";
  o.spec.set_model_name("qwen");
  o.spec.set_concurrency(16);
  o.spec.set_max_output_len(512);
  o.spec.set_request_count(400);
  o.spec.set_warmup_requests(2);
  return o;
}

// The AISBench docs' example run (demo_gsm8k, one client).
TEST(AisBenchRealTest, DocExampleScreen) {
  absl::StatusOr<crest::v1::BenchmarkResult> r =
      ParseAisBenchScreen(Real("aisbench-perf-screen-doc-example-20251106-demo_gsm8k.txt"));
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->generate_speed(), 41.622);
  EXPECT_EQ(r->concurrency(), 1U);
  EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), 41.622);
  EXPECT_EQ(r->succeeded(), 8U);
  EXPECT_EQ(r->failed(), 0U);
  EXPECT_DOUBLE_EQ(r->qps(), 0.0813);
  EXPECT_DOUBLE_EQ(r->input_generate_speed(), 122.9556);
  EXPECT_DOUBLE_EQ(r->total_generate_speed(), 164.5776);
  EXPECT_EQ(r->input_tokens(), 12100U);
  EXPECT_EQ(r->output_tokens(), 4096U);
  EXPECT_EQ(google::protobuf::util::TimeUtil::DurationToMilliseconds(r->duration()), 98409);
  EXPECT_DOUBLE_EQ(r->first_token_time().average_ms(), 2006.0);
  EXPECT_DOUBLE_EQ(r->first_token_time().min_ms(), 2005.1);
  EXPECT_DOUBLE_EQ(r->first_token_time().max_ms(), 2007.4);
  EXPECT_DOUBLE_EQ(r->first_token_time().p50_ms(), 2006.1);  // AISBench's Median
  EXPECT_DOUBLE_EQ(r->first_token_time().p75_ms(), 2006.2);
  EXPECT_DOUBLE_EQ(r->first_token_time().p90_ms(), 2006.6);
  EXPECT_DOUBLE_EQ(r->first_token_time().p99_ms(), 2007.3);
  EXPECT_FALSE(r->first_token_time().has_slo_p90_ms());
  EXPECT_EQ(r->first_token_time().samples(), 8U);
  EXPECT_DOUBLE_EQ(r->decode_time().average_ms(), 20.1);  // TPOT
  EXPECT_DOUBLE_EQ(r->e2e_latency().average_ms(), 12300.2);
}

// vLLM-Ascend's run (16 clients), xLLM's on A3 (a table pasted without its
// results line, the last border cut short), the older build's (an older
// logger, "Total generated tokens").
TEST(AisBenchRealTest, EveryPerfScreenOfTheCorpus) {
  struct Case {
    std::string file;
    double speed;
    uint32_t concurrency;
    uint64_t succeeded;
    uint64_t output_tokens;
    double ttft_average;
  };
  for (const Case& c : std::vector<Case>{
           {"aisbench-perf-screen-vllm-ascend-hunyuan-a13b-20260408.txt", 96.6928, 16, 8, 3980,
            238.6},
           {"aisbench-perf-screen-xllm-glm5-a3-32k2k.txt", 26.5476, 1, 10, 20480, 3221.8},
           {"aisbench-perf-screen-old-doc-example-20250605.txt", 115.7835, 1, 8, 2299, 50.332}}) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<crest::v1::BenchmarkResult> r = ParseAisBenchScreen(Real(c.file));
    ASSERT_THAT(r, IsOk());
    EXPECT_DOUBLE_EQ(r->generate_speed(), c.speed);
    EXPECT_EQ(r->concurrency(), c.concurrency);
    EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), c.speed / c.concurrency);
    EXPECT_EQ(r->succeeded(), c.succeeded);
    EXPECT_EQ(r->output_tokens(), c.output_tokens);
    EXPECT_DOUBLE_EQ(r->first_token_time().average_ms(), c.ttft_average);
    EXPECT_TRUE(r->first_token_time().has_p50_ms());
  }
}

TEST(AisBenchRealTest, AnAccuracyRunIsRefusedNamingPerfMode) {
  EXPECT_THAT(ParseAisBenchScreen(Real("aisbench-accuracy-screen-vllm-ascend-hunyuan-a13b.txt")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--mode perf")));
}

TEST(AisBenchTest, ResultFilesGiveTheScreensFigures) {
  absl::StatusOr<crest::v1::BenchmarkResult> files =
      ParseAisBenchResultFiles(Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.csv"),
                               Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.json"));
  ASSERT_THAT(files, IsOk());
  absl::StatusOr<crest::v1::BenchmarkResult> screen =
      ParseAisBenchScreen(Real("aisbench-perf-screen-doc-example-20251106-demo_gsm8k.txt"));
  ASSERT_THAT(screen, IsOk());
  EXPECT_EQ(files->SerializeAsString(), screen->SerializeAsString())
      << files->DebugString() << "\nvs\n"
      << screen->DebugString();
}

TEST(AisBenchTest, BadResultFilesAreRefusedNamingTheFile) {
  EXPECT_THAT(ParseAisBenchResultFiles("a,b\n", "{}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(".csv: expected a header")));
  EXPECT_THAT(
      ParseAisBenchResultFiles(Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.csv"), "[1"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(".json: expected an object")));
  EXPECT_THAT(ParseAisBenchResultFiles(Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.csv"),
                                       R"({"Output Token Throughput": {"total": "1e99 token/s"},
                      "Success Requests": {"total": "8"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("Output Token Throughput is \"1e99 token/s\"")));
}

TEST(AisBenchTest, ResultDirFromTheLastLine) {
  EXPECT_EQ(AisBenchResultDir(Real("aisbench-perf-screen-doc-example-20251106-demo_gsm8k.txt")),
            "outputs/default/20251106_103326/performances/vllm-api-stream-chat");
  EXPECT_EQ(AisBenchResultDir(Real("aisbench-perf-screen-old-doc-example-20250605.txt")),
            "outputs/default/20250605_202220/performances/vllm-api-stream-chat");
  EXPECT_EQ(AisBenchResultDir("no line"), "");
}

TEST(AisBenchTest, CommandLineCarriesTheSpecThroughTheApiOverrides) {
  AisBenchOptions tool;
  tool.binary = "/opt/ais_bench";
  RunOptions o = Options();
  o.spec.set_request_rate(2.5);
  absl::StatusOr<std::vector<std::string>> args = BuildAisBenchArgs(o, tool);
  ASSERT_THAT(args, IsOk());
  EXPECT_THAT(*args, ElementsAre("/opt/ais_bench", "--models", "vllm_api_stream_chat", "--datasets",
                                 "gsm8k_gen_0_shot_cot_str_perf", "--mode", "perf", "--summarizer",
                                 "default_perf", "--work-dir", "outputs/crest", "--host-ip",
                                 "127.0.0.1", "--host-port", "1025", "--model-name", "qwen",
                                 "--batch-size", "16", "--max-out-len", "512", "--request-rate",
                                 "2.5", "--num-prompts", "400", "--num-warmups", "2"));
  o.target.base_url = "https://127.0.0.1:1025";
  EXPECT_THAT(BuildAisBenchArgs(o, tool),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not http://host:port")));
  o = Options();
  o.spec.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
  EXPECT_THAT(BuildAisBenchArgs(o, tool),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("synthetic_gen")));
  o = Options();
  o.spec.mutable_max_duration()->set_seconds(60);
  EXPECT_THAT(BuildAisBenchArgs(o, tool), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A run whose last line names a result directory: the files there are read.
TEST(AisBenchTest, RunReadsTheResultFilesItsOutputNames) {
  crest::testing::TempDir dir;
  const std::string results = dir.File("20251106_103326/performances/vllm-api-stream-chat");
  ASSERT_TRUE(MakeDirectories(results).ok());
  // Figures that differ from the screen's, to see which was read.
  std::string csv = Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.csv");
  std::string json = Read("tests/loadgen/testdata/aisbench-ours-demo_gsm8k.json");
  json.replace(json.find("41.622 token/s"), 14, "50.5 token/s");
  ASSERT_TRUE(WriteFileAtomically(results + "/demo_gsm8k.csv", csv).ok());
  ASSERT_TRUE(WriteFileAtomically(results + "/demo_gsm8k.json", json).ok());
  std::string output = Real("aisbench-perf-screen-doc-example-20251106-demo_gsm8k.txt");
  output.replace(
      output.find("outputs/default/20251106_103326/performances/vllm-api-stream-chat"),
      std::string("outputs/default/20251106_103326/performances/vllm-api-stream-chat").size(),
      results);
  RecordedRunner runner(output);
  absl::StatusOr<RunOutput> out = RunAisBench(Options(), AisBenchOptions(), runner);
  ASSERT_THAT(out, IsOk());
  EXPECT_DOUBLE_EQ(out->result.generate_speed(), 50.5);
  EXPECT_THAT(runner.argv_, Contains("--batch-size"));

  // Without the files, the printed tables.
  RecordedRunner screen_only(Real("aisbench-perf-screen-doc-example-20251106-demo_gsm8k.txt"));
  out = RunAisBench(Options(), AisBenchOptions(), screen_only);
  ASSERT_THAT(out, IsOk());
  EXPECT_DOUBLE_EQ(out->result.generate_speed(), 41.622);

  RecordedRunner failed("Traceback (most recent call last):\nConnectionRefusedError\n");
  EXPECT_THAT(
      RunAisBench(Options(), AisBenchOptions(), failed),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("ais_bench exited with 0"), HasSubstr("ConnectionRefusedError"))));
}

}  // namespace
}  // namespace crest::loadgen
