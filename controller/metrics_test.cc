#include "controller/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fake_clock.h"

namespace crest::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

crest::v1::Trial OkTrial(const std::string& id, int64_t batch, double speed, uint32_t repeat = 0) {
  crest::v1::Trial t;
  t.set_id(id);
  t.set_campaign_id("c1");
  t.set_model("m");
  t.set_node("node-1");
  t.set_status(crest::v1::TRIAL_OK);
  t.set_repeat(repeat);
  t.mutable_parameters()->set_max_batch_size(batch);
  t.mutable_result()->set_generate_speed(speed);
  t.mutable_result()->mutable_first_token_time()->set_average_ms(250);
  t.mutable_result()->mutable_first_token_time()->set_p99_ms(1500);
  t.mutable_started()->set_seconds(1'800'000'000);
  t.mutable_finished()->set_seconds(1'800'000'042);
  return t;
}

TEST(Metrics, CurveLatencyInSecondsAndBestOfTheMeans) {
  Metrics metrics;
  metrics.RecordTrial(OkTrial("t1", 400, 1000));
  metrics.RecordTrial(OkTrial("t2", 500, 1300, 0));
  metrics.RecordTrial(OkTrial("t3", 500, 900, 1));  // mean 1100 at 500
  metrics.RecordTrial(OkTrial("t4", 600, 1050));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_trial_generate_speed_tokens_per_second{calibration=\"false\","
                              "campaign=\"c1\",max_batch_size=\"400\",model=\"m\",node=\"node-1\"} "
                              "1000"));
  EXPECT_THAT(text, HasSubstr("crest_trial_first_token_average_seconds{calibration=\"false\","
                              "campaign=\"c1\",max_batch_size=\"400\",model=\"m\",node=\"node-1\"} "
                              "0.25"));
  EXPECT_THAT(text, HasSubstr("crest_trial_first_token_p99_seconds{calibration=\"false\","
                              "campaign=\"c1\",max_batch_size=\"400\",model=\"m\",node=\"node-1\"} "
                              "1.5"));
  EXPECT_THAT(text, HasSubstr("crest_best_generate_speed_tokens_per_second{campaign=\"c1\","
                              "model=\"m\"} 1100"));
  EXPECT_THAT(text, HasSubstr("crest_best_max_batch_size{campaign=\"c1\",model=\"m\"} 500"));
  EXPECT_THAT(text, HasSubstr("crest_trials_total{campaign=\"c1\",model=\"m\",status=\"ok\"} 4"));
  EXPECT_THAT(text, HasSubstr("crest_trial_duration_seconds_count{model=\"m\",status=\"ok\"} 4"));
  EXPECT_THAT(text, HasSubstr("crest_trial_duration_seconds_sum{model=\"m\",status=\"ok\"} 168"));
  EXPECT_THAT(text, HasSubstr("crest_campaign_last_trial_end_timestamp_seconds{campaign=\"c1\"} "
                              "1800000042"));
  // No daemon figures in these trials: no preemption series.
  EXPECT_THAT(text, Not(HasSubstr("crest_trial_preemptions{")));
}

TEST(Metrics, PreemptionsOnlyWhenTheDaemonReportedThem) {
  Metrics metrics;
  crest::v1::Trial t = OkTrial("t1", 400, 1000);
  t.mutable_result()->mutable_daemon()->set_preemptions(0);
  metrics.RecordTrial(t);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("crest_trial_preemptions{calibration=\"false\","
                                             "campaign=\"c1\",max_batch_size=\"400\",model=\"m\","
                                             "node=\"node-1\"} 0"));
}

TEST(Metrics, FailedTrialsCountButDrawNoPoint) {
  Metrics metrics;
  crest::v1::Trial t = OkTrial("t1", 700, 0);
  t.set_status(crest::v1::TRIAL_INFEASIBLE);
  metrics.RecordTrial(t);
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text,
              HasSubstr("crest_trials_total{campaign=\"c1\",model=\"m\",status=\"infeasible\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("crest_trial_generate_speed_tokens_per_second{")));
  EXPECT_THAT(text, Not(HasSubstr("crest_best_max_batch_size{")));
}

TEST(Metrics, CampaignStatesAndLastProgress) {
  Metrics metrics;
  crest::v1::Campaign c;
  c.set_id("c1");
  c.set_state(crest::v1::CAMPAIGN_RUNNING);
  c.mutable_started()->set_seconds(1'800'000'100);
  metrics.SetCampaigns({c});
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_campaign_state{campaign=\"c1\",state=\"running\"} 1"));
  EXPECT_THAT(text, HasSubstr("crest_campaign_state{campaign=\"c1\",state=\"succeeded\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_campaigns{state=\"running\"} 1"));
  EXPECT_THAT(text, HasSubstr("crest_campaign_last_progress_timestamp_seconds{campaign=\"c1\"} "
                              "1800000100"));
  crest::v1::Trial t = OkTrial("t1", 400, 1000);
  t.mutable_finished()->set_seconds(1'800'000'500);
  metrics.RecordTrial(t);
  c.set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  metrics.SetCampaigns({c});
  text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_campaign_state{campaign=\"c1\",state=\"running\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_campaign_state{campaign=\"c1\",state=\"succeeded\"} 1"));
  // A later SetCampaigns does not move progress back to the start.
  EXPECT_THAT(text, HasSubstr("crest_campaign_last_progress_timestamp_seconds{campaign=\"c1\"} "
                              "1800000500"));
}

TEST(Metrics, HeartbeatAgeGrowsBetweenUpdates) {
  crest::testing::FakeClock clock(absl::FromUnixSeconds(1'800'000'010));
  Metrics metrics(&clock);
  crest::v1::AgentInfo ready;
  ready.set_node_name("node-1");
  ready.set_state(crest::v1::AGENT_READY);
  ready.mutable_last_seen()->set_seconds(1'800'000'008);
  crest::v1::AgentInfo lost;
  lost.set_node_name("node-2");
  lost.set_state(crest::v1::AGENT_LOST);
  lost.mutable_last_seen()->set_seconds(1'800'000'000);
  metrics.SetAgentCounts({ready, lost});
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_agent_heartbeat_age_seconds{node=\"node-1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("crest_agent_heartbeat_age_seconds{node=\"node-2\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("crest_agent_up{node=\"node-1\"} 1"));
  EXPECT_THAT(text, HasSubstr("crest_agent_up{node=\"node-2\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_agents{state=\"lost\"} 1"));
  EXPECT_THAT(text, HasSubstr("# HELP crest_agent_heartbeat_age_seconds "));
  clock.Advance(absl::Seconds(30));
  EXPECT_THAT(metrics.Serialize(),
              HasSubstr("crest_agent_heartbeat_age_seconds{node=\"node-2\"} 40\n"));
}

TEST(Metrics, EveryLossOfAnAgentCounts) {
  Metrics metrics;
  metrics.RecordAgentLost("node-1");
  metrics.RecordAgentLost("node-2");
  metrics.RecordAgentLost("node-1");
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_agent_lost_total{node=\"node-1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("crest_agent_lost_total{node=\"node-2\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE crest_agent_lost_total counter"));
}

}  // namespace
}  // namespace crest::controller
