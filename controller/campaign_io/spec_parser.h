// Campaign spec YAML -> crest::v1::CampaignSpec. Collects every structural
// problem (wrong type, unknown key with a did-you-mean, bad value) with its
// YAML path and line, so a spec is refused once with all of them listed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "controller/campaign_io/spec_problem.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

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

}  // namespace crest::controller
