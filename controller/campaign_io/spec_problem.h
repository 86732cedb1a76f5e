// What is wrong with a campaign spec, and where: the diagnostic type that the
// parser (structure) and the validator (meaning, limits) both produce, with
// its rendering for people. Its own header so neither includes the other.
#pragma once

#include <string>
#include <vector>

namespace crest::controller {

// One thing wrong with a spec: where (YAML path such as "models[1].nodes",
// and the 1-based line when known, else 0) and what.
struct SpecProblem {
  std::string path;
  int line = 0;
  std::string message;
};

// "file:12: models[1].nodes: expected a list of node names" (file and line
// only when known).
std::string FormatProblem(const SpecProblem& problem, const std::string& file = "");
// All problems, one per line, prefixed by a count header.
std::string FormatProblems(const std::vector<SpecProblem>& problems, const std::string& file = "");

// Closest candidate within edit distance 3, or "" (for "did you mean").
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace crest::controller
