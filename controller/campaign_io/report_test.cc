#include "controller/campaign_io/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace crest::controller {
namespace {

using ::testing::HasSubstr;

crest::v1::CampaignReport Sample() {
  crest::v1::CampaignReport r;
  r.set_id("c7");
  r.set_name("demo");
  r.set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  auto* m = r.add_models();
  m->set_model("LLaMa3-8B");
  std::vector<std::pair<int64_t, double>> points = {{435, 2845.3}, {500, 2980.3}, {600, 2520.6}};
  int n = 0;
  for (auto [b, speed] : points) {
    auto* t = m->add_trials();
    t->set_id("c7-t" + std::to_string(++n));
    t->set_node("node-1");
    t->mutable_parameters()->set_max_batch_size(b);
    t->mutable_parameters()->set_max_prefill_batch_size(b / 2);
    t->mutable_parameters()->set_concurrency(static_cast<uint32_t>(b - 1));
    t->set_status(crest::v1::TRIAL_OK);
    t->set_npu_block_num(2176);
    t->mutable_result()->set_generate_speed(speed);
    t->mutable_result()->set_generate_speed_per_client(speed / static_cast<double>(b - 1));
    t->mutable_result()->mutable_first_token_time()->set_average_ms(100);
    t->mutable_result()->mutable_decode_time()->set_average_ms(40);
    t->mutable_started()->set_seconds(1800000000);
    t->mutable_finished()->set_seconds(1800000060);
  }
  auto* bad = m->add_trials();
  bad->set_id("c7-t4");
  bad->set_node("node-2");
  bad->mutable_parameters()->set_max_batch_size(700);
  bad->set_status(crest::v1::TRIAL_INFEASIBLE);
  bad->set_reason("out of memory, \"KV\"");
  auto* best = m->mutable_best();
  *best->mutable_parameters() = m->trials(1).parameters();
  best->set_generate_speed(2980.3);
  best->set_generate_speed_per_client(2980.3 / 499);
  r.add_models()->set_model("empty");
  return r;
}

TEST(Report, JsonFollowsTheContract) {
  nlohmann::json j = ReportToJson(Sample());
  EXPECT_EQ(j["id"], "c7");
  EXPECT_EQ(j["state"], "succeeded");
  ASSERT_EQ(j["models"].size(), 2u);
  const auto& m = j["models"][0];
  EXPECT_EQ(m["model"], "LLaMa3-8B");
  for (const char* key :
       {"maxBatchSize", "maxPrefillBatchSize", "supportSelectBatch", "prefillTimeMsPerReq",
        "decodeTimeMsPerReq", "GenerateSpeed", "GenerateSpeedPerClient"}) {
    EXPECT_TRUE(m["best"].contains(key)) << key;
  }
  EXPECT_EQ(m["best"]["maxBatchSize"], 500);
  EXPECT_EQ(m["best"]["maxPrefillBatchSize"], 250);
  ASSERT_EQ(m["trials"].size(), 4u);
  for (const char* key : {"node", "maxBatchSize", "maxPrefillBatchSize", "status", "GenerateSpeed",
                          "GenerateSpeedPerClient", "FirstTokenTime", "DecodeTime", "npuBlockNum",
                          "started", "finished", "reason"}) {
    EXPECT_TRUE(m["trials"][0].contains(key)) << key;
  }
  EXPECT_EQ(m["trials"][0]["status"], "ok");
  EXPECT_EQ(m["trials"][0]["started"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(m["trials"][3]["status"], "infeasible");
  EXPECT_EQ(m["trials"][3]["started"], "");
  EXPECT_TRUE(j["models"][1]["best"].is_null());
}

TEST(Report, TrustFlagsShowOnlyWhenPresent) {
  crest::v1::CampaignReport r = Sample();
  r.mutable_models(0)->mutable_trials(2)->add_flags("client_bound");
  r.mutable_models(0)->mutable_trials(2)->add_flags("count_mismatch");
  nlohmann::json j = ReportToJson(r);
  const auto& trials = j["models"][0]["trials"];
  EXPECT_FALSE(trials[0].contains("flags"));
  EXPECT_EQ(trials[2]["flags"], nlohmann::json::array({"client_bound", "count_mismatch"}));
}

TEST(Report, NodeSpeedsShowInTheJsonAndInTheTableOnlyWhenOneWasCorrected) {
  crest::v1::CampaignReport r = Sample();
  auto add = [&](const std::string& node, double factor, uint32_t runs) {
    auto* n = r.mutable_models(0)->add_node_speeds();
    n->set_node(node);
    n->set_factor(factor);
    n->set_shared_runs(runs);
  };
  add("node-1", 1, 2);
  add("node-2", 1, 2);
  EXPECT_EQ(ReportToJson(r)["models"][0]["nodeSpeeds"][1],
            nlohmann::json({{"node", "node-2"}, {"factor", 1.0}, {"sharedRuns", 2}}));
  EXPECT_THAT(ReportToTable(r), ::testing::Not(HasSubstr("node speeds")));
  EXPECT_FALSE(ReportToJson(Sample())["models"][0].contains("nodeSpeeds"));
  r.mutable_models(0)->mutable_node_speeds(0)->set_factor(1.0712);
  r.mutable_models(0)->mutable_node_speeds(1)->set_factor(0.9336);
  EXPECT_THAT(ReportToTable(r),
              HasSubstr("  node speeds, divided out before points were compared: node-1 x1.071 (2 "
                        "shared runs), node-2 x0.934 (2 shared runs)\n"));
}

TEST(Report, AnUntrustedBestIsMarkedAndTheWarningsShow) {
  crest::v1::CampaignReport r = Sample();
  r.mutable_models(0)->mutable_best()->set_untrusted(true);
  r.add_warnings("LLaMa3-8B: every run was flagged (client_bound)");
  nlohmann::json j = ReportToJson(r);
  EXPECT_EQ(j["models"][0]["best"]["untrusted"], true);
  EXPECT_EQ(j["warnings"][0], "LLaMa3-8B: every run was flagged (client_bound)");
  EXPECT_EQ(ReportToJson(Sample())["models"][0]["best"]["untrusted"], false);
  const std::string table = ReportToTable(r);
  EXPECT_THAT(table, HasSubstr("warning: LLaMa3-8B: every run was flagged (client_bound)\n"));
  EXPECT_THAT(table, HasSubstr("2980.3 token/s  UNTRUSTED: every run was flagged"));
  EXPECT_THAT(ReportToTable(Sample()), ::testing::Not(HasSubstr("UNTRUSTED")));
}

TEST(Report, TableMarksThePeak) {
  std::string table = ReportToTable(Sample());
  EXPECT_THAT(table, HasSubstr("campaign c7 (demo): succeeded"));
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  int peaks = 0;
  for (const auto& l : lines) {
    if (l.find("<== peak") != std::string::npos) {
      ++peaks;
      EXPECT_THAT(l, HasSubstr("500"));
      EXPECT_THAT(l, HasSubstr("2980.3"));
    }
  }
  EXPECT_EQ(peaks, 1);
  EXPECT_THAT(table, HasSubstr("infeasible"));
  EXPECT_THAT(table, HasSubstr("best: maxBatchSize=500 maxPrefillBatchSize=250"));
  EXPECT_THAT(table, HasSubstr("model empty\n  no trials"));
}

TEST(Report, TableCountsFlaggedRunsOnlyWhereEveryRunWasFlagged) {
  crest::v1::CampaignReport r = Sample();
  auto* m = r.mutable_models(0);
  // A second run at 435 that crest-bench bottlenecked, and 600's only run.
  auto* again = m->add_trials();
  *again = m->trials(0);
  again->set_id("c7-t5");
  again->set_repeat(1);
  again->set_node("node-2");
  again->mutable_result()->set_generate_speed(3500);
  again->add_flags("client_bound");
  m->mutable_trials(2)->add_flags("count_mismatch");
  std::vector<std::string> lines = absl::StrSplit(ReportToTable(r), '\n');
  auto row = [&](const std::string& point) {
    for (const auto& l : lines) {
      if (absl::StartsWith(l, "  " + point + " ")) return l;
    }
    return std::string();
  };
  // 435's figure is its trusted run's, from node-1 only, and the row says
  // what it left out.
  EXPECT_THAT(row("435"), HasSubstr("2845.3"));
  EXPECT_THAT(row("435"), ::testing::Not(HasSubstr("node-2")));
  EXPECT_THAT(row("435"), HasSubstr("(1 flagged run not counted: client_bound)"));
  EXPECT_THAT(row("500"), ::testing::Not(HasSubstr("flagged")));
  EXPECT_THAT(row("600"), HasSubstr("2520.6"));
  EXPECT_THAT(row("600"), HasSubstr("flagged (count_mismatch): not evidence"));
}

// Sample() with a kept calibration and a rate search of two runs.
crest::v1::CampaignReport AfterSearchSample() {
  crest::v1::CampaignReport r = Sample();
  auto* m = r.mutable_models(0);
  auto* c = m->mutable_calibration();
  c->set_outcome("kept");
  c->set_max_batch_size(500);
  c->set_prefill_time_ms_per_req(100);
  c->set_decode_time_ms_per_req(40);
  c->set_generate_speed_before(2980.3);
  c->set_generate_speed_after(3010.5);
  c->set_runs_before(1);
  c->set_runs_after(1);
  c->set_band(0.0566);
  c->set_change(0.0101);
  c->set_reason("throughput rose 1.0%");
  auto* rs = m->mutable_rate_search();
  rs->set_max_batch_size(500);
  rs->set_concurrency(1000);
  rs->set_done(true);
  rs->set_best_rate(8);
  rs->set_best_generate_speed(2950);
  rs->set_reason("throughput stopped rising at 10 requests/s");
  for (auto [rate, speed, rises] : {std::tuple{8.0, 2950.0, false}, {10.0, 2960.0, false}}) {
    auto* p = rs->add_points();
    p->set_request_rate(rate);
    p->set_generate_speed(speed);
    p->set_status("ok");
    p->set_rises(rises);
    p->set_daemon_pid(77);
    auto* t = m->add_trials();
    t->set_id("c7-r" + std::to_string(static_cast<int>(rate)));
    t->set_rate_search(true);
    t->set_status(crest::v1::TRIAL_OK);
    t->mutable_parameters()->set_max_batch_size(500);
    t->mutable_parameters()->set_request_rate(rate);
    t->mutable_result()->set_generate_speed(speed);
    t->mutable_result()->set_daemon_pid(77);
  }
  return r;
}

TEST(Report, CalibrationAndRateCurveInTheJson) {
  nlohmann::json m = ReportToJson(AfterSearchSample())["models"][0];
  EXPECT_EQ(m["calibration"]["outcome"], "kept");
  EXPECT_TRUE(m["calibration"]["kept"].get<bool>());
  EXPECT_DOUBLE_EQ(m["calibration"]["GenerateSpeedBefore"].get<double>(), 2980.3);
  EXPECT_DOUBLE_EQ(m["calibration"]["GenerateSpeedAfter"].get<double>(), 3010.5);
  EXPECT_DOUBLE_EQ(m["calibration"]["change"].get<double>(), 0.0101);
  EXPECT_EQ(m["calibration"]["prefillTimeMsPerReq"], 100);
  const auto& r = m["rate_search"];
  EXPECT_DOUBLE_EQ(r["bestRate"].get<double>(), 8);
  ASSERT_EQ(r["curve"].size(), 2u);
  EXPECT_EQ(r["curve"][1]["requestRate"], 10);
  EXPECT_EQ(r["curve"][1]["daemonPid"], 77);
  const auto& rate_trial = m["trials"][4];
  EXPECT_TRUE(rate_trial["rateSearch"].get<bool>());
  EXPECT_EQ(rate_trial["requestRate"], 8);
  EXPECT_FALSE(m["trials"][0]["rateSearch"].get<bool>());
  EXPECT_FALSE(m["trials"][0].contains("requestRate"));
  // Without either step, neither key.
  nlohmann::json plain = ReportToJson(Sample())["models"][0];
  EXPECT_FALSE(plain.contains("calibration"));
  EXPECT_FALSE(plain.contains("rate_search"));
  crest::v1::CampaignReport skipped = Sample();
  skipped.mutable_models(0)->mutable_calibration()->set_outcome("skipped");
  nlohmann::json s = ReportToJson(skipped)["models"][0]["calibration"];
  EXPECT_FALSE(s["kept"].get<bool>());
  EXPECT_FALSE(s.contains("GenerateSpeedAfter"));
  EXPECT_FALSE(s.contains("change"));
}

TEST(Report, TableShowsBothCalibrationFiguresAndTheRateCurve) {
  std::string table = ReportToTable(AfterSearchSample());
  EXPECT_THAT(table, HasSubstr("calibration at 500: supportSelectBatch prefillTimeMsPerReq=100 "
                               "decodeTimeMsPerReq=40: GenerateSpeed 2980.3 -> 3010.5 token/s: "
                               "kept (throughput rose 1.0%)"));
  EXPECT_THAT(table, HasSubstr("rate search at maxBatchSize 500, Concurrency 1000:"));
  EXPECT_THAT(table, HasSubstr("8.000          2950.0"));
  EXPECT_THAT(table, HasSubstr("<== best rate"));
  // Rate runs are not rows of the maxBatchSize table: one peak, at 500.
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  int rows_500 = 0;
  for (const auto& l : lines) rows_500 += absl::StartsWith(l, "  500 ") ? 1 : 0;
  EXPECT_EQ(rows_500, 1);
}

// A rate judged on a make-up run says how many flagged runs it did not
// count; a rate whose every run was flagged is no evidence.
TEST(Report, RateCurveCountsFlaggedRuns) {
  crest::v1::CampaignReport report = AfterSearchSample();
  auto* rs = report.mutable_models(0)->mutable_rate_search();
  rs->mutable_points(0)->set_flagged_runs(1);
  rs->mutable_points(0)->add_flags("client_bound");
  auto* all_flagged = rs->mutable_points(1);
  all_flagged->set_status("flagged");
  all_flagged->set_flagged_runs(2);
  all_flagged->add_flags("client_bound");
  all_flagged->add_flags("count_mismatch");
  const nlohmann::json curve = ReportToJson(report)["models"][0]["rate_search"]["curve"];
  EXPECT_EQ(curve[0]["flaggedRuns"], 1);
  EXPECT_EQ(curve[0]["flags"], nlohmann::json::array({"client_bound"}));
  EXPECT_EQ(curve[1]["status"], "flagged");
  EXPECT_EQ(curve[1]["flaggedRuns"], 2);
  const nlohmann::json plain =
      ReportToJson(AfterSearchSample())["models"][0]["rate_search"]["curve"];
  EXPECT_FALSE(plain[0].contains("flaggedRuns"));
  EXPECT_FALSE(plain[0].contains("flags"));

  std::string table = ReportToTable(report);
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  auto row = [&](const std::string& rate) {
    for (const auto& l : lines) {
      if (absl::StartsWith(l, "    " + rate + " ")) return l;
    }
    return std::string();
  };
  EXPECT_THAT(row("8.000"), HasSubstr("2950.0"));
  EXPECT_THAT(row("8.000"), HasSubstr("(1 flagged run not counted: client_bound)"));
  EXPECT_THAT(row("8.000"), HasSubstr("<== best rate"));
  EXPECT_THAT(row("10.000"), HasSubstr("flagged (client_bound, count_mismatch): not evidence"));
  EXPECT_THAT(row("10.000"), ::testing::Not(HasSubstr("not counted")));
}

TEST(Report, CsvHasOneQuotedRowPerTrial) {
  std::string csv = ReportToCsv(Sample());
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr("campaign,model,trial,node,status"));
  EXPECT_THAT(lines[2], HasSubstr("c7,LLaMa3-8B,c7-t2,node-1,ok,false,0,0,500,250"));
  EXPECT_THAT(lines[4], HasSubstr(",\"out of memory, \"\"KV\"\"\""));
}

TEST(Report, StatusNames) {
  EXPECT_EQ(TrialStatusName(crest::v1::TRIAL_INTERRUPTED), "interrupted");
  EXPECT_EQ(TrialStatusName(crest::v1::TRIAL_CANCELLED), "cancelled");
  EXPECT_EQ(CampaignStateName(crest::v1::CAMPAIGN_PENDING), "pending");
}

}  // namespace
}  // namespace crest::controller
