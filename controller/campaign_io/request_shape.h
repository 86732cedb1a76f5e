// What a campaign's client sends: the average request shape (input and
// generated tokens) its spec implies, which the KV-block arithmetic and the
// curve file of a campaign both need.
#pragma once

#include <cstdint>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// Average tokens per request that the formula needs.
struct RequestShape {
  int64_t avg_input_tokens = 0;
  int64_t max_output_tokens = 0;  // MaxOutputLen (maxIterTimes cap)
  int64_t avg_output_tokens = 0;  // tokens actually generated on average
};

// GSM8K through the reference tokenizer: 186 input tokens, 346 generated at
// MaxOutputLen 512 (mindie-facts.md); synthetic: its fixed input length.
RequestShape RequestShapeFor(const crest::v1::ClientSpec& client);

}  // namespace crest::controller
