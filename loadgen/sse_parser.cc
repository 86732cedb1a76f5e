#include "loadgen/sse_parser.h"

#include "loadgen/reply_scan.h"

namespace crest::loadgen {
namespace {

bool Fail(ReplyState& state, const char* reason) {
  if (state.failure.empty()) state.failure = reason;
  return false;
}

// MindIE /infer: {"token":{...},"generated_text":..,"details":{...}|null}.
bool HandleMindie(const ReplyFields& f, ReplyState& state) {
  if (!f.token && !f.details) return false;
  if (f.token_object) ++state.token_events;
  if (f.details_object) {
    state.final_seen = true;
    state.usage_output = f.details_generated;
    state.usage_input = f.details_prompt;
  }
  return true;
}

// OpenAI /v1/completions: {"choices":[{"text":..,"finish_reason":..}],"usage":{..}}.
bool HandleOpenAi(const ReplyFields& f, ReplyState& state) {
  if (!f.choices_array) return false;
  if (f.choice0) {
    if (!f.choice0_object) return false;
    ++state.token_events;
    if (f.finish_reason_string) state.final_seen = true;
  }
  if (f.usage_object) {
    state.usage_output = f.usage_completion;
    state.usage_input = f.usage_prompt;
  }
  return true;
}

}  // namespace

bool HandleStreamEvent(crest::v1::BenchmarkApi api, std::string_view data, ReplyState& state) {
  if (data == "[DONE]") {
    state.done_seen = true;
    return true;
  }
  if (state.done_seen) return Fail(state, "malformed_sse");  // nothing may follow [DONE]
  ReplyFields event;
  if (!ScanReply(data, event)) return Fail(state, "malformed_sse");
  if (event.error) return Fail(state, "stream_error");
  const bool ok = api == crest::v1::BENCHMARK_API_OPENAI ? HandleOpenAi(event, state)
                                                         : HandleMindie(event, state);
  return ok || Fail(state, "malformed_sse");
}

bool HandleTextBody(crest::v1::BenchmarkApi api, std::string_view body, ReplyState& state) {
  ReplyFields reply;
  if (!ScanReply(body, reply)) return Fail(state, "malformed_body");
  if (api == crest::v1::BENCHMARK_API_OPENAI) {
    if (!reply.choices_array) return Fail(state, "malformed_body");
    if (reply.usage_object) {
      state.usage_output = reply.usage_completion;
      state.usage_input = reply.usage_prompt;
    }
  } else {
    if (!reply.generated_text) return Fail(state, "malformed_body");
    if (reply.details_object) {
      state.usage_output = reply.details_generated;
      state.usage_input = reply.details_prompt;
    }
  }
  state.final_seen = true;
  return true;
}

}  // namespace crest::loadgen
