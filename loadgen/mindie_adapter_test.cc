#include "loadgen/mindie_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "google/protobuf/util/time_util.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "loadgen/testing/recorded_runner.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  absl::StatusOr<std::string> text =
      ReadFileToString(crest::testing::SourceDir() + "/tests/loadgen/testdata/" + name);
  EXPECT_THAT(text, IsOk());
  return text.ok() ? *text : "";
}

using testing::RecordedRunner;

RunOptions Gsm8kOptions() {
  RunOptions o;
  o.target.base_url = "http://127.0.0.1:1025";
  o.target.management_url = "http://127.0.0.2:1026";
  o.dataset_path = "/data/gsm8k/test.jsonl";
  o.spec.set_model_name("llama3-8b");
  o.spec.set_concurrency(199);
  o.spec.set_max_output_len(512);
  o.spec.set_request_count(1319);
  o.spec.set_warmup_requests(10);
  *o.spec.mutable_request_timeout() = google::protobuf::util::TimeUtil::SecondsToDuration(600);
  return o;
}

TEST(MindieAdapterTest, ParsesTheCurrentTwoTableOutput) {
  absl::StatusOr<crest::v1::BenchmarkResult> r =
      ParseMindieBenchmarkOutput(TestData("mindie_benchmark_stdout.txt"));
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->generate_speed(), 2032.3211);
  EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), 10.2127);
  EXPECT_DOUBLE_EQ(r->input_generate_speed(), 1095.1011);
  EXPECT_DOUBLE_EQ(r->total_generate_speed(), 3127.4222);
  EXPECT_DOUBLE_EQ(r->qps(), 5.8743);
  EXPECT_DOUBLE_EQ(r->first_token_time().average_ms(), 1179.1434);
  EXPECT_DOUBLE_EQ(r->first_token_time().max_ms(), 2094.2466);
  EXPECT_DOUBLE_EQ(r->first_token_time().min_ms(), 93.7914);
  EXPECT_DOUBLE_EQ(r->first_token_time().p90_ms(), 1961.4021);
  EXPECT_DOUBLE_EQ(r->first_token_time().p99_ms(), 2071.9126);
  EXPECT_EQ(r->first_token_time().samples(), 1319U);
  EXPECT_DOUBLE_EQ(r->decode_time().average_ms(), 59.4683);
  EXPECT_DOUBLE_EQ(r->e2e_latency().average_ms(), 21756.9812);
  EXPECT_EQ(r->succeeded(), 1319U);
  EXPECT_EQ(r->failed(), 0U);
  EXPECT_TRUE(r->failures().empty());
  EXPECT_EQ(r->concurrency(), 199U);
  EXPECT_EQ(google::protobuf::util::TimeUtil::DurationToMilliseconds(r->duration()), 224538);
  EXPECT_EQ(r->input_tokens(), 245875U);   // 186.4102 * 1319, rounded
  EXPECT_EQ(r->output_tokens(), 456325U);  // 345.9629 * 1319, rounded
}

TEST(MindieAdapterTest, ParsesTheOlderSingleGenerateSpeedForm) {
  absl::StatusOr<crest::v1::BenchmarkResult> r =
      ParseMindieBenchmarkOutput(TestData("mindie_benchmark_old_stdout.txt"));
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->generate_speed(), 325.5702);
  EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), 6.5114);
  EXPECT_EQ(r->succeeded(), 197U);
  EXPECT_EQ(r->failed(), 3U);
  EXPECT_EQ(r->failures().at("reported_by_mindie_benchmark"), 3U);
  EXPECT_DOUBLE_EQ(r->e2e_latency().max_ms(), 12011.0101);
  EXPECT_EQ(r->output_tokens(), 39400U);
}

// Found by tests/fuzz/mindie_output_fuzzer: counts outside what the result's
// integer fields hold were converted with undefined behaviour.
TEST(MindieAdapterTest, ImplausibleFiguresAreAnErrorNamingTheRow) {
  const std::string good = TestData("mindie_benchmark_stdout.txt");
  for (const auto& [from, to, row] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"|               Returned |     1319( 100.0% ) |",
            "|               Returned | 72980800000000000000 |", "Returned"},
           {"|               Returned |     1319( 100.0% ) |",
            "|               Returned |     -5 |", "Returned"},
           {"|            Concurrency |                 199 |",
            "|            Concurrency |         99999999999 |", "Concurrency"},
           {"|            TimeElapsed |          224.5381 s |",
            "|            TimeElapsed |     4444444444444 s |", "TimeElapsed"},
           {"|         InputTokens |     186.4102 |", "|         InputTokens | 999999999999999 |",
            "InputTokens"}}) {
    std::string bad = good;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    EXPECT_THAT(ParseMindieBenchmarkOutput(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(row)))
        << to;
  }
}

