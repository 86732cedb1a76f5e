// Test helpers for sim/ unit tests: shipped files from the source tree.
#pragma once

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "sim/profile.h"
#include "sim/simulate.h"
#include "sim/testing/sim_process.h"

namespace crest::sim::testing {

inline std::string TemplateConfigText() {
  return ReadFileToString(SourceDir() + "/sim/conf/config.json").value_or("");
}

inline std::string ProfileDir() { return SourceDir() + "/sim/profiles"; }

// The shipped GSM8K test split as LLaMA3-8B's requests (its tokenizer
// approximation and output lengths, capped at `max_output`).
struct Gsm8k {
  Profile profile;
  std::vector<WorkloadRequest> requests;
  double avg_in = 0;
  double avg_out = 0;
};

inline Gsm8k LoadGsm8k(int max_output) {
  Gsm8k g;
  g.profile = LoadProfileFile(ProfileDir() + "/llama3-8b-910b.json").value();
  const OutputLengthDistribution& dist = g.profile.workloads.at("gsm8k");
  std::ifstream in(SourceDir() + "/data/gsm8k/test.jsonl");
  for (std::string line; std::getline(in, line);) {
    std::string q = nlohmann::json::parse(line)["question"].get<std::string>();
    int p = CountPromptTokens(q, g.profile.prompt_template_tokens);
    int o = std::min(NaturalOutputLength(dist, q), max_output);
    g.requests.push_back({p, o});
    g.avg_in += p;
    g.avg_out += o;
  }
  g.avg_in /= static_cast<double>(g.requests.size());
  g.avg_out /= static_cast<double>(g.requests.size());
  return g;
}

}  // namespace crest::sim::testing
