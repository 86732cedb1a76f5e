#include "loadgen/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "google/protobuf/util/time_util.h"

#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

std::string Gsm8kDir() {
  const char* env = std::getenv("CREST_SOURCE_DIR");
  std::string root =
      env != nullptr ? env
                     : std::string(__FILE__).substr(0, std::string(__FILE__).rfind("/loadgen/"));
  return root + "/data/gsm8k";
}

absl::StatusOr<Invocation> Parse(const std::string& args) {
  CLI::App app("test", "crest-bench");
  BenchFlags flags(app);
  try {
    app.parse(args, false);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return flags.Resolve();
}

TEST(BenchFlagsTest, HttpClientChoice) {
  const std::string base = "--DatasetPath " + Gsm8kDir() + " --Http http://127.0.0.1:1";
  absl::StatusOr<Invocation> inv = Parse(base);
  ASSERT_THAT(inv, IsOk());
  EXPECT_EQ(inv->run.http_client, HttpClient::kAuto);
  inv = Parse(base + " --http-client libcurl");
  ASSERT_THAT(inv, IsOk());
  EXPECT_EQ(inv->run.http_client, HttpClient::kLibcurl);
  EXPECT_THAT(Parse(base + " --http-client nghttp2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--http-client")));
}

TEST(BenchFlagsTest, MindieSpellingsFillTheSpec) {
  absl::StatusOr<Invocation> inv =
      Parse("--DatasetPath " + Gsm8kDir() +
            " --DatasetType gsm8k --ModelName llama3 --ModelPath /w --TestType client"
            " --Http http://127.0.0.1:1025 --ManagementHttp http://127.0.0.2:1026 --Concurrency 199"
            " --RequestRate 12.5 --Distribution poisson --RequestCount 100 --TaskKind text"
            " --MaxOutputLen 512 --WarmupSize 3 --RequestTimeOut 30 --Tokenizer False --seed 7"
            " --json out.json --csv out.csv --cpus 0-1");
  ASSERT_THAT(inv, IsOk());
  const crest::v1::BenchmarkSpec& s = inv->run.spec;
  EXPECT_EQ(inv->run.dataset_path, Gsm8kDir() + "/test.jsonl");
  EXPECT_EQ(s.dataset().type(), crest::v1::DATASET_TYPE_GSM8K);
  EXPECT_EQ(s.model_name(), "llama3");
  EXPECT_EQ(s.api(), crest::v1::BENCHMARK_API_MINDIE);
  EXPECT_EQ(s.task_kind(), crest::v1::TASK_KIND_TEXT);
  EXPECT_EQ(s.concurrency(), 199U);
  EXPECT_DOUBLE_EQ(s.request_rate(), 12.5);
  EXPECT_EQ(s.distribution(), crest::v1::ARRIVAL_DISTRIBUTION_POISSON);
  EXPECT_EQ(s.request_count(), 100U);
  EXPECT_EQ(s.max_output_len(), 512U);
  EXPECT_EQ(s.warmup_requests(), 3U);
  EXPECT_EQ(TimeUtil::DurationToSeconds(s.request_timeout()), 30);
  EXPECT_EQ(s.seed(), 7U);
  EXPECT_EQ(inv->run.target.base_url, "http://127.0.0.1:1025");
  EXPECT_EQ(inv->run.target.management_url, "http://127.0.0.2:1026");
  EXPECT_EQ(inv->json_file, "out.json");
  EXPECT_EQ(inv->csv_file, "out.csv");
  EXPECT_EQ(inv->model_path, "/w");
  EXPECT_EQ(inv->run.cpus, (std::vector<uint32_t>{0, 1}));
}