// Found by tests/fuzz/mindie_output_fuzzer: a cell that is not a number
// ("-03-11 ...", a timestamp run into the table) left its prefix (-3) behind
// as the figure.
TEST(MindieAdapterTest, ACellThatIsNotANumberLeavesTheFigureUnset) {
  std::string output = TestData("mindie_benchmark_stdout.txt");
  const std::string from = "|            Concurrency |                 199 |";
  const size_t at = output.find(from);
  ASSERT_NE(at, std::string::npos);
  output.replace(at, from.size(), "|            Concurrency |     -03-11 09:12:40,118] |");
  absl::StatusOr<crest::v1::BenchmarkResult> r = ParseMindieBenchmarkOutput(output);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->concurrency(), 0U);
  EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), 10.2127);
}

TEST(MindieAdapterTest, OutputWithoutTablesIsAnErrorQuotingTheTail) {
  EXPECT_THAT(ParseMindieBenchmarkOutput(TestData("mindie_benchmark_failed.txt")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Connection refused")));
}

// ---------------------------------------------- real outputs (tests/data/real)

std::string RealBenchmark(const std::string& name) {
  absl::StatusOr<std::string> text =
      ReadFileToString(crest::testing::SourceDir() + "/tests/data/real/benchmark/" + name);
  EXPECT_THAT(text, IsOk());
  return text.ok() ? *text : "";
}

// MindIE 1.0.0 (QwQ-32B, 8792 GSM8K requests): P75, P90, SLO_P90, P99 and
// no P50; GenerateSpeed alone (no Input/Output/TotalGenerateSpeed rows);
// a logger line before each table; "/ μs" and "8792[ 100.0% ]" cells.
TEST(MindieAdapterRealTest, OlderTwoTablesWithoutP50OrTheNewerSpeedRows) {
  absl::StatusOr<crest::v1::BenchmarkResult> r = ParseMindieBenchmarkOutput(
      RealBenchmark("mindie-benchmark-1.0.0-qwq32b-gsm8k-8792req-output.py-115.txt"));
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->generate_speed(), 368.6777);
  EXPECT_DOUBLE_EQ(r->generate_speed_per_client(), 36.8678);
  EXPECT_FALSE(r->has_input_generate_speed());
  EXPECT_FALSE(r->has_total_generate_speed());
  EXPECT_DOUBLE_EQ(r->qps(), 0.8206);
  EXPECT_EQ(r->succeeded(), 8792U);
  EXPECT_EQ(r->failed(), 0U);
  EXPECT_EQ(r->concurrency(), 10U);
  EXPECT_EQ(google::protobuf::util::TimeUtil::DurationToMilliseconds(r->duration()), 10714432);
  const crest::v1::LatencyStats& ftt = r->first_token_time();
  EXPECT_DOUBLE_EQ(ftt.average_ms(), 64.7768);
  EXPECT_DOUBLE_EQ(ftt.max_ms(), 848.3901);
  EXPECT_DOUBLE_EQ(ftt.min_ms(), 49.9074);
  EXPECT_FALSE(ftt.has_p50_ms());
  EXPECT_DOUBLE_EQ(ftt.p75_ms(), 69.1345);
  EXPECT_DOUBLE_EQ(ftt.p90_ms(), 74.367);
  EXPECT_DOUBLE_EQ(ftt.slo_p90_ms(), 74.367);
  EXPECT_DOUBLE_EQ(ftt.p99_ms(), 93.7642);
  EXPECT_EQ(ftt.samples(), 8792U);
  EXPECT_DOUBLE_EQ(r->decode_time().average_ms(), 27.0037);
  EXPECT_DOUBLE_EQ(r->decode_time().slo_p90_ms(), 27.6082);
  EXPECT_DOUBLE_EQ(r->e2e_latency().average_ms(), 12176.1428);
  EXPECT_EQ(r->output_tokens(), 3950172U);  // 449.2916 x 8792, rounded
  EXPECT_EQ(r->input_tokens(), 526609U);    // 59.8964 x 8792, rounded
}

// A newer build (DeepSeek-V3, one request): Output/Input/TotalGenerateSpeed,
// no logger line before the performance table.
TEST(MindieAdapterRealTest, NewerBuildsSpeedRowsAreRead) {
  for (const auto& [file, output, input, total] :
       std::vector<std::tuple<std::string, double, double, double>>{
           {"mindie-benchmark-newer-deepseek-v3-1req-output.py-121-dosampling-false.txt", 5.2124,
            29.1335, 34.3459},
           {"mindie-benchmark-newer-deepseek-v3-1req-output.py-121-dosampling-true.txt", 5.3221,
            32.6631, 37.9852}}) {
    SCOPED_TRACE(file);
    absl::StatusOr<crest::v1::BenchmarkResult> r = ParseMindieBenchmarkOutput(RealBenchmark(file));
    ASSERT_THAT(r, IsOk());
    EXPECT_DOUBLE_EQ(r->generate_speed(), output);
    EXPECT_DOUBLE_EQ(r->input_generate_speed(), input);
    EXPECT_DOUBLE_EQ(r->total_generate_speed(), total);
    EXPECT_EQ(r->succeeded(), 1U);
    EXPECT_EQ(r->concurrency(), 128U);
    EXPECT_FALSE(r->first_token_time().has_p50_ms());
    EXPECT_TRUE(r->first_token_time().has_slo_p90_ms());
  }
}

// 200 requests: a DecodeTime whose SLO_P90 is far from its P90, and a
// DecoderBatchsize SLO_P90 of "/".
TEST(MindieAdapterRealTest, TwoHundredRequestRunKeepsEveryPercentileItPrints) {
  absl::StatusOr<crest::v1::BenchmarkResult> r = ParseMindieBenchmarkOutput(
      RealBenchmark("mindie-benchmark-qwq32b-gsm8k-200req-output.py-114.txt"));
  ASSERT_THAT(r, IsOk());
  EXPECT_DOUBLE_EQ(r->generate_speed(), 35.9032);
  EXPECT_EQ(r->succeeded(), 200U);
  EXPECT_DOUBLE_EQ(r->decode_time().p90_ms(), 29.1581);
  EXPECT_DOUBLE_EQ(r->decode_time().slo_p90_ms(), 507.8787);
  EXPECT_DOUBLE_EQ(r->decode_time().max_ms(), 240991.5447);
}

// Every recorded output of the corpus: a result with a figure, or the one
// refusal of a run that logged only its common table.
TEST(MindieAdapterRealTest, EveryRecordedOutputParsesOrIsRefusedByName) {
  int outputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(crest::testing::SourceDir() +
                                                               "/tests/data/real/benchmark")) {
    const std::string name = entry.path().filename().string();
    if (name.find("-output") == std::string::npos) continue;
    ++outputs;
    SCOPED_TRACE(name);
    absl::StatusOr<crest::v1::BenchmarkResult> r = ParseMindieBenchmarkOutput(RealBenchmark(name));
    if (name.find("common-only") != std::string::npos) {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
      continue;
    }
    ASSERT_THAT(r, IsOk());
    EXPECT_GT(r->generate_speed(), 0);
    EXPECT_GT(r->succeeded(), 0U);
    EXPECT_FALSE(r->first_token_time().has_p50_ms());
    EXPECT_TRUE(r->first_token_time().has_p99_ms());
  }
  EXPECT_GE(outputs, 5);
}

