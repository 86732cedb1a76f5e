#include "loadgen/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"

namespace crest::loadgen {
namespace {

using ::testing::HasSubstr;

crest::v1::BenchmarkResult Sample() {
  crest::v1::BenchmarkResult r;
  r.set_generate_speed(1234.5);
  r.set_generate_speed_per_client(12.345);
  r.mutable_first_token_time()->set_average_ms(101);
  r.mutable_first_token_time()->set_p50_ms(100);
  r.mutable_first_token_time()->set_p90_ms(120);
  r.mutable_first_token_time()->set_p99_ms(130);
  r.mutable_first_token_time()->set_max_ms(140);
  r.mutable_decode_time()->set_average_ms(10);
  // crest-bench's own runs give every percentile (run_statistics.cc).
  r.mutable_decode_time()->set_p50_ms(9);
  r.mutable_decode_time()->set_p90_ms(12);
  r.mutable_decode_time()->set_p99_ms(15);
  r.set_qps(3.5);
  r.set_succeeded(7);
  r.set_failed(2);
  (*r.mutable_failures())["timeout"] = 1;
  (*r.mutable_failures())["http_503"] = 1;
  r.set_concurrency(100);
  *r.mutable_duration() = google::protobuf::util::TimeUtil::MillisecondsToDuration(2000);
  return r;
}

// A tool's run (MindIE's benchmark: no P50; P75 and SLO_P90 besides): the
// keys stay, a percentile the tool lacks is null, never 0, and the table
// prints "/" as MindIE does.
TEST(ReportTest, APercentileTheToolLacksIsNullAndTheExtraOnesAreKept) {
  crest::v1::BenchmarkResult r = Sample();
  r.mutable_first_token_time()->clear_p50_ms();
  r.mutable_first_token_time()->set_p75_ms(110);
  r.mutable_first_token_time()->set_slo_p90_ms(121);
  RunOptions o;
  ReportContext ctx{&o, "mindie-benchmark"};
  nlohmann::json j = nlohmann::json::parse(FormatJson(r, ctx));
  ASSERT_TRUE(j["FirstTokenTime"].contains("p50"));
  EXPECT_TRUE(j["FirstTokenTime"]["p50"].is_null());
  EXPECT_DOUBLE_EQ(j["FirstTokenTime"]["p75"].get<double>(), 110);
  EXPECT_DOUBLE_EQ(j["FirstTokenTime"]["slo_p90"].get<double>(), 121);
  EXPECT_FALSE(j["DecodeTime"].contains("p75"));
  EXPECT_TRUE(j["InputGenerateSpeed"].is_null());
  EXPECT_TRUE(j["TotalGenerateSpeed"].is_null());
  std::string table = FormatTable(r, ctx);
  EXPECT_THAT(table, HasSubstr("FirstTokenTime"));
  EXPECT_THAT(table, ::testing::ContainsRegex("FirstTokenTime +101\\.0000 ms +140\\.0000 ms "
                                              "+0\\.0000 ms +/ +120\\.0000 ms"));
}

TEST(ReportTest, JsonHasTheContractKeys) {
  RunOptions o;
  o.target.base_url = "http://h:1";
  o.spec.set_concurrency(100);
  o.spec.set_model_name("m");
  ReportContext ctx{&o, "crest-bench"};
  nlohmann::json j = nlohmann::json::parse(FormatJson(Sample(), ctx));
  EXPECT_DOUBLE_EQ(j["GenerateSpeed"].get<double>(), 1234.5);
  EXPECT_DOUBLE_EQ(j["GenerateSpeedPerClient"].get<double>(), 12.345);
  for (const char* key : {"FirstTokenTime", "DecodeTime"}) {
    ASSERT_TRUE(j[key].is_object()) << key;
    for (const char* stat : {"average", "p50", "p90", "p99", "max"}) {
      EXPECT_TRUE(j[key][stat].is_number()) << key << "." << stat;
    }
  }
  EXPECT_DOUBLE_EQ(j["FirstTokenTime"]["p90"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(j["QPS"].get<double>(), 3.5);
  EXPECT_TRUE(j["succeeded"].is_number_integer());
  EXPECT_EQ(j["succeeded"].get<int>(), 7);
  EXPECT_EQ(j["failed"].get<int>(), 2);
  EXPECT_EQ(j["failures"]["timeout"].get<int>(), 1);
  EXPECT_EQ(j["failures"]["http_503"].get<int>(), 1);
  EXPECT_EQ(j["parameters"]["Concurrency"].get<int>(), 100);
  EXPECT_EQ(j["parameters"]["Http"].get<std::string>(), "http://h:1");
  EXPECT_EQ(j["parameters"]["ModelName"].get<std::string>(), "m");
  EXPECT_DOUBLE_EQ(j["TimeElapsed"].get<double>(), 2.0);
}

TEST(ReportTest, ClientHealthIsInTheJsonAndTheTable) {
  crest::v1::BenchmarkResult r = Sample();
  crest::v1::ClientHealth& c = *r.mutable_client();
  c.set_cpu_seconds(1.5);
  c.set_cpu_utilisation(0.97);
  c.set_loop_busy(0.99);
  c.set_loop_lag_p50_ms(0.1);
  c.set_loop_lag_p99_ms(2.5);
  c.set_loop_lag_max_ms(9);
  c.set_send_lag_p99_ms(4);
  c.set_slot_waits(3);
  c.set_client_bound(true);
  c.set_client_bound_reason("client CPU 97% of one core (threshold 90%)");
  RunOptions o;
  o.spec.set_request_rate(100);
  ReportContext ctx{&o, "crest-bench"};
  nlohmann::json j = nlohmann::json::parse(FormatJson(r, ctx));
  EXPECT_DOUBLE_EQ(j["client"]["cpu_seconds"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["client"]["cpu_utilisation"].get<double>(), 0.97);
  EXPECT_DOUBLE_EQ(j["client"]["loop_busy"].get<double>(), 0.99);
  EXPECT_DOUBLE_EQ(j["client"]["loop_lag_ms"]["p99"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["client"]["send_lag_ms"]["p99"].get<double>(), 4);
  EXPECT_EQ(j["client"]["slot_waits"].get<int>(), 3);
  EXPECT_TRUE(j["client"]["client_bound"].get<bool>());
  EXPECT_THAT(j["client"]["client_bound_reason"].get<std::string>(), HasSubstr("client CPU"));
  std::string table = FormatTable(r, ctx);
  EXPECT_THAT(table, HasSubstr("ClientCPU                 1.500 s (97% of one core)"));
  EXPECT_THAT(table, HasSubstr("ClientLoopLag             p50 0.100 ms, p99 2.500 ms"));
  EXPECT_THAT(table, HasSubstr("ClientSendLag             p50 0.000 ms, p99 4.000 ms"));
  EXPECT_THAT(table, HasSubstr("ClientBound               YES: client CPU 97%"));
  // Results from another tool carry no client health: no key, no rows.
  EXPECT_FALSE(nlohmann::json::parse(FormatJson(Sample(), ctx)).contains("client"));
  EXPECT_THAT(FormatTable(Sample(), ctx), ::testing::Not(HasSubstr("ClientBound")));
}

TEST(ReportTest, TableHasMindieRows) {
  std::string table = FormatTable(Sample(), {});
  EXPECT_THAT(table, HasSubstr("The BenchMark test performance metric result is:"));
  EXPECT_THAT(table, HasSubstr("The BenchMark test common metric result is:"));
  EXPECT_THAT(table, HasSubstr("FirstTokenTime"));
  EXPECT_THAT(table, HasSubstr("GenerateSpeedPerClient    12.3450 token/s"));
  EXPECT_THAT(table, HasSubstr("FailureReasons            http_503=1, timeout=1"));
}

TEST(ReportTest, CsvHasOneLinePerRequest) {
  RequestRecord ok;
  ok.index = 0;
  ok.sent = absl::FromUnixMillis(1000);
  ok.ok = true;
  ok.output_tokens = 5;
  ok.http_status = 200;
  RequestRecord bad;
  bad.index = 1;
  bad.failure = "reset";
  std::vector<std::string> lines = absl::StrSplit(FormatCsv({ok, bad}), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_THAT(lines[0], HasSubstr("index,sent_unix_ms,first_token_ms"));
  EXPECT_EQ(lines[1], "0,1000.000,0.000,0.000,0.000,0,5,0,true,,200");
  EXPECT_THAT(lines[2], HasSubstr(",false,reset,0"));
}

}  // namespace
}  // namespace crest::loadgen
