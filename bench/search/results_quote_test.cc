// docs/search.md quotes the strategies' table of bench/search/RESULTS.md,
// which search-bench writes: every cell it quotes must be the generated one,
// so a regenerated RESULTS.md that moved a figure fails until the quote
// follows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "common/file_util.h"
#include "common/testing/test_paths.h"

namespace crest {
namespace {

// The first Markdown table whose header starts with `| strategy |`: per
// row (by its strategy), the cells by their column's header.
using Table = std::map<std::string, std::map<std::string, std::string>>;

std::vector<std::string> Cells(absl::string_view line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  // A row starts and ends with '|': drop the empty ends.
  if (!cells.empty()) cells.erase(cells.begin());
  if (!cells.empty()) cells.pop_back();
  return cells;
}

Table StrategiesTable(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  Table table;
  if (!text.ok()) return table;
  std::vector<std::string> header;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (header.empty()) {
      if (absl::StartsWith(line, "| strategy |")) header = Cells(line);
      continue;
    }
    if (!absl::StartsWith(line, "|")) break;
    if (absl::StartsWith(line, "|---")) continue;
    std::vector<std::string> row = Cells(line);
    for (size_t i = 1; i < row.size() && i < header.size(); ++i) {
      table[row[0]][header[i]] = row[i];
    }
  }
  return table;
}

TEST(SearchDoc, QuotesTheGeneratedStrategiesTable) {
  const Table results = StrategiesTable(testing::SourceDir() + "/bench/search/RESULTS.md");
  const Table quoted = StrategiesTable(testing::SourceDir() + "/docs/search.md");
  ASSERT_FALSE(results.empty());
  ASSERT_FALSE(quoted.empty());
  for (const auto& [strategy, cells] : quoted) {
    ASSERT_EQ(results.count(strategy), 1u)
        << "docs/search.md quotes a strategy RESULTS.md lacks: " << strategy;
    for (const auto& [column, value] : cells) {
      const auto& generated = results.at(strategy);
      ASSERT_EQ(generated.count(column), 1u)
          << "docs/search.md quotes a column RESULTS.md lacks: " << column;
      EXPECT_EQ(value, generated.at(column))
          << strategy << ", " << column << ": docs/search.md quotes " << value
          << " but RESULTS.md says " << generated.at(column);
    }
  }
}

}  // namespace
}  // namespace crest
