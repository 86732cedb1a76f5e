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
  r.set_qps(3.5);
  r.set_succeeded(7);
  r.set_failed(2);
  (*r.mutable_failures())["timeout"] = 1;
  (*r.mutable_failures())["http_503"] = 1;
  r.set_concurrency(100);
  *r.mutable_duration() = google::protobuf::util::TimeUtil::MillisecondsToDuration(2000);
  return r;
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