// Only the common table was logged: no latencies, so no usable run.
TEST(MindieAdapterRealTest, CommonTableAloneIsRefusedNamingTheMissingTable) {
  EXPECT_THAT(ParseMindieBenchmarkOutput(RealBenchmark(
                  "mindie-benchmark-qwq32b-gsm8k-8792req-common-only-output.py-120.txt")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("has the \"The BenchMark test common metric result is:\" "
                                       "table but not"),
                             HasSubstr("MINDIE_LOG_TO_STDOUT"))));
}

// The command line a user ran (QwQ-32B): every flag of it is one the adapter
// builds, spelled the same.
TEST(MindieAdapterRealTest, TheRealCommandLinesFlagsAreTheAdapters) {
  const std::string real = RealBenchmark("mindie-benchmark-command-line-qwq32b.txt");
  RunOptions o = Gsm8kOptions();
  MindieToolOptions tool;
  tool.model_path = "/weights/qwq32b_mindie/QwQ-32B";
  absl::StatusOr<std::vector<std::string>> args = BuildMindieBenchmarkArgs(o, tool);
  ASSERT_THAT(args, IsOk());
  for (const char* flag :
       {"--DatasetPath", "--DatasetType", "--ModelName", "--ModelPath", "--TestType", "--Http",
        "--ManagementHttp", "--Concurrency", "--MaxOutputLen"}) {
    EXPECT_THAT(real, HasSubstr(flag));
    EXPECT_THAT(*args, ::testing::Contains(std::string(flag)));
  }
  EXPECT_THAT(real, HasSubstr("export MINDIE_LOG_TO_STDOUT=\"benchmark:1; client:1\""));
  EXPECT_THAT(MindieBenchmarkEnv(), ElementsAre("MINDIE_LOG_TO_STDOUT=benchmark:1; client:1"));
}

