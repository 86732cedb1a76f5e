#include "sim/service.h"

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "sim/kv_cache.h"

namespace crest::sim {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";

// A small fixed vocabulary: deterministic, JSON-safe token texts.
constexpr const char* kVocab[] = {
    " the",  " answer", " is",   " of",   " and",  " to",   " we",    " so",   " total",
    " each", " per",    " 2",    " 3",    " 5",    " 10",   " 18",    " =",    " +",
    " *",    ".",       ",",     " she",  " he",   " has",  " makes", " day",  " eggs",
    " $",    " first",  " then", " left", " more", " than", " times", " half", " step"};
constexpr int kVocabSize = sizeof(kVocab) / sizeof(kVocab[0]);

void ReplyError(Responder& out, int status, const std::string& message, const std::string& type) {
  out.Reply(status, kJson, json{{"error", message}, {"error_type", type}}.dump());
}

std::string Escape(const std::string& s) {
  std::string quoted = json(s).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// Reads an optional positive integer at obj[key].
bool ReadMaxTokens(const json& obj, const char* key, const std::string& path, int* out,
                   std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number_integer() || it->get<int64_t>() < 1) {
    *error = absl::StrCat(path, ": expected a positive integer");
    return false;
  }
  *out = static_cast<int>(std::min<int64_t>(it->get<int64_t>(), 1 << 30));
  return true;
}

// Reads a string at obj[key] into `value`.
bool ReadString(const json& obj, const char* key, std::string* value, std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    *error = absl::StrCat(key, ": expected a string");
    return false;
  }
  *value = it->get<std::string>();
  return true;
}

// /v1/completions: "prompt" (a string, or a list whose first is one), "max_tokens".
bool ReadCompletionsBody(const json& body, std::string* prompt, int* max_tokens,
                         std::string* error) {
  if (auto it = body.find("prompt");
      it != body.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    *prompt = (*it)[0].get<std::string>();
  } else if (!ReadString(body, "prompt", prompt, error)) {
    return false;
  }
  return ReadMaxTokens(body, "max_tokens", "max_tokens", max_tokens, error);
}

// /v1/chat/completions: the messages' contents, one a line, and "max_tokens".
bool ReadChatBody(const json& body, std::string* prompt, int* max_tokens, std::string* error) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    *error = "messages: expected a non-empty array";
    return false;
  }
  for (const json& m : *it) {
    if (m.is_object() && m.contains("content") && m["content"].is_string()) {
      absl::StrAppend(prompt, m["content"].get<std::string>(), "\n");
    }
  }
  return ReadMaxTokens(body, "max_tokens", "max_tokens", max_tokens, error);
}

// /infer, /generate, /generate_stream: TGI's "inputs" and
// "parameters.max_new_tokens", or MindIE's "prompt" and "max_tokens".
bool ReadGenerateBody(const json& body, std::string* prompt, int* max_tokens, std::string* error) {
  bool tgi = body.contains("inputs");
  if (!ReadString(body, tgi ? "inputs" : "prompt", prompt, error)) return false;
  if (!tgi) return ReadMaxTokens(body, "max_tokens", "max_tokens", max_tokens, error);
  auto params = body.find("parameters");
  if (params == body.end() || !params->is_object()) return true;
  return ReadMaxTokens(*params, "max_new_tokens", "parameters.max_new_tokens", max_tokens, error);
}

// "ignore_eos", at the top or in "parameters" (which wins).
bool IgnoreEos(const json& body) {
  bool ignore_eos = body.contains("ignore_eos") && body["ignore_eos"].is_boolean() &&
                    body["ignore_eos"].get<bool>();
  if (auto params = body.find("parameters"); params != body.end() && params->is_object()) {
    if (auto ie = params->find("ignore_eos"); ie != params->end() && ie->is_boolean()) {
      ignore_eos = ie->get<bool>();
    }
  }
  return ignore_eos;
}

}  // namespace

void Service::Reject(Responder& out, int status, const std::string& message,
                     const std::string& type) {
  metrics_->failed.Increment();
  ReplyError(out, status, message, type);
}

Service::Service(boost::asio::io_context& io, SimConfig config, Profile profile,
                 const OutputLengthDistribution& workload, Engine* engine, SimMetrics* metrics,
                 std::function<void()> on_stop)
    : io_(io),
      config_(std::move(config)),
      profile_(std::move(profile)),
      workload_(workload),
      engine_(engine),
      metrics_(metrics),
      on_stop_(std::move(on_stop)) {}

