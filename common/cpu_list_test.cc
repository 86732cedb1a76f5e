#include "common/cpu_list.h"

#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpuList, ParsesLscpuNotation) {
  EXPECT_THAT(*ParseCpuList("0-3,8,10-11"), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_THAT(*ParseCpuList("24-47\n"), ::testing::SizeIs(24));
  EXPECT_THAT(*ParseCpuList("5,1,1,3"), ElementsAre(1, 3, 5));
  EXPECT_TRUE(ParseCpuList("  ")->empty());
}

TEST(CpuList, RejectsMalformedInputNamingThePart) {
  EXPECT_THAT(ParseCpuList("0-3,x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"x\"")));
  EXPECT_THAT(ParseCpuList("7-3"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("backwards")));
  EXPECT_THAT(ParseCpuList("3-"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCpuList("-3"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCpuList("0-99999"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CpuList, FormatsCompactly) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({7}), "7");
  EXPECT_EQ(FormatCpuList(*ParseCpuList("24-47,72-95")), "24-47,72-95");
}

}  // namespace
}  // namespace crest
