#include "cli/node_requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/rpc_client.h"

#include "common/testing/status_matchers.h"

namespace crest::cli {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void ParseNodeArgs(CLI::App& app, std::vector<std::string> args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
}

TEST(ParseSet, TypesTheValue) {
  auto i = ParseSet("maxBatchSize=400");
  ASSERT_THAT(i, IsOk());
  EXPECT_EQ(i->key(), "maxBatchSize");
  EXPECT_EQ(i->value_case(), crest::v1::ConfigOverride::kIntValue);
  EXPECT_EQ(i->int_value(), 400);
  EXPECT_EQ(ParseSet("x=-3")->int_value(), -3);

  auto d = ParseSet("prefillTimeMsPerReq=150.5");
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->value_case(), crest::v1::ConfigOverride::kDoubleValue);
  EXPECT_DOUBLE_EQ(d->double_value(), 150.5);

  auto b = ParseSet("supportSelectBatch=TRUE");
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->value_case(), crest::v1::ConfigOverride::kBoolValue);
  EXPECT_TRUE(b->bool_value());
  EXPECT_FALSE(ParseSet("supportSelectBatch=false")->bool_value());
}

TEST(ParseSet, RefusesWhatIsNotKeyEqualsTypedValue) {
  EXPECT_THAT(ParseSet("maxBatchSize"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 "--set \"maxBatchSize\": expected KEY=VALUE"));
  EXPECT_THAT(ParseSet("=5"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KEY=VALUE")));
  for (const char* bad : {"k=abc", "k=", "k=inf", "k=nan", "k=1=2"}) {
    EXPECT_THAT(ParseSet(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("expected an integer, a number, true or false")))
        << bad;
  }
  EXPECT_THAT(ParseSet("k=abc"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--set k=\"abc\": ")));
}

TEST(ParsePin, NoneOddNumaOrACpuList) {
  EXPECT_EQ(ParsePin("none")->mode(), crest::v1::PINNING_NONE);
  EXPECT_EQ(ParsePin("odd-numa")->mode(), crest::v1::PINNING_ODD_NUMA);
  auto list = ParsePin("24-47,72-95");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->mode(), crest::v1::PINNING_CPU_LIST);
  EXPECT_EQ(list->cpu_list(), "24-47,72-95");
  for (const char* bad : {"evens", "", "odd_numa", "NONE"}) {
    EXPECT_THAT(ParsePin(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("expected odd-numa, none or a CPU list")))
        << bad;
  }
  EXPECT_THAT(ParsePin("evens"),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--pin \"evens\"")));
}

TEST(StartRequest, CarriesEveryFlag) {
  StartFlags flags;
  flags.sets = {"maxBatchSize=300", "supportSelectBatch=true"};
  flags.pin = "odd-numa";
  flags.replace = true;
  flags.stream_log = true;
  flags.start_timeout_s = 30;
  auto req = MakeStartRequest(2, flags);
  ASSERT_THAT(req, IsOk());
  EXPECT_EQ(req->slot(), 2u);
  ASSERT_EQ(req->overrides_size(), 2);
  EXPECT_EQ(req->overrides(0).key(), "maxBatchSize");
  EXPECT_EQ(req->overrides(0).int_value(), 300);
  EXPECT_EQ(req->overrides(1).key(), "supportSelectBatch");
  EXPECT_TRUE(req->overrides(1).bool_value());
  EXPECT_EQ(req->pinning().mode(), crest::v1::PINNING_ODD_NUMA);
  EXPECT_TRUE(req->replace_running());
  EXPECT_TRUE(req->stream_log());
  EXPECT_EQ(req->start_timeout().seconds(), 30);
  EXPECT_EQ(StartCallTimeout(flags), absl::Seconds(30) + kDaemonStartMargin);
}

TEST(StartRequest, DefaultsLeaveTheAgentsChoices) {
  auto req = MakeStartRequest(0, StartFlags{});
  ASSERT_THAT(req, IsOk());
  EXPECT_EQ(req->overrides_size(), 0);
  EXPECT_EQ(req->pinning().mode(), crest::v1::PINNING_NONE);
  EXPECT_FALSE(req->has_start_timeout());
  EXPECT_FALSE(req->replace_running());
  EXPECT_EQ(StartCallTimeout(StartFlags{}), kDaemonStartTimeout);
}

TEST(StartRequest, TheFirstBadFlagIsTheError) {
  StartFlags flags;
  flags.sets = {"a=1", "b", "c=x"};
  flags.pin = "evens";
  EXPECT_THAT(MakeStartRequest(0, flags),
              StatusIs(absl::StatusCode::kInvalidArgument, "--set \"b\": expected KEY=VALUE"));
  flags.sets = {"a=1"};
  EXPECT_THAT(MakeStartRequest(0, flags),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--pin \"evens\"")));
  flags.pin = "none";
  flags.start_timeout_s = -1;
  EXPECT_THAT(MakeStartRequest(0, flags),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--start-timeout: ")));
}

TEST(StopRequest, GraceAndItsDeadline) {
  auto req = MakeStopRequest(3, 2.5);
  ASSERT_THAT(req, IsOk());
  EXPECT_EQ(req->slot(), 3u);
  EXPECT_EQ(req->grace().seconds(), 2);
  EXPECT_EQ(req->grace().nanos(), 500000000);
  EXPECT_FALSE(MakeStopRequest(0, 0)->has_grace());
  EXPECT_THAT(MakeStopRequest(0, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, "--grace: expected seconds >= 0"));
  EXPECT_EQ(StopCallTimeout(0), kDaemonStopMargin);
  EXPECT_EQ(StopCallTimeout(10), absl::Seconds(10) + kDaemonStopMargin);
}