TEST(MindieAdapterTest, BuildsTheToolsCommandLineFromTheSpec) {
  MindieToolOptions tool;
  tool.binary = "/opt/mindie/bin/benchmark";
  tool.model_path = "/data/weights";
  tool.save_path = "/tmp/out";
  RunOptions o = Gsm8kOptions();
  o.spec.set_request_rate(8);
  o.spec.set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  absl::StatusOr<std::vector<std::string>> args = BuildMindieBenchmarkArgs(o, tool);
  ASSERT_THAT(args, IsOk());
  EXPECT_THAT(
      *args,
      ElementsAre("/opt/mindie/bin/benchmark", "--DatasetPath", "/data/gsm8k", "--DatasetType",
                  "gsm8k", "--ModelName", "llama3-8b", "--ModelPath", "/data/weights", "--TestType",
                  "client", "--Http", "http://127.0.0.1:1025", "--ManagementHttp",
                  "http://127.0.0.2:1026", "--Concurrency", "199", "--MaxOutputLen", "512",
                  "--TaskKind", "stream", "--Tokenizer", "True", "--RequestRate", "8",
                  "--Distribution", "uniform", "--RequestCount", "1319", "--WarmupSize", "10",
                  "--RequestTimeOut", "600", "--SavePath", "/tmp/out"));
}

TEST(MindieAdapterTest, RefusesWhatTheToolCannotDo) {
  RunOptions o = Gsm8kOptions();
  *o.spec.mutable_max_duration() = google::protobuf::util::TimeUtil::SecondsToDuration(60);
  EXPECT_THAT(BuildMindieBenchmarkArgs(o, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duration")));
  o = Gsm8kOptions();
  o.spec.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
  EXPECT_THAT(BuildMindieBenchmarkArgs(o, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MindieAdapterTest, RunFeedsRecordedOutputThroughTheParser) {
  RecordedRunner runner(TestData("mindie_benchmark_stdout.txt"));
  absl::StatusOr<RunOutput> out = RunMindieBenchmark(Gsm8kOptions(), {}, runner);
  ASSERT_THAT(out, IsOk());
  EXPECT_DOUBLE_EQ(out->result.generate_speed(), 2032.3211);
  EXPECT_EQ(runner.argv_.front(), "benchmark");
  EXPECT_THAT(runner.env_, ElementsAre(HasSubstr("MINDIE_LOG_TO_STDOUT")));

  RecordedRunner failing(TestData("mindie_benchmark_failed.txt"), 1);
  EXPECT_THAT(RunMindieBenchmark(Gsm8kOptions(), {}, failing),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exited with 1")));
}

TEST(SubprocessRunnerTest, CollectsOutputAndExitCode) {
  SubprocessRunner runner;
  absl::StatusOr<ProcessResult> r = runner.Run(
      {"/bin/sh", "-c", "echo out; echo err >&2; echo $CREST_X; exit 3"}, {"CREST_X=from-env"});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_THAT(r->output, HasSubstr("out\n"));
  EXPECT_THAT(r->output, HasSubstr("err\n"));
  EXPECT_THAT(r->output, HasSubstr("from-env"));
  absl::StatusOr<ProcessResult> missing = runner.Run({"/nonexistent/benchmark"}, {});
  ASSERT_THAT(missing, IsOk());
  EXPECT_EQ(missing->exit_code, 127);
}

}  // namespace
}  // namespace crest::loadgen
