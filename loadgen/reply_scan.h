// One pass over a reply's JSON (a stream event or a whole non-streaming
// body): checks that it is one well-formed JSON object (RFC 8259, UTF-8) and
// picks out the members crest-bench reads, building nothing. It is most of the
// client's own work per token and per non-streaming reply, so it is written
// for speed; nlohmann::json::accept is its reference (reply_scan_test.cc).
#pragma once

#include <cstdint>
#include <string_view>

namespace crest::loadgen {

// What a reply says, for both APIs. "Present" means the key is a member of
// the top-level object with any value.
struct ReplyFields {
  bool error = false;                 // "error"
  bool generated_text = false;        // MindIE "generated_text"
  bool token = false;                 // MindIE "token"
  bool token_object = false;          //   ... and it is an object
  bool details = false;               // MindIE "details"
  bool details_object = false;        //   ... and it is an object
  int64_t details_generated = -1;     // details.generated_tokens when an integer
  int64_t details_prompt = -1;        // details.prompt_tokens when an integer
  bool choices_array = false;         // OpenAI "choices" is an array
  bool choice0 = false;               //   ... with a first element
  bool choice0_object = false;        //   ... that is an object
  bool finish_reason_string = false;  // choices[0].finish_reason is a string
  bool usage_object = false;          // OpenAI "usage" is an object
  int64_t usage_completion = -1;      // usage.completion_tokens when an integer
  int64_t usage_prompt = -1;          // usage.prompt_tokens when an integer
};

// False when `text` is not exactly one JSON object (surrounding whitespace
// allowed); `fields` is then unspecified.
bool ScanReply(std::string_view text, ReplyFields& fields);

}  // namespace crest::loadgen