void Service::HandleBusiness(const HttpRequest& req, std::shared_ptr<Responder> out) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path == "/v1/models" && req.method == "GET") {
    json models = {
        {"object", "list"},
        {"data",
         json::array(
             {{{"id", config_.model_name}, {"object", "model"}, {"owned_by", "mindie-sim"}}})}};
    out->Reply(200, kJson, models.dump());
    return;
  }
  Api api;
  if (path == "/v1/completions") {
    api = Api::kCompletions;
  } else if (path == "/v1/chat/completions") {
    api = Api::kChat;
  } else if (path == "/infer") {
    api = Api::kInfer;
  } else if (path == "/generate") {
    api = Api::kGenerate;
  } else if (path == "/generate_stream") {
    api = Api::kGenerateStream;
  } else {
    ReplyError(*out, 404, absl::StrCat("no route ", path), "not_found");
    return;
  }
  if (req.method != "POST") {
    ReplyError(*out, 405, absl::StrCat(path, " expects POST"), "method_not_allowed");
    return;
  }
  StartGeneration(api, req, std::move(out));
}

void Service::StartGeneration(Api api, const HttpRequest& req, std::shared_ptr<Responder> out) {
  if (!ready_) {
    Reject(*out, 503, "service is not ready (model loading)", "service_unavailable");
    return;
  }
  if (static_cast<int>(inflight_.size()) >= config_.server.max_link_num) {
    Reject(
        *out, 503,
        absl::StrCat("too many requests: maxLinkNum ", config_.server.max_link_num, " in flight"),
        "service_unavailable");
    return;
  }
  absl::StatusOr<GenerationRequest> request = ReadGenerationRequest(api, req.body);
  absl::StatusOr<Lengths> lengths = request.ok() ? PlanLengths(*request) : request.status();
  if (!lengths.ok()) {
    Reject(*out, 400, std::string(lengths.status().message()), "validation_error");
    return;
  }
  uint64_t id = next_id_++;
  Inflight f;
  f.out = out;
  f.api = api;
  f.stream = request->stream;
  f.prompt_tokens = lengths->prompt_tokens;
  f.output_tokens = lengths->output_tokens;
  f.capped = lengths->capped;
  f.prefix = StreamPrefix(api, id);
  absl::Status status = engine_->Submit({id, f.prompt_tokens, f.output_tokens});
  if (!status.ok()) {
    Reject(*out, 400, std::string(status.message()), "validation_error");
    return;
  }
  metrics_->requests.Increment();
  metrics_->prompt.Increment(f.prompt_tokens);
  if (f.stream) out->BeginStream();
  out->SetOnAbort([this, id] {
    // The client went away before the end.
    if (inflight_.count(id) > 0) metrics_->failed.Increment();
    inflight_.erase(id);
    engine_->Cancel(id);
  });
  inflight_.emplace(id, std::move(f));
}

absl::StatusOr<Service::GenerationRequest> Service::ReadGenerationRequest(
    Api api, const std::string& text) const {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return absl::InvalidArgumentError("request body: expected a JSON object");
  }
  GenerationRequest request;
  request.max_tokens = config_.max_iter_times;
  request.stream = api == Api::kGenerateStream;
  std::string error;
  bool ok = true;
  switch (api) {
    case Api::kCompletions:
      ok = ReadCompletionsBody(body, &request.prompt, &request.max_tokens, &error);
      break;
    case Api::kChat:
      ok = ReadChatBody(body, &request.prompt, &request.max_tokens, &error);
      break;
    case Api::kInfer:
    case Api::kGenerate:
    case Api::kGenerateStream:
      ok = ReadGenerateBody(body, &request.prompt, &request.max_tokens, &error);
      break;
    case Api::kProbe:
      break;
  }
  if (ok && api != Api::kGenerateStream) {
    if (auto it = body.find("stream"); it != body.end()) {
      if (!it->is_boolean()) {
        error = "stream: expected a boolean";
        ok = false;
      } else {
        request.stream = it->get<bool>();
      }
    }
  }
  if (!ok) return absl::InvalidArgumentError(error);
  request.ignore_eos = IgnoreEos(body);
  return request;
}

