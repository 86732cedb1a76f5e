#include "controller/search/node_effects.h"

#include <gtest/gtest.h>

#include <cmath>

namespace crest::controller {
namespace {

TEST(NodeFactors, AFasterNodeIsFoundFromThePointsBothMeasured) {
  // Node "a" runs 10% faster than "b" at every point; the points themselves
  // differ (a curve), which the factors must not absorb.
  std::vector<NodeRun> runs = {{100, "a", 1100}, {100, "b", 1000}, {200, "a", 2200},
                               {200, "b", 2000}, {300, "a", 2750}, {300, "b", 2500},
                               {400, "a", 3000}};  // measured by "a" alone
  // Noise 0: no band, no shrinking; the estimate itself.
  auto f = NodeFactors(runs, 0);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at("a").factor, std::sqrt(1.1), 1e-9);
  EXPECT_NEAR(f.at("b").factor, 1 / std::sqrt(1.1), 1e-9);
  EXPECT_NEAR(f.at("a").factor / f.at("b").factor, 1.1, 1e-9);
  EXPECT_EQ(f.at("a").shared_runs, 3u);
}

TEST(NodeFactors, ADifferenceInsideTheNoiseBandLeavesEveryFactorAtOne) {
  // 5% apart on one shared point each: the band of a contrast of one run
  // against one is 3 * 2% * sqrt(2) = 8.49%.
  auto f = NodeFactors({{100, "a", 1050}, {100, "b", 1000}}, 0.02);
  EXPECT_EQ(f.at("a").factor, 1);
  EXPECT_EQ(f.at("b").factor, 1);
}

TEST(NodeFactors, AFactorPastTheBandIsShrunkByTheShareTheBandExplains) {
  // 20% apart on two shared points: contrast log(1.2) = 18.2% against a
  // band of 3 * 2% * sqrt(1/2 + 1/2) = 6%; each node's effect (half the
  // contrast) keeps 1 - (6 / 18.2)^2 of itself.
  auto f =
      NodeFactors({{100, "a", 1200}, {100, "b", 1000}, {200, "a", 2400}, {200, "b", 2000}}, 0.02);
  const double contrast = std::log(1.2);
  const double band = 3 * 0.02;
  const double kept = 1 - (band * band) / (contrast * contrast);
  EXPECT_NEAR(f.at("a").factor, std::exp(contrast / 2 * kept), 1e-9);
  EXPECT_NEAR(f.at("b").factor, std::exp(-contrast / 2 * kept), 1e-9);
  EXPECT_EQ(f.at("a").shared_runs, 2u);
}

TEST(NodeFactors, NodesThatShareNoPointKeepOne) {
  auto f = NodeFactors({{100, "a", 1000}, {200, "b", 3000}, {200, "b", 3100}}, 0.02);
  EXPECT_EQ(f.at("a").factor, 1);
  EXPECT_EQ(f.at("b").factor, 1);
  EXPECT_EQ(f.at("a").shared_runs, 0u);
  EXPECT_TRUE(NodeFactors({}, 0.02).empty());
}

TEST(NodeFactors, GroupsLinkedByNoPointAreEachCentredOnTheirOwnMean) {
  // {a, b} share 100, {c, d} share 200: a is 20% faster than b, d 20% than
  // c, and nothing relates a group to the other.
  auto f = NodeFactors({{100, "a", 1200}, {100, "b", 1000}, {200, "c", 500}, {200, "d", 600}}, 0);
  EXPECT_NEAR(f.at("a").factor, std::sqrt(1.2), 1e-9);
  EXPECT_NEAR(f.at("b").factor, 1 / std::sqrt(1.2), 1e-9);
  EXPECT_NEAR(f.at("c").factor, 1 / std::sqrt(1.2), 1e-9);
  EXPECT_NEAR(f.at("d").factor, std::sqrt(1.2), 1e-9);
}

TEST(NodeFactors, ALinkThroughAThirdNodeRelatesTwoThatShareNoPoint) {
  // a and c never measured the same point; b measured one of each. The
  // least squares carries a/b and b/c into a/c = 1.1 * 1.1.
  auto f = NodeFactors(
      {{100, "a", 1100}, {100, "b", 1000}, {200, "b", 2000}, {200, "c", 2000 / 1.1}}, 0);
  EXPECT_NEAR(f.at("a").factor / f.at("c").factor, 1.21, 1e-6);
  EXPECT_NEAR(f.at("b").factor, 1, 1e-6);
}

}  // namespace
}  // namespace crest::controller
