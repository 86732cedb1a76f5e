// How the runner's event loop moves requests and replies: a Transport sends a
// Transfer's request and hands the reply's bytes back to a TransferSink. Two
// implementations: crest-bench's own HTTP/1.1 client for http:// (the fast
// path, with kernel receive timestamps) and libcurl for https:// or on request.
// Internal to crest_loadgen.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "loadgen/run_types.h"
#include "loadgen/sse_parser.h"

namespace crest::loadgen {

// One request in flight.
struct Transfer {
  uint64_t index = 0;
  bool warmup = false;
  size_t slot = 0;                    // position in the runner's active list
  const std::string* body = nullptr;  // the JSON request body (owned by the runner)
  size_t body_key = 0;                // which prompt the body is for (transports cache per key)
  absl::Time started;                 // handed to the transport
  absl::Time scheduled = absl::InfinitePast();  // rate mode: when it was due
  absl::Time sent;                              // the request went to the socket (started if never)
  absl::Time first_token;
  absl::Time last_token;
  absl::Time last_byte;  // arrival of the reply's latest bytes
  bool have_token = false;
  bool have_bytes = false;
  int http_status = 0;
  SseFramer framer;
  ReplyState state;
  std::string text;  // non-stream body, or the start of an error body
  std::vector<float> gaps;
  // Transport-owned state.
  void* easy = nullptr;  // libcurl: the CURL easy handle
  void* conn = nullptr;  // own client: the connection carrying it; libcurl: the transport
  int attempts = 0;      // own client: sends repeated after a kept-alive connection died
};

// The runner's side of a transfer's life; every call comes from the loop thread.
class TransferSink {
 public:
  virtual ~TransferSink() = default;
  // The request is being written to a connected socket now (`at`).
  virtual void OnSent(Transfer* t, absl::Time at) = 0;
  // The reply's status line arrived (called before any OnBody).
  virtual void OnStatus(Transfer* t, int http_status) = 0;
  // Reply body bytes that reached the client at `arrived`; false aborts the transfer.
  virtual bool OnBody(Transfer* t, std::string_view bytes, absl::Time arrived) = 0;
  // The transfer ended; `failure` is empty when the transport delivered the
  // whole reply, else its reason ("connect", "reset", "timeout", ...). The
  // transport has let go of `t` before this call.
  virtual void OnDone(Transfer* t, const std::string& failure) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Prepares to run on `epoll_fd`, registering sockets there with the
  // transport's own epoll_event data.
  virtual absl::Status Init(int epoll_fd) = 0;
  // Opens up to `n` connections before anything is measured, waiting until
  // `deadline` at most; connections that fail are not an error (their requests
  // will fail with a reason).
  virtual void Preconnect(uint32_t n, absl::Time deadline) = 0;
  // Starts `t` (its request may go out now or at the next Flush).
  virtual void Start(Transfer* t) = 0;
  // Sends whatever Start left pending.
  virtual void Flush() = 0;
  virtual void HandleEvent(const epoll_event& event) = 0;
  // Called once the events of one epoll wait are all handled (events of that
  // batch may still name connections the transport closed in the meantime).
  virtual void AfterEvents() {}
  // When HandleDeadline must run next (timeouts, libcurl's timer).
  virtual absl::Time NextDeadline() const = 0;
  virtual void HandleDeadline(absl::Time now) = 0;
};

// crest-bench's own HTTP/1.1 client over plain TCP: `url` is the request URL
// (http://host[:port]/path); `stream` adds "Accept: text/event-stream".
std::unique_ptr<Transport> MakeHttp1Transport(std::string url, bool stream,
                                              absl::Duration request_timeout, TransferSink* sink);

// GET <management>/v2/health/ready must answer 200 (libcurl, blocking).
absl::Status CheckReady(const Target& target);

// libcurl's multi socket API (http and https).
std::unique_ptr<Transport> MakeCurlTransport(std::string url, bool stream, const Target& target,
                                             absl::Duration request_timeout, TransferSink* sink);

}  // namespace crest::loadgen