TEST(BenchmarkSpec, DefaultsAreMindIEs) {
  auto spec = MakeBenchmarkSpec(BenchFlags{});
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->api(), crest::v1::BENCHMARK_API_MINDIE);
  EXPECT_EQ(spec->task_kind(), crest::v1::TASK_KIND_STREAM);
  EXPECT_EQ(spec->dataset().type(), crest::v1::DATASET_TYPE_GSM8K);
  EXPECT_EQ(spec->distribution(), crest::v1::ARRIVAL_DISTRIBUTION_POISSON);
  EXPECT_EQ(spec->concurrency(), 128u);
  EXPECT_EQ(spec->max_output_len(), 20u);
  EXPECT_EQ(spec->request_timeout().seconds(), 600);
  EXPECT_FALSE(spec->has_max_duration());
}

TEST(BenchmarkSpec, NamesAreCaseInsensitiveAndCarried) {
  BenchFlags b;
  b.api = "OpenAI";
  b.task_kind = "TEXT";
  b.dataset_type = "Synthetic";
  b.synthetic_input_len = 256;
  b.dataset_name = "mine";
  b.distribution = "uniform";
  b.request_rate = 12.5;
  b.request_count = 1000;
  b.warmup = 4;
  b.seed = 7;
  b.model_name = "m";
  b.duration_s = 90;
  auto spec = MakeBenchmarkSpec(b);
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->api(), crest::v1::BENCHMARK_API_OPENAI);
  EXPECT_EQ(spec->task_kind(), crest::v1::TASK_KIND_TEXT);
  EXPECT_EQ(spec->dataset().type(), crest::v1::DATASET_TYPE_SYNTHETIC);
  EXPECT_EQ(spec->dataset().synthetic_input_tokens(), 256u);
  EXPECT_EQ(spec->dataset().name(), "mine");
  EXPECT_EQ(spec->distribution(), crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  EXPECT_DOUBLE_EQ(spec->request_rate(), 12.5);
  EXPECT_EQ(spec->request_count(), 1000u);
  EXPECT_EQ(spec->warmup_requests(), 4u);
  EXPECT_EQ(spec->seed(), 7u);
  EXPECT_EQ(spec->model_name(), "m");
  EXPECT_EQ(spec->max_duration().seconds(), 90);
}

TEST(BenchmarkSpec, EachBadValueNamesItsFlag) {
  auto with = [](auto change) {
    BenchFlags b;
    change(b);
    return MakeBenchmarkSpec(b);
  };
  EXPECT_THAT(with([](BenchFlags& b) { b.api = "tgi"; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--api \"tgi\"")));
  EXPECT_THAT(with([](BenchFlags& b) { b.task_kind = "batch"; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--TaskKind \"batch\"")));
  EXPECT_THAT(with([](BenchFlags& b) { b.dataset_type = "csv"; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--DatasetType \"csv\"")));
  EXPECT_THAT(with([](BenchFlags& b) { b.distribution = "burst"; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--Distribution \"burst\"")));
  EXPECT_THAT(with([](BenchFlags& b) { b.request_rate = -1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--RequestRate: ")));
  EXPECT_THAT(with([](BenchFlags& b) { b.request_timeout_s = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--RequestTimeOut: ")));
  EXPECT_THAT(with([](BenchFlags& b) { b.duration_s = -5; }),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--Duration: ")));
}

TEST(BenchFlags, MindIENamesAndKebabCaseBindTheSameValue) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--Concurrency", "4", "--RequestCount", "8", "--MaxOutputLen", "16", "--WarmupSize",
            "2", "--RequestTimeOut", "30", "--Seed", "9"},
           {"--concurrency", "4", "--request-count", "8", "--max-output-len", "16",
            "--warmup-requests", "2", "--request-timeout", "30", "--seed", "9"}}) {
    CLI::App app;
    BenchFlags b;
    AddBenchFlags(app, &b);
    ParseNodeArgs(app, args);
    EXPECT_EQ(b.concurrency, 4u);
    EXPECT_EQ(b.request_count, 8u);
    EXPECT_EQ(b.max_output_len, 16u);
    EXPECT_EQ(b.warmup, 2u);
    EXPECT_EQ(b.request_timeout_s, 30);
    EXPECT_EQ(b.seed, 9u);
  }
}

TEST(StartFlags, SetRepeatsInOrder) {
  CLI::App app;
  StartFlags flags;
  AddStartFlags(app, &flags);
  ParseNodeArgs(app, {"--set", "maxBatchSize=77", "--pin", "1-3", "--set", "b=true", "--replace",
                      "--start-timeout", "45"});
  EXPECT_THAT(flags.sets, ElementsAre("maxBatchSize=77", "b=true"));
  EXPECT_EQ(flags.pin, "1-3");
  EXPECT_TRUE(flags.replace);
  EXPECT_FALSE(flags.stream_log);
  EXPECT_EQ(flags.start_timeout_s, 45);
  EXPECT_THAT(MakeStartRequest(0, flags), IsOk());
}

}  // namespace
}  // namespace crest::cli
