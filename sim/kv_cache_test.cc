#include "sim/kv_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

Profile Load(const std::string& name) {
  return LoadProfileFile(testing::ProfileDir() + "/" + name + ".json").value();
}

SimConfig Base() {
  SimConfig c;
  c.model_name = "LLaMa3-8B";
  c.world_size = 1;
  c.npu_mem_size_gb = 17;
  c.cache_block_size = 128;
  c.max_seq_len = 2560;
  return c;
}

TEST(KvCacheTest, Llama3ReferenceCase) {
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(Load("llama3-8b-910b"), Base());
  ASSERT_THAT(kv, IsOk());
  EXPECT_EQ(kv->bytes_per_block, 8 * 1024 * 1024);
  EXPECT_EQ(kv->computed_blocks, 2176);  // the logged npuBlockNum
  EXPECT_EQ(kv->usable_blocks, 2175);
  EXPECT_EQ(kv->kv_heads_per_card, 8);
  // mindie-facts.md: GSM8K in 186, maxOut 512, avgOut 346 -> [362, 1088], start 435.
  int64_t min_blocks = BlocksFor(186, 128);
  int64_t max_blocks = BlocksFor(186, 128) + BlocksFor(512, 128);
  int64_t avg_blocks = BlocksFor(186, 128) + BlocksFor(346, 128);
  EXPECT_EQ(kv->computed_blocks / max_blocks, 362);
  EXPECT_EQ(kv->computed_blocks / min_blocks, 1088);
  EXPECT_EQ(kv->computed_blocks / avg_blocks, 435);
}

TEST(KvCacheTest, BlocksScaleWithMemoryBlockSizeAndTensorParallelism) {
  Profile p = Load("llama3-8b-910b");
  EXPECT_EQ(ComputeKvCache(p, 1, 34, 128)->computed_blocks, 4352);
  EXPECT_EQ(ComputeKvCache(p, 1, 17, 64)->computed_blocks, 4352);
  EXPECT_EQ(ComputeKvCache(p, 2, 17, 128)->computed_blocks, 4352);  // 4 KV heads per card
  EXPECT_EQ(ComputeKvCache(p, 8, 17, 128)->kv_heads_per_card, 1);
  EXPECT_EQ(ComputeKvCache(p, 16, 17, 128)->kv_heads_per_card, 1);  // replicated, not 0
}

TEST(KvCacheTest, AutoMemorySize) {
  SimConfig c = Base();
  c.npu_mem_size_gb = -1;
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(Load("llama3-8b-910b"), c);
  ASSERT_THAT(kv, IsOk());
  EXPECT_EQ(kv->npu_mem_gib, 36);  // floor((64 - 3 - 14.96) * 0.8)
}

TEST(KvCacheTest, OutOfMemoryWhenCacheAndWeightsExceedTheCard) {
  SimConfig c = Base();
  c.npu_mem_size_gb = 50;
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(Load("llama3-8b-910b"), c);
  EXPECT_THAT(kv, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(kv.status().message(), HasSubstr("NPU out of memory"));
}

TEST(KvCacheTest, OutOfMemoryWhenOneMaxSeqLenSequenceDoesNotFit) {
  SimConfig c = Base();
  c.npu_mem_size_gb = 1;  // 128 blocks of 128 tokens
  c.max_seq_len = 128 * 128;
  EXPECT_THAT(PlanKvCache(Load("llama3-8b-910b"), c),
              StatusIs(absl::StatusCode::kResourceExhausted));
  c.max_seq_len = 127 * 128;  // 127 usable blocks: just fits
  EXPECT_THAT(PlanKvCache(Load("llama3-8b-910b"), c), IsOk());
}

TEST(KvCacheTest, SeventyBNeedsFourCards) {
  Profile p = Load("llama3-70b-910b");
  SimConfig c = Base();
  c.npu_mem_size_gb = 20;
  c.world_size = 2;
  EXPECT_THAT(PlanKvCache(p, c), StatusIs(absl::StatusCode::kInvalidArgument));
  c.world_size = 4;
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(p, c);
  ASSERT_THAT(kv, IsOk());
  EXPECT_EQ(kv->kv_heads_per_card, 2);
  EXPECT_EQ(kv->computed_blocks, 20 * 1024 / 5);  // 80*128*2*128*1*2 bytes = 5 MiB
  c.npu_mem_size_gb = 30;                         // 32.9 GiB weights/card + 30 + 4 > 64
  EXPECT_THAT(PlanKvCache(p, c), StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace crest::sim
