#include "loadgen/mindie_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "google/protobuf/util/time_util.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  const char* env = std::getenv("CREST_SOURCE_DIR");
  std::string root =
      env != nullptr ? env
                     : std::string(__FILE__).substr(0, std::string(__FILE__).rfind("/loadgen/"));
  absl::StatusOr<std::string> text = ReadFileToString(root + "/tests/loadgen/testdata/" + name);
  EXPECT_THAT(text, IsOk());
  return text.ok() ? *text : "";
}

// Replays a recorded run of the tool and remembers what it was asked to run.
class RecordedRunner final : public ProcessRunner {
 public:
  explicit RecordedRunner(std::string output, int exit_code = 0)
      : output_(std::move(output)), exit_code_(exit_code) {}
  absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) override {
    argv_ = argv;
    env_ = env;
    return ProcessResult{exit_code_, output_};
  }
  std::vector<std::string> argv_;
  std::vector<std::string> env_;

 private:
  std::string output_;
  int exit_code_;
};

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
