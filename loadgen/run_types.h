// The value types of a crest-bench run: what to drive (Target, RunOptions),
// what each request came to (RequestRecord) and what the run produced
// (RunOutput). Their own header so the runner, the statistics, the report and
// the adapters share them without including each other.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "crest/v1/benchmark.pb.h"

namespace crest::loadgen {

// The server under test.
struct Target {
  std::string base_url;        // business endpoint, e.g. "http://127.0.0.1:1025" or "https://..."
  std::string management_url;  // optional; when set, /v2/health/ready must answer 200 first
  std::string ca_file;         // https: CA bundle to verify the server with
  bool insecure_skip_verify = false;
  std::string client_cert_file;  // optional client certificate for https
  std::string client_key_file;
};

// Which HTTP client carries the requests.
enum class HttpClient {
  kAuto,     // crest-bench's own HTTP/1.1 client for http://, libcurl for https://
  kLibcurl,  // libcurl for both (slower per request; for comparison and as a fallback)
};

struct RunOptions {
  crest::v1::BenchmarkSpec spec;
  Target target;
  // Prompts file, already resolved (see ResolveDatasetPath); unused for SYNTHETIC.
  std::string dataset_path;
  // CPUs the load generator's threads may run on; empty: no affinity set.
  std::vector<uint32_t> cpus;
  HttpClient http_client = HttpClient::kAuto;
  // Called on the runner's thread once every warm-up request has ended, just
  // before the first measured request is sent (the agent reads the daemon's
  // counters there, so they cover the measured requests only).
  std::function<void()> on_measured_start;
};

// One measured request (the --csv record).
struct RequestRecord {
  uint64_t index = 0;
  absl::Time sent;
  double first_token_ms = 0;  // 0 when no token arrived
  double e2e_ms = 0;
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  bool ok = false;
  std::string failure;  // reason when !ok, e.g. "http_503", "timeout", "reset"
  int http_status = 0;
  // Added by issue 5 (additive): the per-request inputs of DecodeTime and of
  // the token-count provenance.
  double decode_avg_ms = 0;           // mean gap between consecutive tokens; 0 if < 2 tokens
  std::vector<float> decode_gaps_ms;  // every inter-token gap, in arrival order
  uint32_t token_events = 0;          // SSE events that carried a token
  bool usage_reported = false;        // the server sent usage/details token counts
  bool token_count_mismatch = false;  // usage disagreed with the counted events (usage wins)
};

struct RunOutput {
  crest::v1::BenchmarkResult result;
  std::vector<RequestRecord> requests;
};

// Called from the runner's own thread about twice a second.
using ProgressCallback = std::function<void(const crest::v1::BenchmarkProgress&)>;

}  // namespace crest::loadgen