absl::StatusOr<Service::Lengths> Service::PlanLengths(const GenerationRequest& request) const {
  int prompt_tokens = CountPromptTokens(request.prompt, profile_.prompt_template_tokens);
  if (prompt_tokens > config_.max_input_token_len) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt_tokens,
                                                   " tokens, more than maxInputTokenLen ",
                                                   config_.max_input_token_len));
  }
  int cap =
      std::min({request.max_tokens, config_.max_iter_times, config_.max_seq_len - prompt_tokens});
  if (cap < 1) {
    return absl::InvalidArgumentError("prompt leaves no room for output within maxSeqLen");
  }
  int natural = request.ignore_eos ? cap : NaturalOutputLength(workload_, request.prompt);
  return Lengths{prompt_tokens, std::min(natural, cap), natural >= cap};
}

std::string Service::StreamPrefix(Api api, uint64_t id) const {
  if (api != Api::kCompletions && api != Api::kChat) return "";
  auto created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  std::string model = Escape(config_.model_name);
  if (api == Api::kCompletions) {
    return absl::StrCat(R"(data: {"id":"cmpl-)", id, R"(","object":"text_completion","created":)",
                        created, R"(,"model":")", model, R"(","choices":[{"index":0,"text":")");
  }
  return absl::StrCat(R"(data: {"id":"chatcmpl-)", id,
                      R"(","object":"chat.completion.chunk","created":)", created, R"(,"model":")",
                      model,
                      R"(","choices":[{"index":0,"delta":{"role":"assistant",)"
                      R"("content":")");
}

std::string Service::TokenText(uint64_t id, int index, int* token_id) const {
  uint64_t h =
      (id * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(index) * 0xBF58476D1CE4E5B9ULL);
  int v = static_cast<int>((h >> 33) % kVocabSize);
  *token_id = 1000 + v;
  return kVocab[v];
}

void Service::OnTokens(const std::vector<TokenEvent>& events) {
  for (const TokenEvent& e : events) {
    auto it = inflight_.find(e.id);
    if (it == inflight_.end()) continue;
    Inflight& f = it->second;
    int token_id = 0;
    std::string tok = TokenText(e.id, e.generated, &token_id);
    f.text += tok;
    if (f.stream) {
      std::string event;
      const char* reason = f.capped ? "length" : "stop";
      switch (f.api) {
        case Api::kCompletions:
        case Api::kChat: {
          // The chat delta object needs one more closing brace.
          const char* close = f.api == Api::kChat ? R"("})" : R"(")";
          if (e.finished) {
            event = absl::StrCat(f.prefix, tok, close, R"(,"finish_reason":")", reason,
                                 R"("}],"usage":{"prompt_tokens":)", f.prompt_tokens,
                                 R"(,"completion_tokens":)", e.generated, R"(,"total_tokens":)",
                                 f.prompt_tokens + e.generated, "}}\n\n");
          } else {
            event = absl::StrCat(f.prefix, tok, close, ",\"finish_reason\":null}]}\n\n");
          }
          break;
        }
        default:
          if (e.finished) {
            event = absl::StrCat(R"(data: {"token":{"id":)", token_id, R"(,"text":")", tok,
                                 R"("},"generated_text":")", f.text,
                                 R"(","details":{"finish_reason":")",
                                 f.capped ? "length" : "eos_token", R"(","generated_tokens":)",
                                 e.generated, R"(,"prompt_tokens":)", f.prompt_tokens, "}}\n\n");
          } else {
            event = absl::StrCat(R"(data: {"token":{"id":)", token_id, R"(,"text":")", tok,
                                 "\"},\"generated_text\":null,\"details\":null}\n\n");
          }
          break;
      }
      if (e.finished) event += "data: [DONE]\n\n";
      f.out->Send(event);
    }
    if (e.finished) {
      Finish(e.id, f);
      inflight_.erase(it);
    }
  }
}

void Service::Finish(uint64_t id, Inflight& f) {
  metrics_->finished.Increment();
  if (f.on_done) {
    f.on_done();
    return;
  }
  if (f.stream) {
    f.out->EndStream();
    return;
  }
  int generated = static_cast<int>(f.output_tokens);
  json details = {{"finish_reason", f.capped ? "length" : "eos_token"},
                  {"generated_tokens", generated},
                  {"prompt_tokens", f.prompt_tokens}};
  json usage = {{"prompt_tokens", f.prompt_tokens},
                {"completion_tokens", generated},
                {"total_tokens", f.prompt_tokens + generated}};
  json reply;
  auto created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  const char* reason = f.capped ? "length" : "stop";
  switch (f.api) {
    case Api::kCompletions:
      reply = {
          {"id", absl::StrCat("cmpl-", id)},
          {"object", "text_completion"},
          {"created", created},
          {"model", config_.model_name},
          {"choices", json::array({{{"index", 0}, {"text", f.text}, {"finish_reason", reason}}})},
          {"usage", usage}};
      break;
    case Api::kChat:
      reply = {{"id", absl::StrCat("chatcmpl-", id)},
               {"object", "chat.completion"},
               {"created", created},
               {"model", config_.model_name},
               {"choices", json::array({{{"index", 0},
                                         {"message", {{"role", "assistant"}, {"content", f.text}}},
                                         {"finish_reason", reason}}})},
               {"usage", usage}};
      break;
    default:
      reply = {{"generated_text", f.text}, {"details", details}};
      break;
  }
  f.out->Reply(200, kJson, reply.dump());
}

