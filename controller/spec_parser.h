// Campaign spec YAML -> crest::v1::CampaignSpec. Collects every structural
// problem (wrong type, unknown key with a did-you-mean, bad value) with its
// YAML path and line, so a spec is refused once with all of them listed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "crest/v1/controller.pb.h"

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

struct ParsedSpec {
  crest::v1::CampaignSpec spec;
  std::vector<SpecProblem> problems;  // empty: the spec parsed cleanly
  // YAML path -> 1-based line, so semantic problems found later can name lines.
  std::map<std::string, int> lines;
};

// Parses YAML text. Never throws; yaml-cpp syntax errors become problems.
ParsedSpec ParseCampaignSpec(const std::string& yaml_text);

// Parse, apply defaults and validate (spec_validator.h): every problem with
// its line. The returned spec has the defaults filled in.
ParsedSpec ParseAndValidateCampaignSpec(const std::string& yaml_text);

// Closest candidate within edit distance 3, or "" (for "did you mean").
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace crest::controller
