// An in-process inference server for crest-bench's tests and bench: speaks
// the MindIE /infer and OpenAI /v1/completions wire formats (stream and text)
// with known pacing, records when it sent what (the truth the client's figures
// are checked against), and can misbehave on purpose (fault modes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace crest::loadgen::testing {

enum class Fault {
  kNone,
  kHttpError,       // answer every request with http_status and a JSON error
  kResetMidStream,  // after fault_after_tokens tokens, close with a TCP RST
  kMalformedSse,    // after fault_after_tokens tokens, send an event that is not JSON
  kStall,           // after fault_after_tokens tokens, send nothing more (until stopped)
  kTruncate,        // after fault_after_tokens tokens, end the body cleanly without the end
  kUsageMismatch,   // report usage = tokens sent + 1 (the client must prefer usage)
};

struct SseServerOptions {
  absl::Duration first_token_delay = absl::Milliseconds(50);
  absl::Duration token_interval = absl::Milliseconds(10);
  uint32_t tokens = 0;            // tokens per reply; 0: the request's max tokens
  uint32_t events_per_write = 1;  // > 1 packs several events into one chunk
  uint32_t prompt_tokens = 7;     // reported as prompt_tokens / usage
  absl::Duration text_delay = absl::ZeroDuration();  // non-stream replies
  Fault fault = Fault::kNone;
  int http_status = 503;
  uint32_t fault_after_tokens = 2;
  // Record ServedRequest::arrived from the kernel (a peek per request, which
  // costs the server a wait and a syscall per request); else arrived = received.
  bool stamp_arrival = false;
  // Close each connection after one reply without announcing it (no
  // "Connection: close"), as servers with short keep-alive timeouts do.
  bool close_after_reply = false;
  // Reset (TCP RST, no reply) every request that arrives on a connection that
  // already served one, as a server whose keep-alive timeout ran out just as
  // the request came: the client must send it once more on a new connection.
  bool reset_kept_alive_requests = false;
  int threads = 1;
  // CPUs the server's threads run on (benchmarks keep it off the client's); empty: any.
  std::vector<uint32_t> cpus;
  // When both are set the server speaks HTTPS only.
  std::string cert_file;
  std::string key_file;
};

// What the server did for one request (times from absl::Now()).
struct ServedRequest {
  std::string path;
  bool stream = false;
  uint32_t max_tokens = 0;
  std::string model;
  std::string prompt;
  absl::Time received;  // request fully read by the server
  // When the request's bytes reached the server's kernel (SO_TIMESTAMPNS;
  // with stamp_arrival on plain TCP, else = received): unlike `received`, no
  // time the request waited for a busy server thread.
  absl::Time arrived;
  absl::Time first_token_sent;  // first token's bytes handed to the kernel (the write begins)
  absl::Time last_byte_sent;    // end of the reply handed to the kernel
  uint32_t tokens_sent = 0;
  bool completed = false;  // the reply ended as the contract says
};

class SseTestServer {
 public:
  static absl::StatusOr<std::unique_ptr<SseTestServer>> Start(const SseServerOptions& options);
  ~SseTestServer();
  SseTestServer(const SseTestServer&) = delete;
  SseTestServer& operator=(const SseTestServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:<port>" (https when TLS is on).
  std::string url() const;
  std::vector<ServedRequest> Served() const;
  size_t requests() const;
  // TCP connections accepted so far (keep-alive reuse keeps this low).
  size_t connections() const;
  // Requests fully read so far (replies may still be running).
  size_t received() const;
  // Waits until requests() >= n (replies finished and recorded); false after `timeout`.
  bool WaitForServed(size_t n, absl::Duration timeout) const;
  // Waits until received() >= n; false after `timeout`.
  bool WaitForReceived(size_t n, absl::Duration timeout) const;

  struct Impl;

 private:
  explicit SseTestServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  bool tls_ = false;
};

// A port on 127.0.0.1 that nothing listens on (bound, then closed).
absl::StatusOr<uint16_t> ClosedPort();

}  // namespace crest::loadgen::testing
