#include "loadgen/sse_parser.h"

#include <nlohmann/json.hpp>

namespace crest::loadgen {
namespace {

using nlohmann::json;

int64_t IntField(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return -1;
  return it->get<int64_t>();
}

bool Fail(ReplyState& state, const char* reason) {
  if (state.failure.empty()) state.failure = reason;
  return false;
}

// MindIE /infer: {"token":{...},"generated_text":..,"details":{...}|null}.
bool HandleMindie(const json& event, ReplyState& state) {
  auto token = event.find("token");
  auto details = event.find("details");
  if (token == event.end() && details == event.end()) return false;
  if (token != event.end() && token->is_object()) ++state.token_events;
  if (details != event.end() && details->is_object()) {
    state.final_seen = true;
    state.usage_output = IntField(*details, "generated_tokens");
    state.usage_input = IntField(*details, "prompt_tokens");
  }
  return true;
}

// OpenAI /v1/completions: {"choices":[{"text":..,"finish_reason":..}],"usage":{..}}.
bool HandleOpenAi(const json& event, ReplyState& state) {
  auto choices = event.find("choices");
  if (choices == event.end() || !choices->is_array()) return false;
  if (!choices->empty()) {
    const json& choice = choices->front();
    if (!choice.is_object()) return false;
    ++state.token_events;
    auto finish = choice.find("finish_reason");
    if (finish != choice.end() && finish->is_string()) state.final_seen = true;
  }
  auto usage = event.find("usage");
  if (usage != event.end() && usage->is_object()) {
    state.usage_output = IntField(*usage, "completion_tokens");
    state.usage_input = IntField(*usage, "prompt_tokens");
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
  json event = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return Fail(state, "malformed_sse");
  if (event.contains("error")) return Fail(state, "stream_error");
  const bool ok = api == crest::v1::BENCHMARK_API_OPENAI ? HandleOpenAi(event, state)
                                                         : HandleMindie(event, state);
  return ok || Fail(state, "malformed_sse");
}

bool HandleTextBody(crest::v1::BenchmarkApi api, std::string_view body, ReplyState& state) {
  json reply = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!reply.is_object()) return Fail(state, "malformed_body");
  if (api == crest::v1::BENCHMARK_API_OPENAI) {
    auto choices = reply.find("choices");
    if (choices == reply.end() || !choices->is_array()) return Fail(state, "malformed_body");
    auto usage = reply.find("usage");
    if (usage != reply.end() && usage->is_object()) {
      state.usage_output = IntField(*usage, "completion_tokens");
      state.usage_input = IntField(*usage, "prompt_tokens");
    }
  } else {
    if (!reply.contains("generated_text")) return Fail(state, "malformed_body");
    auto details = reply.find("details");
    if (details != reply.end() && details->is_object()) {
      state.usage_output = IntField(*details, "generated_tokens");
      state.usage_input = IntField(*details, "prompt_tokens");
    }
  }
  state.final_seen = true;
  return true;
}

}  // namespace crest::loadgen
