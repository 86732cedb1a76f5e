// MindIE's HTTP API over the Engine: the business routes (/v1/completions,
// /v1/chat/completions, /infer, /generate, /generate_stream, /v1/models), the
// management routes (health, status) and /metrics. Runs on the io thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

#include "sim/config.h"
#include "sim/engine.h"
#include "sim/http_server.h"
#include "sim/metrics.h"
#include "sim/profile.h"

namespace crest::sim {

class Service {
 public:
  // `engine` and `metrics` must outlive the service; `on_stop` runs for
  // GET /stopService.
  Service(boost::asio::io_context& io, SimConfig config, Profile profile,
          const OutputLengthDistribution& workload, Engine* engine, SimMetrics* metrics,
          std::function<void()> on_stop);

  void HandleBusiness(const HttpRequest& req, std::shared_ptr<Responder> out);
  void HandleManagement(const HttpRequest& req, std::shared_ptr<Responder> out);
  void HandleMetrics(const HttpRequest& req, std::shared_ptr<Responder> out);

  // Tokens from the engine (call on the io thread).
  void OnTokens(const std::vector<TokenEvent>& events);

  void SetReady() { ready_ = true; }
  // GET /metrics answers only when on (MIES_SERVICE_MONITOR_MODE=1).
  void SetMonitorMode(bool on) { monitor_mode_ = on; }

 private:
  enum class Api { kCompletions, kChat, kInfer, kGenerate, kGenerateStream, kProbe };
  struct Inflight {
    std::shared_ptr<Responder> out;
    Api api = Api::kCompletions;
    bool stream = false;
    int prompt_tokens = 0;
    int output_tokens = 0;
    bool capped = false;  // finished by max_tokens/maxIterTimes, not by EOS
    std::string text;
    std::string prefix;             // SSE event prefix up to the token text
    std::function<void()> on_done;  // probe requests
  };

  // What a generation request's body asks for, whichever API spells it.
  struct GenerationRequest {
    std::string prompt;
    int max_tokens = 0;
    bool stream = false;
    bool ignore_eos = false;
  };
  // The token counts of an admitted request.
  struct Lengths {
    int prompt_tokens = 0;
    int output_tokens = 0;
    bool capped = false;  // see Inflight
  };

  // Counts a refused generation request in request_failed_total, then replies.
  void Reject(Responder& out, int status, const std::string& message, const std::string& type);
  void StartGeneration(Api api, const HttpRequest& req, std::shared_ptr<Responder> out);
  // StartGeneration's phases: the body read (INVALID_ARGUMENT names the
  // field), the lengths against config.json's limits, the SSE prefix of the
  // OpenAI APIs' events.
  absl::StatusOr<GenerationRequest> ReadGenerationRequest(Api api, const std::string& text) const;
  absl::StatusOr<Lengths> PlanLengths(const GenerationRequest& request) const;
  std::string StreamPrefix(Api api, uint64_t id) const;
  void Timed(int seconds, std::shared_ptr<Responder> out);
  void Finish(uint64_t id, Inflight& f);
  std::string TokenText(uint64_t id, int index, int* token_id) const;

  boost::asio::io_context& io_;
  SimConfig config_;
  Profile profile_;
  OutputLengthDistribution workload_;
  Engine* engine_;
  SimMetrics* metrics_;
  std::function<void()> on_stop_;
  bool ready_ = false;
  bool monitor_mode_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Inflight> inflight_;
};

}  // namespace crest::sim
