#include "sim/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>

#include "absl/strings/str_cat.h"

namespace crest::sim {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint64_t kBodyLimit = uint64_t{16} * 1024 * 1024;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 422:
      return "Unprocessable Entity";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

template <class Stream>
class Session : public Responder, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<Handler> handler)
      : stream_(std::move(stream)), handler_(std::move(handler)) {}

  void Start() {
    if constexpr (std::is_same_v<Stream, asio::ssl::stream<tcp::socket>>) {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->DoRead();
                              });
    } else {
      DoRead();
    }
  }

  void Reply(int status, const std::string& content_type, const std::string& body) override {
    Append(absl::StrCat("HTTP/1.1 ", status, " ", Reason(status),
                        "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                        keep_alive_ ? "\r\nConnection: keep-alive" : "\r\nConnection: close",
                        "\r\n\r\n", body));
    Complete();
  }

  void BeginStream() override {
    Append(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n",
                        "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
                        keep_alive_ ? "Connection: keep-alive" : "Connection: close", "\r\n\r\n"));
  }

  void Send(const std::string& data) override {
    if (data.empty()) return;
    char size[20];
    int n = snprintf(size, sizeof(size), "%zx\r\n", data.size());
    pending_.append(size, n);
    pending_.append(data);
    pending_.append("\r\n");
    Flush();
  }

  void EndStream() override {
    Append("0\r\n\r\n");
    Complete();
  }

  void SetOnAbort(std::function<void()> on_abort) override { on_abort_ = std::move(on_abort); }

 private:
  tcp::socket& Socket() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      return stream_;
    } else {
      return stream_.next_layer();
    }
  }

  void DoRead() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      Close();
      return;
    }
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    complete_ = false;
    HttpRequest r{std::string(req.method_string()), std::string(req.target()),
                  std::move(req.body())};
    (*handler_)(r, this->shared_from_this());
  }

  void Append(const std::string& data) {
    pending_.append(data);
    Flush();
  }

  void Complete() {
    complete_ = true;
    on_abort_ = nullptr;
    Flush();
  }

  void Flush() {
    if (writing_ || closed_) return;
    if (pending_.empty()) {
      if (complete_) {
        complete_ = false;
        if (keep_alive_) {
          DoRead();
        } else {
          Close();
        }
      }
      return;
    }
    writing_ = true;
    in_flight_.swap(pending_);
    pending_.clear();
    asio::async_write(stream_, asio::buffer(in_flight_),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->in_flight_.clear();
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->Flush();
                      });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_both, ignored);
    Socket().close(ignored);
    if (auto abort = std::move(on_abort_)) abort();
  }

  Stream stream_;
  std::shared_ptr<Handler> handler_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string pending_;
  std::string in_flight_;
  std::function<void()> on_abort_;
  bool writing_ = false;
  bool keep_alive_ = true;
  bool complete_ = false;
  bool closed_ = false;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(tcp::acceptor acceptor, asio::ssl::context* tls, std::shared_ptr<Handler> handler)
      : acceptor_(std::move(acceptor)), tls_(tls), handler_(std::move(handler)) {}

  void Accept() {
    acceptor_.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        beast::error_code ignored;
        s.set_option(tcp::no_delay(true), ignored);
        if (self->tls_ != nullptr) {
          std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(
              asio::ssl::stream<tcp::socket>(std::move(s), *self->tls_), self->handler_)
              ->Start();
        } else {
          std::make_shared<Session<tcp::socket>>(std::move(s), self->handler_)->Start();
        }
      }
      self->Accept();  // keep accepting, also after EMFILE and the like
    });
  }

 private:
  tcp::acceptor acceptor_;
  asio::ssl::context* tls_;
  std::shared_ptr<Handler> handler_;
};

}  // namespace

absl::StatusOr<int> Listen(asio::io_context& io, const std::string& address, int port,
                           asio::ssl::context* tls, Handler handler) {
  beast::error_code ec;
  asio::ip::address ip = asio::ip::make_address(address, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  tcp::acceptor acceptor(io);
  if (acceptor.open(endpoint.protocol(), ec) ||
      acceptor.set_option(asio::socket_base::reuse_address(true), ec) ||
      acceptor.bind(endpoint, ec) ||
      acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, ":", port, ": ", ec.message()));
  }
  int bound = acceptor.local_endpoint().port();
  std::make_shared<Listener>(std::move(acceptor), tls,
                             std::make_shared<Handler>(std::move(handler)))
      ->Accept();
  return bound;
}

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file,
    const std::vector<std::string>& ca_files) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  beast::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   ec);
  if (ctx->use_certificate_chain_file(cert_file, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerConfig.tlsCert: cannot load ", cert_file, ": ", ec.message()));
  }
  if (ctx->use_private_key_file(key_file, asio::ssl::context::pem, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerConfig.tlsPk: cannot load ", key_file, ": ", ec.message()));
  }
  for (const std::string& ca : ca_files) {
    if (ctx->load_verify_file(ca, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ServerConfig.tlsCaFile: cannot load ", ca, ": ", ec.message()));
    }
  }
  if (!ca_files.empty()) ctx->set_verify_mode(asio::ssl::verify_peer, ec);
  return ctx;
}

}  // namespace crest::sim
