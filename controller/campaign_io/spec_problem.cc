#include "controller/campaign_io/spec_problem.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace crest::controller {
namespace {

int EditDistance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1);
  std::vector<int> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int subst =
          prev[j - 1] + (absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string FormatProblem(const SpecProblem& problem, const std::string& file) {
  std::string where;
  if (!file.empty()) where = file + ":";
  if (problem.line > 0) absl::StrAppend(&where, problem.line, ":");
  if (!where.empty()) where += " ";
  return absl::StrCat(where, problem.path.empty() ? "" : problem.path + ": ", problem.message);
}

std::string FormatProblems(const std::vector<SpecProblem>& problems, const std::string& file) {
  std::vector<std::string> lines;
  lines.reserve(problems.size());
  for (const auto& p : problems) lines.push_back("  " + FormatProblem(p, file));
  return absl::StrCat("campaign spec has ", problems.size(),
                      problems.size() == 1 ? " problem" : " problems", ":\n",
                      absl::StrJoin(lines, "\n"));
}

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = 4;
  for (const auto& c : candidates) {
    int d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace crest::controller