void Service::HandleManagement(const HttpRequest& req, std::shared_ptr<Responder> out) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path == "/v2/health/live") {
    out->Reply(200, kJson, R"({"status":"live"})");
  } else if (path == "/v2/health/ready") {
    if (ready_) {
      out->Reply(200, kJson, R"({"status":"ready"})");
    } else {
      out->Reply(503, kJson, R"({"status":"not ready"})");
    }
  } else if (absl::StartsWith(path, "/health/timed-")) {
    int seconds = 0;
    if (!absl::SimpleAtoi(path.substr(14), &seconds) || seconds < 1 || seconds > 600) {
      ReplyError(*out, 400, "/health/timed-N: N must be an integer in [1, 600]",
                 "validation_error");
      return;
    }
    Timed(seconds, std::move(out));
  } else if (path == "/v1/status") {
    out->Reply(200, kJson,
               json{{"status", ready_ ? "ready" : "loading"},
                    {"running", static_cast<int64_t>(metrics_->running.Value())},
                    {"waiting", static_cast<int64_t>(metrics_->waiting.Value())}}
                   .dump());
  } else if (path == "/v1/config") {
    out->Reply(200, kJson,
               json{{"modelName", config_.model_name},
                    {"maxBatchSize", config_.max_batch_size},
                    {"maxPrefillBatchSize", config_.max_prefill_batch_size},
                    {"cacheBlockSize", config_.cache_block_size},
                    {"maxIterTimes", config_.max_iter_times},
                    {"profile", profile_.name}}
                   .dump());
  } else if (path == "/stopService") {
    out->Reply(200, kJson, R"({"status":"stopping"})");
    if (on_stop_) on_stop_();
  } else {
    ReplyError(*out, 404, absl::StrCat("no route ", path), "not_found");
  }
}

// Runs a one-token probe inference and answers 200 when it finishes within
// `seconds` (real time), else 503.
void Service::Timed(int seconds, std::shared_ptr<Responder> out) {
  if (!ready_) {
    ReplyError(*out, 503, "service is not ready (model loading)", "service_unavailable");
    return;
  }
  uint64_t id = next_id_++;
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::seconds(seconds));
  auto answered = std::make_shared<bool>(false);
  Inflight f;
  f.out = out;
  f.api = Api::kProbe;
  f.prompt_tokens = 8;
  f.output_tokens = 1;
  f.on_done = [out, timer, answered] {
    if (*answered) return;
    *answered = true;
    timer->cancel();
    out->Reply(200, kJson, R"({"status":"healthy"})");
  };
  if (!engine_->Submit({id, 8, 1}).ok()) {
    ReplyError(*out, 500, "probe inference failed", "internal");
    return;
  }
  inflight_.emplace(id, std::move(f));
  timer->async_wait([this, id, out, answered](boost::system::error_code ec) {
    if (ec || *answered) return;
    *answered = true;
    inflight_.erase(id);
    engine_->Cancel(id);
    ReplyError(*out, 503, "probe inference did not finish in time", "timeout");
  });
}

void Service::HandleMetrics(const HttpRequest& req, std::shared_ptr<Responder> out) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path != "/metrics") {
    ReplyError(*out, 404, absl::StrCat("no route ", path), "not_found");
    return;
  }
  if (!monitor_mode_) {
    // MindIE serves its metrics only with MIES_SERVICE_MONITOR_MODE=1.
    ReplyError(*out, 404, "metrics are off: MIES_SERVICE_MONITOR_MODE is not 1", "not_found");
    return;
  }
  out->Reply(200, "text/plain; version=0.0.4", metrics_->Serialize());
}

}  // namespace crest::sim
