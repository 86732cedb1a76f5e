#include "sim/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace crest::sim {
namespace {

using ::crest::testing::IsOk;

StepTimeModel Timing() {
  StepTimeModel t;
  t.decode_base_ms = 10;
  t.decode_per_seq_ms = 1;
  t.decode_per_context_token_ms = 0.5;
  t.prefill_base_ms = 5;
  t.prefill_per_token_ms = 0.25;
  return t;
}

SchedulerConfig Config(int max_batch, int64_t blocks, int block_size = 4) {
  SchedulerConfig c;
  c.max_batch_size = max_batch;
  c.max_prefill_batch_size = max_batch;
  c.max_prefill_tokens = 1000;
  c.block_size = block_size;
  c.num_blocks = blocks;
  return c;
}

TEST(SchedulerTest, OneSequencePrefillThenDecodes) {
  Scheduler s(Config(8, 100), Timing());
  ASSERT_THAT(s.Add({1, 3, 3}), IsOk());
  StepResult p = s.Step();
  EXPECT_EQ(p.kind, StepKind::kPrefill);
  EXPECT_DOUBLE_EQ(p.duration_ms, 5 + 0.25 * 3);
  ASSERT_EQ(p.tokens.size(), 1U);
  EXPECT_EQ(p.tokens[0].generated, 1);
  EXPECT_EQ(s.used_blocks(), 1);  // 4 tokens
  StepResult d1 = s.Step();
  EXPECT_EQ(d1.kind, StepKind::kDecode);
  EXPECT_DOUBLE_EQ(d1.duration_ms, 10 + 1 + 0.5 * 4);  // attends over 4 tokens
  EXPECT_EQ(s.used_blocks(), 2);                       // 5 tokens
  StepResult d2 = s.Step();
  ASSERT_EQ(d2.tokens.size(), 1U);
  EXPECT_TRUE(d2.tokens[0].finished);
  EXPECT_EQ(d2.tokens[0].generated, 3);
  EXPECT_EQ(s.used_blocks(), 0);
  EXPECT_FALSE(s.HasWork());
  EXPECT_EQ(s.Step().kind, StepKind::kNone);
  EXPECT_EQ(s.stats().prefill_steps, 1);
  EXPECT_EQ(s.stats().decode_steps, 2);
  EXPECT_EQ(s.stats().generated_tokens, 3);
}

TEST(SchedulerTest, MaxBatchSizeBoundsTheRunningBatch) {
  Scheduler s(Config(2, 100), Timing());
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_THAT(s.Add({id, 2, 2}), IsOk());
  StepResult p1 = s.Step();
  EXPECT_EQ(p1.kind, StepKind::kPrefill);
  EXPECT_EQ(p1.batch_size, 2);
  EXPECT_EQ(s.waiting(), 1);
  StepResult d1 = s.Step();  // batch full: the third waits
  EXPECT_EQ(d1.kind, StepKind::kDecode);
  EXPECT_EQ(d1.batch_size, 2);
  EXPECT_EQ(s.running(), 0);
  StepResult p2 = s.Step();
  EXPECT_EQ(p2.kind, StepKind::kPrefill);
  EXPECT_EQ(p2.batch_size, 1);
  EXPECT_EQ(s.Step().kind, StepKind::kDecode);
  EXPECT_FALSE(s.HasWork());
  EXPECT_EQ(s.stats().prefill_steps + s.stats().decode_steps, 4);
}

TEST(SchedulerTest, PrefillBatchBoundedByMaxPrefillBatchSizeAndTokens) {
  SchedulerConfig c = Config(8, 100);
  c.max_prefill_batch_size = 2;
  c.max_prefill_tokens = 12;
  Scheduler s(c, Timing());
  for (uint64_t id = 1; id <= 5; ++id) ASSERT_THAT(s.Add({id, 5, 2}), IsOk());
  // Prefill first: batches of at most 2 sequences and 12 tokens (2 x 5).
  EXPECT_EQ(s.Step().batch_size, 2);
  EXPECT_EQ(s.Step().batch_size, 2);
  EXPECT_EQ(s.Step().batch_size, 1);
  StepResult d = s.Step();
  EXPECT_EQ(d.kind, StepKind::kDecode);
  EXPECT_EQ(d.batch_size, 5);
  EXPECT_FALSE(s.HasWork());

  c.max_prefill_tokens = 9;  // now only one 5-token prompt fits per batch
  Scheduler t(c, Timing());
  for (uint64_t id = 1; id <= 2; ++id) ASSERT_THAT(t.Add({id, 5, 2}), IsOk());
  EXPECT_EQ(t.Step().batch_size, 1);
  EXPECT_EQ(t.Step().batch_size, 1);
}

TEST(SchedulerTest, PreemptsNewestByRecomputeWhenBlocksRunOut) {
  // Blocks of 2 tokens, 4 blocks; two sequences of 1 prompt token, 6 outputs.
  Scheduler s(Config(8, 4, 2), Timing());
  ASSERT_THAT(s.Add({1, 1, 6}), IsOk());
  ASSERT_THAT(s.Add({2, 1, 6}), IsOk());
  EXPECT_EQ(s.Step().batch_size, 2);  // prefill: 2 tokens each, 1 block each
  EXPECT_EQ(s.Step().batch_size, 2);  // decode: 3 tokens each, 2 blocks each
  EXPECT_EQ(s.used_blocks(), 4);
  EXPECT_EQ(s.Step().batch_size, 2);  // 4 tokens each, still 2 blocks each
  StepResult d3 = s.Step();           // both need a 3rd block: 2 is preempted
  EXPECT_THAT(d3.preempted, ::testing::ElementsAre(2U));
  EXPECT_EQ(d3.batch_size, 1);
  EXPECT_EQ(s.waiting(), 1);
  EXPECT_EQ(s.used_blocks(), 3);
  // Sequence 2 (4 tokens, needs 3 blocks) cannot come back until 1 finishes.
  EXPECT_EQ(s.Step().kind, StepKind::kDecode);
  StepResult d5 = s.Step();
  ASSERT_EQ(d5.tokens.size(), 1U);
  EXPECT_TRUE(d5.tokens[0].finished);
  StepResult recompute = s.Step();
  EXPECT_EQ(recompute.kind, StepKind::kPrefill);
  EXPECT_DOUBLE_EQ(recompute.duration_ms, 5 + 0.25 * 4);  // prompt + 3 generated
  ASSERT_EQ(recompute.tokens.size(), 1U);
  EXPECT_EQ(recompute.tokens[0].id, 2U);
  EXPECT_EQ(recompute.tokens[0].generated, 4);  // streaming continues, nothing re-sent
  EXPECT_EQ(s.Step().tokens[0].generated, 5);
  StepResult last = s.Step();
  EXPECT_TRUE(last.tokens[0].finished);
  EXPECT_FALSE(s.HasWork());
  EXPECT_EQ(s.stats().preemptions, 1);
  EXPECT_EQ(s.stats().recomputed_tokens, 4);
  EXPECT_EQ(s.stats().prefill_steps, 2);
  EXPECT_EQ(s.stats().decode_steps, 7);
  EXPECT_EQ(s.stats().generated_tokens, 12);
  EXPECT_EQ(s.used_blocks(), 0);
}

TEST(SchedulerTest, PreemptionChargesOverhead) {
  StepTimeModel t = Timing();
  t.preempt_overhead_ms = 100;
  Scheduler s(Config(8, 4, 2), t);
  ASSERT_THAT(s.Add({1, 1, 6}), IsOk());
  ASSERT_THAT(s.Add({2, 1, 6}), IsOk());
  for (int i = 0; i < 3; ++i) s.Step();
  StepResult d3 = s.Step();
  ASSERT_EQ(d3.preempted.size(), 1U);
  EXPECT_DOUBLE_EQ(d3.duration_ms, 10 + 1 + 0.5 * 4 + 100);
}

TEST(SchedulerTest, SelectBatchDefersPrefillUntilDecodeWasteExceedsWait) {
  SchedulerConfig c = Config(4, 1000);
  c.support_select_batch = true;
  c.prefill_time_ms_per_req = 150;
  c.decode_time_ms_per_req = 50;
  Scheduler s(c, Timing());
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_THAT(s.Add({id, 2, 100}), IsOk());
  EXPECT_EQ(s.Step().kind, StepKind::kPrefill);  // nothing running: prefill
  ASSERT_THAT(s.Add({4, 2, 100}), IsOk());
  // wait = 150 * 3 = 450; waste grows by 50 * (4 - 3) per decision.
  for (int i = 1; i <= 8; ++i) EXPECT_EQ(s.Step().kind, StepKind::kDecode) << i;
  EXPECT_EQ(s.Step().kind, StepKind::kPrefill);
  EXPECT_EQ(s.running(), 4);

  c.support_select_batch = false;  // prefill first
  Scheduler f(c, Timing());
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_THAT(f.Add({id, 2, 100}), IsOk());
  f.Step();
  ASSERT_THAT(f.Add({4, 2, 100}), IsOk());
  EXPECT_EQ(f.Step().kind, StepKind::kPrefill);
}

TEST(SchedulerTest, CancelFreesBlocks) {
  Scheduler s(Config(8, 100), Timing());
  ASSERT_THAT(s.Add({1, 8, 10}), IsOk());
  ASSERT_THAT(s.Add({2, 8, 10}), IsOk());
  s.Step();
  EXPECT_EQ(s.used_blocks(), 6);
  EXPECT_TRUE(s.Cancel(1));
  EXPECT_EQ(s.used_blocks(), 3);
  EXPECT_FALSE(s.Cancel(1));
  EXPECT_EQ(s.running(), 1);
}

TEST(SchedulerTest, RejectsSequencesThatCanNeverFit) {
  Scheduler s(Config(8, 2, 4), Timing());
  EXPECT_FALSE(s.Add({1, 5, 4}).ok());  // 9 tokens = 3 blocks > 2
  EXPECT_TRUE(s.Add({2, 4, 4}).ok());
  EXPECT_FALSE(s.Add({3, 0, 4}).ok());
}

}  // namespace
}  // namespace crest::sim
