#include "loadgen/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::loadgen {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

crest::v1::DatasetSpec Type(crest::v1::DatasetType type) {
  crest::v1::DatasetSpec spec;
  spec.set_type(type);
  return spec;
}

TEST(DatasetTest, ResolvesDirectoryOrFile) {
  crest::testing::TempDir dir;
  ASSERT_THAT(WriteFileAtomically(dir.File("test.jsonl"), "{\"question\":\"q\"}\n"), IsOk());
  EXPECT_EQ(*ResolveDatasetPath(dir.path()), dir.File("test.jsonl"));
  EXPECT_EQ(*ResolveDatasetPath(dir.File("test.jsonl")), dir.File("test.jsonl"));
  EXPECT_THAT(ResolveDatasetPath(dir.File("nope")), StatusIs(absl::StatusCode::kNotFound));
  crest::testing::TempDir empty;
  EXPECT_THAT(ResolveDatasetPath(empty.path()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("test.jsonl")));
  EXPECT_THAT(ResolveDatasetPath(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetTest, ReadsGsm8kQuestionsAndJsonlPrompts) {
  crest::testing::TempDir dir;
  ASSERT_THAT(
      WriteFileAtomically(dir.File("g.jsonl"),
                          "{\"question\":\"a\",\"answer\":\"1\"}\n\n{\"question\":\"b\"}\n"),
      IsOk());
  EXPECT_THAT(*LoadPrompts(Type(crest::v1::DATASET_TYPE_GSM8K), dir.File("g.jsonl"), 0),
              ElementsAre("a", "b"));
  ASSERT_THAT(WriteFileAtomically(dir.File("p.jsonl"), "{\"prompt\":\"x\"}\n"), IsOk());
  EXPECT_THAT(*LoadPrompts(Type(crest::v1::DATASET_TYPE_JSONL), dir.File("p.jsonl"), 0),
              ElementsAre("x"));
}

TEST(DatasetTest, BadLinesNameFileAndLine) {
  crest::testing::TempDir dir;
  ASSERT_THAT(WriteFileAtomically(dir.File("bad.jsonl"), "{\"prompt\":\"x\"}\n{oops\n"), IsOk());
  EXPECT_THAT(LoadPrompts(Type(crest::v1::DATASET_TYPE_JSONL), dir.File("bad.jsonl"), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.jsonl:2")));
  ASSERT_THAT(WriteFileAtomically(dir.File("nofield.jsonl"), "{\"text\":\"x\"}\n"), IsOk());
  EXPECT_THAT(LoadPrompts(Type(crest::v1::DATASET_TYPE_JSONL), dir.File("nofield.jsonl"), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"prompt\"")));
  ASSERT_THAT(WriteFileAtomically(dir.File("empty.jsonl"), "\n"), IsOk());
  EXPECT_THAT(LoadPrompts(Type(crest::v1::DATASET_TYPE_JSONL), dir.File("empty.jsonl"), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no prompts")));
}

TEST(DatasetTest, SyntheticPromptsHaveTheAskedLength) {
  crest::v1::DatasetSpec spec = Type(crest::v1::DATASET_TYPE_SYNTHETIC);
  spec.set_synthetic_input_tokens(3);
  EXPECT_THAT(*LoadPrompts(spec, "", 2), ElementsAre("hi hi hi", "hi hi hi"));
  spec.set_synthetic_input_tokens(0);
  EXPECT_THAT(LoadPrompts(spec, "", 2), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace crest::loadgen
