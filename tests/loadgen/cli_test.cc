// The crest-bench binary: flags, exit codes, the --json/--csv contract and
// the table, run as a real process against the in-process paced server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"
#include "loadgen/mindie_adapter.h"
#include "loadgen/testing/sse_test_server.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::SourceDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Bin() { return ::crest::testing::BinDir() + "/crest-bench"; }

ProcessResult RunBench(std::vector<std::string> args) {
  args.insert(args.begin(), Bin());
  SubprocessRunner runner;
  absl::StatusOr<ProcessResult> r = runner.Run(args, {});
  EXPECT_THAT(r, IsOk());
  return r.ok() ? *r : ProcessResult{-1, ""};
}

std::unique_ptr<testing::SseTestServer> Server() {
  testing::SseServerOptions so;
  so.first_token_delay = absl::Milliseconds(2);
  so.token_interval = absl::Milliseconds(1);
  so.tokens = 6;
  auto server = testing::SseTestServer::Start(so);
  EXPECT_THAT(server, IsOk());
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(CrestBenchCliTest, UnknownFlagIsOneLineAndExitTwo) {
  ProcessResult r = RunBench({"--Concurrrency", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("crest-bench: "));
  EXPECT_THAT(r.output, HasSubstr("--Concurrrency"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(CrestBenchCliTest, BadValuesAreUsageErrors) {
  ProcessResult missing = RunBench({"--DatasetPath", "/no/such/gsm8k"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("/no/such/gsm8k"));
  ProcessResult type = RunBench({"--DatasetType", "ceval"});
  EXPECT_EQ(type.exit_code, 2);
  ProcessResult rate = RunBench({"--RequestRate", "fast"});
  EXPECT_EQ(rate.exit_code, 2);
  EXPECT_THAT(rate.output, HasSubstr("--RequestRate"));
}

TEST(CrestBenchCliTest, HelpListsMindieFlags) {
  ProcessResult r = RunBench({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--DatasetPath", "--Concurrency", "--RequestRate", "--TaskKind",
                           "--WarmupRequests", "--MaxOutputLen", "--insecure-skip-verify"}) {
    EXPECT_THAT(r.output, HasSubstr(flag));
  }
}

TEST(CrestBenchCliTest, RunWritesJsonAndCsvPerTheContract) {
  auto server = Server();
  ASSERT_NE(server, nullptr);
  crest::testing::TempDir dir;
  const std::string json_file = dir.File("result.json");
  const std::string csv_file = dir.File("requests.csv");
  ProcessResult r =
      RunBench({"--Http", server->url(), "--DatasetType", "synthetic", "--SyntheticInputLen", "8",
                "--RequestCount", "10", "--Concurrency", "4", "--MaxOutputLen", "6", "--ModelName",
                "m", "--json", json_file, "--csv", csv_file});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("The BenchMark test performance metric result is:"));
  EXPECT_THAT(r.output, HasSubstr("GenerateSpeedPerClient"));
  EXPECT_THAT(r.output, Not(HasSubstr("ETA")));  // no progress line without a terminal

  absl::StatusOr<std::string> text = ReadFileToString(json_file);
  ASSERT_THAT(text, IsOk());
  nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_GT(j["GenerateSpeed"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["GenerateSpeedPerClient"].get<double>(), j["GenerateSpeed"].get<double>() / 4);
  for (const char* key : {"FirstTokenTime", "DecodeTime"}) {
    for (const char* stat : {"average", "p50", "p90", "p99", "max"}) {
      EXPECT_TRUE(j[key][stat].is_number()) << key << "." << stat;
    }
  }
  EXPECT_GT(j["FirstTokenTime"]["average"].get<double>(), 0);
  EXPECT_GT(j["QPS"].get<double>(), 0);
  EXPECT_EQ(j["succeeded"].get<int>(), 10);
  EXPECT_EQ(j["failed"].get<int>(), 0);
  EXPECT_TRUE(j["failures"].is_object());
  EXPECT_EQ(j["parameters"]["Concurrency"].get<int>(), 4);
  EXPECT_EQ(j["parameters"]["RequestCount"].get<int>(), 10);
  EXPECT_EQ(j["parameters"]["DatasetType"].get<std::string>(), "synthetic");
  EXPECT_EQ(j["OutputTokens"].get<int>(), 60);
  EXPECT_EQ(j["token_count_source"].get<std::string>(), "usage_fields");

  absl::StatusOr<std::string> csv = ReadFileToString(csv_file);
  ASSERT_THAT(csv, IsOk());
  std::vector<std::string> lines = absl::StrSplit(*csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 11U);
  EXPECT_THAT(lines[0], HasSubstr("first_token_ms"));
  EXPECT_THAT(lines[1], HasSubstr(",true,,200"));
}

TEST(CrestBenchCliTest, AllFailedRunStillReportsAndExitsOne) {
  absl::StatusOr<uint16_t> port = testing::ClosedPort();
  ASSERT_THAT(port, IsOk());
  crest::testing::TempDir dir;
  ProcessResult r =
      RunBench({"--Http", "http://127.0.0.1:" + std::to_string(*port), "--RequestCount", "3",
                "--Concurrency", "2", "--json", dir.File("r.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("FailureReasons            connect=3"));
  absl::StatusOr<std::string> text = ReadFileToString(dir.File("r.json"));
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(nlohmann::json::parse(*text)["failures"]["connect"].get<int>(), 3);
}

TEST(CrestBenchCliTest, AdapterModeRunsTheGivenToolAndParsesItsTables) {
  crest::testing::TempDir dir;
  const std::string src = SourceDir();
  // A stand-in `benchmark` that prints a recorded run of the real tool.
  const std::string tool = dir.File("benchmark");
  ASSERT_THAT(WriteFileAtomically(tool,
                                  std::string("#!/bin/sh\ncat ") + src +
                                      "/tests/loadgen/testdata/mindie_benchmark_stdout.txt\n",
                                  0755),
              IsOk());
  ProcessResult r = RunBench(
      {"--use-mindie-benchmark", tool, "--RequestCount", "1319", "--json", dir.File("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  absl::StatusOr<std::string> text = ReadFileToString(dir.File("r.json"));
  ASSERT_THAT(text, IsOk());
  nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_DOUBLE_EQ(j["GenerateSpeed"].get<double>(), 2032.3211);
  EXPECT_EQ(j["parameters"]["engine"].get<std::string>(), "mindie-benchmark");
}

}  // namespace
}  // namespace crest::loadgen
