// Incremental parsing of an inference server's reply: SSE framing (events may
// be split across or packed into network chunks) and the two wire formats
// (MindIE native /infer and OpenAI /v1/completions), into token counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "crest/v1/benchmark.pb.h"

namespace crest::loadgen {

// Splits a byte stream into SSE events ("data:" lines up to a blank line).
// Feed() may be called with any chunking; each complete event's data is handed
// to the callback exactly once.
class SseFramer {
 public:
  // Calls on_event(data) for every complete event in `bytes`; stops early and
  // returns false when on_event returns false.
  template <typename OnEvent>
  bool Feed(std::string_view bytes, OnEvent&& on_event);

  // Bytes of an unfinished event still buffered (non-empty at end = truncated).
  bool HasPartialEvent() const { return !line_.empty() || has_data_; }

 private:
  // Handles one complete line (without its terminator); returns on_event's verdict.
  template <typename OnEvent>
  bool Line(std::string_view line, OnEvent& on_event);

  std::string line_;  // partial line carried across chunks
  std::string data_;  // data of the event being assembled
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

// What one reply told us, filled as the bytes arrive.
struct ReplyState {
  uint32_t token_events = 0;  // SSE events that carried a token
  int64_t usage_output = -1;  // completion_tokens / generated_tokens; -1 if absent
  int64_t usage_input = -1;   // prompt_tokens; -1 if absent
  bool final_seen = false;    // the event with finish_reason / details arrived
  bool done_seen = false;     // "data: [DONE]" arrived
  std::string failure;        // set on the first protocol error
};

// Interprets the data of one SSE event for `api`. Returns false (and sets
// state.failure to "malformed_sse" or "stream_error") when the event is not
// what the wire contract allows, so the caller can abort the transfer.
bool HandleStreamEvent(crest::v1::BenchmarkApi api, std::string_view data, ReplyState& state);

// Interprets a complete non-streaming body; false + state.failure
// ("malformed_body") when it is not valid.
bool HandleTextBody(crest::v1::BenchmarkApi api, std::string_view body, ReplyState& state);

template <typename OnEvent>
bool SseFramer::Feed(std::string_view bytes, OnEvent&& on_event) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') continue;
    // "\r\n" is one terminator: a '\n' right after a '\r' ends nothing new.
    const bool crlf_tail = (c == '\n' && i == start && last_was_cr_ && line_.empty());
    last_was_cr_ = (c == '\r');
    if (crlf_tail) {
      start = i + 1;
      continue;
    }
    bool ok = true;
    if (line_.empty()) {
      ok = Line(bytes.substr(start, i - start), on_event);
    } else {
      line_.append(bytes.substr(start, i - start));
      std::string line = std::move(line_);
      line_.clear();
      ok = Line(line, on_event);
    }
    start = i + 1;
    if (!ok) return false;
  }
  if (start < bytes.size()) {
    line_.append(bytes.substr(start));
    last_was_cr_ = false;
  }
  return true;
}

template <typename OnEvent>
bool SseFramer::Line(std::string_view line, OnEvent& on_event) {
  if (line.empty()) {
    if (!has_data_) return true;
    has_data_ = false;
    std::string data = std::move(data_);
    data_.clear();
    return on_event(std::string_view(data));
  }
  if (line.front() == ':') return true;  // comment / keep-alive
  std::string_view field = line;
  std::string_view value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field != "data") return true;  // event:, id:, retry: carry nothing we use
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
  return true;
}

}  // namespace crest::loadgen
