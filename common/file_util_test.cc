#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::crest::testing::TempDir;

TEST(FileUtil, AtomicWriteReplacesContentsAndLeavesNoTemporary) {
  TempDir dir;
  std::string path = dir.File("state.json");
  CREST_ASSERT_OK(WriteFileAtomically(path, "first"));
  CREST_ASSERT_OK(WriteFileAtomically(path, "second", 0600));
  EXPECT_EQ(*ReadFileToString(path), "second");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(FileUtil, MissingFileIsNotFoundWithItsPath) {
  EXPECT_THAT(ReadFileToString("/nonexistent/crest/x"),
              StatusIs(absl::StatusCode::kNotFound, ::testing::HasSubstr("/nonexistent/crest/x")));
}

TEST(FileUtil, WriteIntoMissingDirectoryFailsCleanly) {
  EXPECT_THAT(WriteFileAtomically("/nonexistent/crest/x", "y"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(FileUtil, MakeDirectoriesCreatesParents) {
  TempDir dir;
  CREST_ASSERT_OK(MakeDirectories(dir.File("a/b/c")));
  EXPECT_TRUE(std::filesystem::is_directory(dir.File("a/b/c")));
  CREST_EXPECT_OK(MakeDirectories(dir.File("a/b/c")));
}

}  // namespace
}  // namespace crest
