#include "loadgen/dataset.h"

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/paths.h"

namespace crest::loadgen {

absl::StatusOr<std::string> ResolveDatasetPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("dataset path is empty");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("dataset path ", path, " does not exist"));
  }
  if (S_ISDIR(st.st_mode)) {
    std::string file = absl::StrCat(path, "/test.jsonl");
    if (stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::NotFoundError(
          absl::StrCat("dataset directory ", path, " holds no test.jsonl (expected ", file, ")"));
    }
    return file;
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset path ", path, " is neither a file nor a directory"));
  }
  return path;
}

absl::StatusOr<std::string> DefaultDatasetDir() {
  absl::StatusOr<std::string> share = ShareDir();
  if (!share.ok()) return share.status();
  return absl::StrCat(*share, "/datasets/gsm8k");
}

absl::StatusOr<std::vector<std::string>> LoadPrompts(const crest::v1::DatasetSpec& spec,
                                                     const std::string& path,
                                                     uint32_t synthetic_count) {
  std::vector<std::string> prompts;
  if (spec.type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    if (spec.synthetic_input_tokens() == 0) {
      return absl::InvalidArgumentError("synthetic dataset needs an input length > 0 tokens");
    }
    // One short common word per token: tokenizers map " hi" to a single token.
    std::string prompt;
    for (uint32_t i = 0; i < spec.synthetic_input_tokens(); ++i) prompt += i == 0 ? "hi" : " hi";
    prompts.assign(synthetic_count == 0 ? 1 : synthetic_count, prompt);
    return prompts;
  }
  const bool gsm8k = spec.type() != crest::v1::DATASET_TYPE_JSONL;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open dataset file ", path));
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": not a JSON object"));
    }
    // GSM8K rows carry "question"; generic files "prompt" (either is accepted).
    const char* primary = gsm8k ? "question" : "prompt";
    const char* secondary = gsm8k ? "prompt" : "question";
    auto it = row.find(primary);
    if (it == row.end()) it = row.find(secondary);
    if (it == row.end() || !it->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": expected a \"", primary, "\" string field"));
    }
    prompts.push_back(it->get<std::string>());
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading dataset file ", path));
  if (prompts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset file ", path, " holds no prompts"));
  }
  return prompts;
}

}  // namespace crest::loadgen
