#include "controller/search/kv_blocks.h"

#include <gtest/gtest.h>

#include "controller/campaign_io/spec_validator.h"

namespace crest::controller {
namespace {

TEST(KvBlocks, ReferenceCaseOfThePractice) {
  // LLaMA3-8B on 2176 blocks, GSM8K (186 in, 346 out of 512): [362, 1088], start 435.
  crest::v1::CampaignSpec spec;
  ApplySpecDefaults(&spec);
  BlocksPerRequest b = BlocksFor(RequestShapeFor(spec.client()), 128);
  EXPECT_EQ(b.min, 2);
  EXPECT_EQ(b.max, 6);
  EXPECT_EQ(b.avg, 5);
  SearchBounds bounds = DeriveBounds(spec, 2176);
  EXPECT_EQ(bounds.lo, 362);
  EXPECT_EQ(bounds.hi, 1088);
  EXPECT_EQ(bounds.initial, 435);
}

TEST(KvBlocks, ExplicitValuesWinAndStartIsClamped) {
  crest::v1::CampaignSpec spec;
  spec.mutable_search()->set_range_lo(500);
  spec.mutable_search()->set_range_hi(800);
  ApplySpecDefaults(&spec);
  SearchBounds bounds = DeriveBounds(spec, 2176);
  EXPECT_EQ(bounds.lo, 500);
  EXPECT_EQ(bounds.hi, 800);
  EXPECT_EQ(bounds.initial, 500);  // 435 clamped into the range
  EXPECT_FALSE(NeedsBlockNum(crest::v1::SearchSpec()));
  spec.mutable_client()->set_max_output_len(128);  // avg output capped by MaxOutputLen
  EXPECT_EQ(BlocksFor(RequestShapeFor(spec.client()), 128).avg, 3);
}

TEST(KvBlocks, AutoRangeStopsWhereTheRequestsCanFillTheBatch) {
  // The new user's case: 600 requests per run cannot fill a batch above 601.
  crest::v1::CampaignSpec spec;
  spec.mutable_client()->set_request_count(600);
  ApplySpecDefaults(&spec);
  SearchBounds bounds = DeriveBounds(spec, 2176);
  EXPECT_EQ(bounds.lo, 362);
  EXPECT_EQ(bounds.hi, 601);
  EXPECT_TRUE(bounds.capped_by_requests);
  EXPECT_EQ(bounds.initial, 435);
  // Fewer requests than the range's bottom: one point, the largest fillable.
  spec.mutable_client()->set_request_count(100);
  bounds = DeriveBounds(spec, 2176);
  EXPECT_EQ(bounds.lo, 101);
  EXPECT_EQ(bounds.hi, 101);
  EXPECT_EQ(bounds.initial, 101);
  // The practice's GSM8K (1319 requests) is above the whole range: no cap.
  spec.mutable_client()->set_request_count(0);
  EXPECT_FALSE(DeriveBounds(spec, 2176).capped_by_requests);
}

}  // namespace
}  // namespace crest::controller
