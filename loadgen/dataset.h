// Prompts for a benchmark run: GSM8K ("question" per JSONL line), a generic
// JSONL prompts file ("prompt" per line) or synthetic fixed-length prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "crest/v1/benchmark.pb.h"

namespace crest::loadgen {

// Reads the prompts of `path` (already resolved) for dataset `type`, or makes
// `synthetic_count` synthetic prompts of spec.synthetic_input_tokens words.
// Errors name the file and line.
absl::StatusOr<std::vector<std::string>> LoadPrompts(const crest::v1::DatasetSpec& spec,
                                                     const std::string& path,
                                                     uint32_t synthetic_count);

// --DatasetPath semantics: a directory holding test.jsonl (as MindIE's tool
// takes GSM8K), or the file itself.
absl::StatusOr<std::string> ResolveDatasetPath(const std::string& path);

// The shipped GSM8K directory: <ShareDir>/datasets/gsm8k.
absl::StatusOr<std::string> DefaultDatasetDir();

}  // namespace crest::loadgen
