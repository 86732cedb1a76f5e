#include "loadgen/client_health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace crest::loadgen {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(LagHistogramTest, PercentilesWithinTheBucketResolution) {
  LagHistogram h;
  EXPECT_EQ(h.PercentileMs(99), 0);
  for (int i = 1; i <= 1000; ++i) h.Record(absl::Microseconds(10 * i));  // 10 us .. 10 ms
  EXPECT_EQ(h.count(), 1000U);
  EXPECT_NEAR(h.PercentileMs(50), 5.0, 5.0 * 0.025);
  EXPECT_NEAR(h.PercentileMs(99), 9.9, 9.9 * 0.025);
  EXPECT_DOUBLE_EQ(h.MaxMs(), 10.0);
  EXPECT_LE(h.PercentileMs(100), 10.0);
}

TEST(LagHistogramTest, AStallCountsOncePerTickItCovered) {
  LagHistogram h;
  for (int i = 0; i < 900; ++i) h.Record(absl::Microseconds(50));
  // One 100 ms stall seen by a 1 ms check: 100 samples (100, 99, ..., 1 ms).
  h.RecordStall(absl::Milliseconds(100), absl::Milliseconds(1));
  EXPECT_EQ(h.count(), 1000U);
  EXPECT_NEAR(h.PercentileMs(99), 90.0, 90.0 * 0.025);
  EXPECT_LT(h.PercentileMs(50), 0.06);
  EXPECT_DOUBLE_EQ(h.MaxMs(), 100.0);
}

TEST(LagHistogramTest, NegativeDurationsCountAsZero) {
  LagHistogram h;
  h.Record(-absl::Milliseconds(3));
  EXPECT_EQ(h.count(), 1U);
  EXPECT_LT(h.PercentileMs(50), 0.001);
}

crest::v1::ClientHealth Easy() {
  crest::v1::ClientHealth h;
  h.set_wall_seconds(30);
  h.set_cpu_utilisation(0.3);
  h.set_loop_busy(0.35);
  h.set_loop_lag_p99_ms(0.2);
  h.set_send_lag_p99_ms(0.1);
  return h;
}

TEST(JudgeClientHealthTest, AnEasyRunIsNotClientBound) {
  crest::v1::ClientHealth h = Easy();
  JudgeClientHealth(0, &h);
  EXPECT_FALSE(h.client_bound());
  EXPECT_EQ(h.client_bound_reason(), "");
  h = Easy();
  JudgeClientHealth(500, &h);
  EXPECT_FALSE(h.client_bound());
}

TEST(JudgeClientHealthTest, EachThresholdMarksTheRunWithItsReason) {
  crest::v1::ClientHealth h = Easy();
  h.set_cpu_utilisation(0.95);
  JudgeClientHealth(0, &h);
  EXPECT_TRUE(h.client_bound());
  EXPECT_THAT(h.client_bound_reason(), HasSubstr("client CPU 95% of one core"));

  h = Easy();
  h.set_loop_busy(0.97);
  JudgeClientHealth(0, &h);
  EXPECT_TRUE(h.client_bound());
  EXPECT_THAT(h.client_bound_reason(), HasSubstr("event loop busy 97%"));

  h = Easy();
  h.set_loop_lag_p99_ms(25);
  JudgeClientHealth(0, &h);
  EXPECT_TRUE(h.client_bound());
  EXPECT_THAT(h.client_bound_reason(), HasSubstr("event-loop lag p99 25.0 ms"));
}

TEST(JudgeClientHealthTest, ShortWindowsAreNotJudgedByTheirCpuOrBusyShare) {
  crest::v1::ClientHealth h = Easy();
  h.set_wall_seconds(0.2);  // e.g. every request refused at once
  h.set_cpu_utilisation(1.0);
  h.set_loop_busy(1.0);
  JudgeClientHealth(0, &h);
  EXPECT_FALSE(h.client_bound());
  h.set_loop_lag_p99_ms(50);  // lag is judged on any window
  JudgeClientHealth(0, &h);
  EXPECT_TRUE(h.client_bound());
}

TEST(JudgeClientHealthTest, SendLagCountsOnlyInRateMode) {
  crest::v1::ClientHealth h = Easy();
  h.set_send_lag_p99_ms(50);
  JudgeClientHealth(0, &h);
  EXPECT_FALSE(h.client_bound());

  // At 10 req/s one gap is 100 ms: 50 ms late is within it.
  h = Easy();
  h.set_send_lag_p99_ms(50);
  JudgeClientHealth(10, &h);
  EXPECT_FALSE(h.client_bound());

  // At 1000 req/s the floor (2 ms) applies; the longest lag, 300 ms, is 1% of
  // the 30 s window.
  h = Easy();
  h.set_send_lag_p99_ms(2.5);
  h.set_send_lag_max_ms(300);
  h.set_slot_waits(7);
  JudgeClientHealth(1000, &h);
  EXPECT_TRUE(h.client_bound());
  EXPECT_THAT(h.client_bound_reason(),
              AllOf(HasSubstr("send lag p99 2.5 ms"), HasSubstr("threshold 2.0 ms"),
                    HasSubstr("max 300.0 ms = 1.0% of the window"),
                    HasSubstr("7 arrivals waited for a free Concurrency slot")));
}

// A schedule missed by a few milliseconds in a long window cannot have moved
// the figure: the server got each request at most max lag late.
TEST(JudgeClientHealthTest, SendLagShortOfAHundredthOfTheWindowIsNoMark) {
  crest::v1::ClientHealth h = Easy();
  h.set_send_lag_p99_ms(11.2);
  h.set_send_lag_max_ms(290);  // 0.97% of 30 s
  JudgeClientHealth(2000, &h);
  EXPECT_FALSE(h.client_bound());
  EXPECT_EQ(h.client_bound_reason(), "");
  // The same lag in a 2.5 s window is 11.6% of it.
  h.set_wall_seconds(2.5);
  JudgeClientHealth(2000, &h);
  EXPECT_TRUE(h.client_bound());
  // No window measured: the lag is judged by its p99 alone.
  h.set_wall_seconds(0);
  JudgeClientHealth(2000, &h);
  EXPECT_TRUE(h.client_bound());
}

TEST(JudgeClientHealthTest, SeveralReasonsAreAllListed) {
  crest::v1::ClientHealth h = Easy();
  h.set_cpu_utilisation(1.0);
  h.set_loop_busy(1.0);
  JudgeClientHealth(0, &h);
  EXPECT_THAT(h.client_bound_reason(), AllOf(HasSubstr("client CPU"), HasSubstr("; event loop")));
}

}  // namespace
}  // namespace crest::loadgen