TEST(BenchFlagsTest, LowerCaseAliasesAndDefaults) {
  absl::StatusOr<Invocation> inv =
      Parse("--dataset-path " + Gsm8kDir() +
            "/test.jsonl --concurrency 3 --warmup-requests 2 --api openai --duration 1.5"
            " --distribution constant --insecure-skip-verify");
  ASSERT_THAT(inv, IsOk());
  const crest::v1::BenchmarkSpec& s = inv->run.spec;
  EXPECT_EQ(s.concurrency(), 3U);
  EXPECT_EQ(s.warmup_requests(), 2U);
  EXPECT_EQ(s.api(), crest::v1::BENCHMARK_API_OPENAI);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(s.max_duration()), 1500);
  EXPECT_EQ(s.distribution(), crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  EXPECT_TRUE(inv->run.target.insecure_skip_verify);
  EXPECT_EQ(s.max_output_len(), 20U);  // MindIE's default
  EXPECT_EQ(TimeUtil::DurationToSeconds(s.request_timeout()), 600);
  EXPECT_EQ(s.task_kind(), crest::v1::TASK_KIND_STREAM);
  EXPECT_EQ(inv->run.target.base_url, "https://127.0.0.1:1025");

  inv = Parse("--Concurrency 1");  // the shipped GSM8K when no path is given
  if (inv.ok()) {
    EXPECT_THAT(inv->run.dataset_path, HasSubstr("gsm8k/test.jsonl"));
  } else {
    EXPECT_THAT(inv, StatusIs(absl::StatusCode::kNotFound));  // test binary outside <build>/bin
  }
}

TEST(BenchFlagsTest, SyntheticNeedsLengthAndBound) {
  absl::StatusOr<Invocation> inv =
      Parse("--DatasetType synthetic --SyntheticInputLen 64 --RequestCount 10");
  ASSERT_THAT(inv, IsOk());
  EXPECT_EQ(inv->run.spec.dataset().type(), crest::v1::DATASET_TYPE_SYNTHETIC);
  EXPECT_EQ(inv->run.spec.dataset().synthetic_input_tokens(), 64U);
  EXPECT_THAT(Parse("--DatasetType synthetic --RequestCount 10"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--SyntheticInputLen")));
  EXPECT_THAT(Parse("--DatasetType synthetic --SyntheticInputLen 8"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--RequestCount")));
}

TEST(BenchFlagsTest, BadValuesAreSpecificErrors) {
  EXPECT_THAT(Parse("--DatasetPath /no/such/dir"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/no/such/dir")));
  crest::testing::TempDir empty;
  EXPECT_THAT(Parse("--DatasetPath " + empty.path()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("test.jsonl")));
  EXPECT_THAT(Parse("--RequestRate 1,2 --DatasetPath " + Gsm8kDir()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--RequestRate")));
  EXPECT_THAT(Parse("--Http 127.0.0.1:1025 --DatasetPath " + Gsm8kDir()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--Http")));
  EXPECT_THAT(Parse("--DatasetType jsonl"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--DatasetPath")));
  EXPECT_THAT(Parse("--Tokenizer yes"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse("--TaskKind batch"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse("--TestType engine"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse("--Concurrency 0"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Parse("--NoSuchFlag 1"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// crest-bench refuses what the agent's RunBenchmark would refuse, with the
// same numbers (common/mindie_limits.h), instead of running and failing late.
TEST(BenchFlagsTest, ValuesOutsideTheSharedBenchmarkLimitsAreRefused) {
  const std::string base = "--DatasetPath " + Gsm8kDir() + " --Http http://127.0.0.1:1025";
  EXPECT_THAT(Parse(base + " --Concurrency 100001"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--Concurrency")));
  EXPECT_THAT(Parse(base + " --WarmupSize 100001"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--WarmupRequests")));
  EXPECT_THAT(Parse(base + " --RequestCount 10000001"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--RequestCount")));
  EXPECT_THAT(Parse(base + " --RequestRate 2000000"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected one number in [0, 1000000]")));
  EXPECT_THAT(Parse(base + " --Concurrency 100000 --WarmupSize 100000 --RequestCount 10000000"),
              IsOk());
}

}  // namespace
}  // namespace crest::loadgen
