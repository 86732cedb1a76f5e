// A small asynchronous HTTP/1.1 server (Boost.Beast parsing, raw keep-alive
// responses and chunked streams) over TCP or TLS (OpenSSL), built for many
// concurrent long-lived SSE streams on one io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace crest::sim {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
};

// One request/response exchange on a connection. All calls on the io thread.
class Responder {
 public:
  virtual ~Responder() = default;
  // A complete response with Content-Length.
  virtual void Reply(int status, const std::string& content_type, const std::string& body) = 0;
  // A chunked text/event-stream response: Begin, any number of Send, End.
  virtual void BeginStream() = 0;
  virtual void Send(const std::string& data) = 0;
  virtual void EndStream() = 0;
  // Called once if the connection dies before the response is complete.
  virtual void SetOnAbort(std::function<void()> on_abort) = 0;
};

using Handler = std::function<void(const HttpRequest&, std::shared_ptr<Responder>)>;

// Binds `address:port` (port 0: the OS picks) and serves `handler`; TLS when
// `tls` is not null (the context must outlive the io_context's work).
// Returns the bound port.
absl::StatusOr<int> Listen(boost::asio::io_context& io, const std::string& address, int port,
                           boost::asio::ssl::context* tls, Handler handler);

// Server-side TLS context from PEM files; client certificates are verified
// against `ca_files` when given (and requested, not required).
absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file,
    const std::vector<std::string>& ca_files);

}  // namespace crest::sim
