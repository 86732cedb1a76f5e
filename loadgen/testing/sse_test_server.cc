#include "loadgen/testing/sse_test_server.h"

#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace crest::loadgen::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::ip::tcp;

struct SseTestServer::Impl {
  explicit Impl(SseServerOptions o) : options(std::move(o)), acceptor(io) {}

  SseServerOptions options;
  asio::io_context io;
  std::optional<asio::ssl::context> ssl;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  mutable absl::Mutex mu;
  std::vector<ServedRequest> served ABSL_GUARDED_BY(mu);
  size_t received ABSL_GUARDED_BY(mu) = 0;
  size_t connections ABSL_GUARDED_BY(mu) = 0;

  awaitable<void> Accept();
  awaitable<void> Session(tcp::socket socket);
  template <typename Stream>
  awaitable<void> Serve(Stream& stream);
  // What a generation's reply sends: its API, tokens and their text.
  struct Generation {
    bool openai = false;
    uint32_t tokens = 0;
    uint32_t usage = 0;  // the tokens the reply's usage figures claim
    std::string text;
  };
  template <typename Stream>
  awaitable<bool> Reply(Stream& stream, const http::request<http::string_body>& req,
                        ServedRequest& rec);
  // Reply's phases for a generation: all at once, or streamed then ended
  // (the end is where a fault strikes).
  template <typename Stream>
  awaitable<bool> ReplyWhole(Stream& stream, const Generation& g, ServedRequest& rec);
  template <typename Stream>
  awaitable<bool> StreamTokens(Stream& stream, const Generation& g, ServedRequest& rec);
  template <typename Stream>
  awaitable<bool> EndStream(Stream& stream, ServedRequest& rec);
  void Record(ServedRequest rec) {
    absl::MutexLock lock(&mu);
    served.push_back(std::move(rec));
  }
};

namespace {

std::string Chunk(std::string_view data) {
  std::string out = absl::StrCat(absl::Hex(data.size()), "\r\n");
  out.append(data);
  out.append("\r\n");
  return out;
}

std::string JsonString(const std::string& s) { return nlohmann::json(s).dump(); }

// The kernel's receive time of the newest bytes queued on `fd` (peeked, not
// read); InfinitePast when there is none.
absl::Time KernelArrival(int fd) {
  char data[16384];
  char control[CMSG_SPACE(sizeof(timespec))];
  iovec iov{data, sizeof(data)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT) <= 0) return absl::InfinitePast();
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
      return absl::TimeFromTimespec(ts);
    }
  }
  return absl::InfinitePast();
}

std::string TokenEvent(bool openai, uint32_t i, bool last, uint32_t usage_tokens,
                       uint32_t prompt_tokens, const std::string& model, const std::string& all) {
  const std::string tok = absl::StrCat("t", i, " ");
  if (openai) {
    std::string event =
        absl::StrCat(R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":)",
                     JsonString(model), R"(,"choices":[{"index":0,"text":")", tok,
                     R"(","finish_reason":)", last ? R"("length")" : "null", "}]");
    if (last) {
      absl::StrAppend(&event, R"(,"usage":{"prompt_tokens":)", prompt_tokens,
                      R"(,"completion_tokens":)", usage_tokens, R"(,"total_tokens":)",
                      prompt_tokens + usage_tokens, "}");
    }
    return absl::StrCat("data: ", event, "}\n\n");
  }
  if (!last) {
    return absl::StrCat(R"(data: {"token":{"id":)", i, R"(,"text":")", tok,
                        R"("},"generated_text":null,"details":null})", "\n\n");
  }
  return absl::StrCat(R"(data: {"token":{"id":)", i, R"(,"text":")", tok, R"("},"generated_text":)",
                      JsonString(all),
                      R"(,"details":{"finish_reason":"length","generated_tokens":)", usage_tokens,
                      R"(,"prompt_tokens":)", prompt_tokens, "}}\n\n");
}

std::string Response(int status, const std::string& content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, " ", status == 200 ? "OK" : "Error",
                      "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body);
}

}  // namespace

template <typename Stream>
awaitable<bool> SseTestServer::Impl::Reply(Stream& stream,
                                           const http::request<http::string_body>& req,
                                           ServedRequest& rec) {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  const SseServerOptions& o = options;
  rec.path = std::string(req.target());
  if (rec.path == "/v2/health/ready" || rec.path == "/v2/health/live") {
    co_await asio::async_write(stream, asio::buffer(Response(200, "application/json", "{}")),
                               token);
    rec.completed = !ec;
    co_return !ec;
  }
  const bool openai = rec.path == "/v1/completions";
  if (!openai && rec.path != "/infer" && rec.path != "/generate") {
    co_await asio::async_write(
        stream, asio::buffer(Response(404, "application/json", R"({"error":"no such path"})")),
        token);
    co_return !ec;
  }
  nlohmann::json body = nlohmann::json::parse(req.body(), nullptr, false);
  if (!body.is_object()) {
    co_await asio::async_write(
        stream, asio::buffer(Response(400, "application/json", R"({"error":"bad json"})")), token);
    co_return !ec;
  }
  rec.stream = body.value("stream", false);
  rec.model = body.value("model", "");
  rec.prompt = body.value(openai ? "prompt" : "inputs", "");
  rec.max_tokens = openai ? body.value("max_tokens", 16U)
                          : body.value("/parameters/max_new_tokens"_json_pointer, 16U);
  if (o.fault == Fault::kHttpError) {
    co_await asio::async_write(
        stream,
        asio::buffer(Response(o.http_status, "application/json",
                              R"({"error":"injected failure","error_type":"test"})")),
        token);
    co_return !ec;
  }
  Generation g;
  g.openai = openai;
  g.tokens = o.tokens > 0 ? o.tokens : rec.max_tokens;
  g.usage = o.fault == Fault::kUsageMismatch ? g.tokens + 1 : g.tokens;
  for (uint32_t i = 0; i < g.tokens; ++i) absl::StrAppend(&g.text, "t", i, " ");
  if (!rec.stream) co_return co_await ReplyWhole(stream, g, rec);
  if (!co_await StreamTokens(stream, g, rec)) co_return false;
  co_return co_await EndStream(stream, rec);
}

template <typename Stream>
awaitable<bool> SseTestServer::Impl::ReplyWhole(Stream& stream, const Generation& g,
                                                ServedRequest& rec) {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  const SseServerOptions& o = options;
  if (o.text_delay > absl::ZeroDuration()) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(absl::ToChronoMilliseconds(o.text_delay));
    co_await timer.async_wait(token);
  }
  std::string reply;
  if (g.openai) {
    reply =
        absl::StrCat(R"({"id":"cmpl-1","object":"text_completion","created":1700000000,)",
                     R"("model":)", JsonString(rec.model), R"(,"choices":[{"index":0,"text":)",
                     JsonString(g.text), R"(,"finish_reason":"length"}],"usage":{"prompt_tokens":)",
                     o.prompt_tokens, R"(,"completion_tokens":)", g.usage, R"(,"total_tokens":)",
                     o.prompt_tokens + g.usage, "}}");
  } else {
    reply = absl::StrCat(R"({"generated_text":)", JsonString(g.text),
                         R"(,"details":{"finish_reason":"length","generated_tokens":)", g.usage,
                         R"(,"prompt_tokens":)", o.prompt_tokens, "}}");
  }
  co_await asio::async_write(stream, asio::buffer(Response(200, "application/json", reply)), token);
  rec.first_token_sent = rec.last_byte_sent = absl::Now();
  rec.tokens_sent = g.tokens;
  rec.completed = !ec;
  co_return !ec;
}

template <typename Stream>
awaitable<bool> SseTestServer::Impl::StreamTokens(Stream& stream, const Generation& g,
                                                  ServedRequest& rec) {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  const SseServerOptions& o = options;
  co_await asio::async_write(stream,
                             asio::buffer(std::string_view(
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")),
                             token);
  if (ec) co_return false;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(absl::ToChronoMicroseconds(o.first_token_delay));
  co_await timer.async_wait(token);
  const uint32_t per_write = std::max(1U, o.events_per_write);
  const uint32_t n = g.tokens;
  uint32_t i = 0;
  while (i < n) {
    const bool fault_now =
        o.fault != Fault::kNone && o.fault != Fault::kUsageMismatch && i >= o.fault_after_tokens;
    if (fault_now) break;
    std::string events;
    for (uint32_t k = 0; k < per_write && i < n; ++k, ++i) {
      if (o.fault != Fault::kNone && o.fault != Fault::kUsageMismatch &&
          i >= o.fault_after_tokens) {
        break;
      }
      events += TokenEvent(g.openai, i, i + 1 == n, g.usage, o.prompt_tokens, rec.model, g.text);
    }
    // Stamped as the write begins: asio writes at once and may resume this
    // coroutine later, when the thread is busy with other streams.
    const absl::Time writing = absl::Now();
    co_await asio::async_write(stream, asio::buffer(Chunk(events)), token);
    if (ec) co_return false;
    if (rec.tokens_sent == 0) rec.first_token_sent = writing;
    rec.last_byte_sent = absl::Now();
    rec.tokens_sent = i;
    if (i < n && o.token_interval > absl::ZeroDuration()) {
      timer.expires_after(absl::ToChronoMicroseconds(o.token_interval));
      co_await timer.async_wait(token);
    }
  }
  co_return true;
}

template <typename Stream>
awaitable<bool> SseTestServer::Impl::EndStream(Stream& stream, ServedRequest& rec) {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  const SseServerOptions& o = options;
  switch (o.fault) {
    case Fault::kResetMidStream: {
      auto& socket = beast::get_lowest_layer(stream);
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      socket.close(ec);
      co_return false;
    }
    case Fault::kMalformedSse:
      co_await asio::async_write(stream, asio::buffer(Chunk("data: {\"token\": oops\n\n")), token);
      break;  // then the normal end: the client must already have given up
    case Fault::kStall: {
      asio::steady_timer timer(co_await asio::this_coro::executor);
      timer.expires_after(std::chrono::hours(1));
      co_await timer.async_wait(token);
      co_return false;
    }
    case Fault::kTruncate:
      co_await asio::async_write(stream, asio::buffer(std::string_view("0\r\n\r\n")), token);
      rec.last_byte_sent = absl::Now();
      co_return !ec;
    default:
      break;
  }
  co_await asio::async_write(stream, asio::buffer(Chunk("data: [DONE]\n\n") + "0\r\n\r\n"), token);
  rec.last_byte_sent = absl::Now();
  rec.completed = !ec && o.fault == Fault::kNone;
  co_return !ec;
}

template <typename Stream>
awaitable<void> SseTestServer::Impl::Serve(Stream& stream) {
  beast::flat_buffer buffer;
  boost::system::error_code ec;
  for (bool served = false;; served = true) {
    absl::Time arrived = absl::InfinitePast();
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      if (options.stamp_arrival && buffer.size() == 0) {
        co_await stream.async_wait(tcp::socket::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
        arrived = KernelArrival(stream.native_handle());
      }
    }
    http::request<http::string_body> req;
    co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    if (served && options.reset_kept_alive_requests) {
      auto& socket = beast::get_lowest_layer(stream);
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      socket.close(ec);
      co_return;
    }
    ServedRequest rec;
    rec.received = absl::Now();
    rec.arrived = arrived == absl::InfinitePast() ? rec.received : arrived;
    {
      absl::MutexLock lock(&mu);
      ++received;
    }
    const bool keep = co_await Reply(stream, req, rec);
    Record(std::move(rec));
    if (!keep || !req.keep_alive() || options.close_after_reply) co_return;
  }
}

awaitable<void> SseTestServer::Impl::Session(tcp::socket socket) {
  if (!ssl) {
    co_await Serve(socket);
    co_return;
  }
  asio::ssl::stream<tcp::socket> tls(std::move(socket), *ssl);
  boost::system::error_code ec;
  co_await tls.async_handshake(asio::ssl::stream_base::server,
                               asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) co_await Serve(tls);
}

awaitable<void> SseTestServer::Impl::Accept() {
  while (true) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    socket.set_option(tcp::no_delay(true), ec);
    if (options.stamp_arrival) {
      const int one = 1;
      setsockopt(socket.native_handle(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
    }
    {
      absl::MutexLock lock(&mu);
      ++connections;
    }
    asio::co_spawn(acceptor.get_executor(), Session(std::move(socket)), asio::detached);
  }
}

absl::StatusOr<std::unique_ptr<SseTestServer>> SseTestServer::Start(
    const SseServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  boost::system::error_code ec;
  if (!options.cert_file.empty()) {
    impl->ssl.emplace(asio::ssl::context::tls_server);
    impl->ssl->use_certificate_chain_file(options.cert_file, ec);
    if (!ec) impl->ssl->use_private_key_file(options.key_file, asio::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("test server TLS: ", ec.message()));
  }
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("test server listen: ", ec.message()));
  const uint16_t port = impl->acceptor.local_endpoint().port();
  asio::co_spawn(impl->io, impl->Accept(), asio::detached);
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl->threads.emplace_back([io = &impl->io, cpus = options.cpus] {
      if (!cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (uint32_t cpu : cpus) CPU_SET(cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
      io->run();
    });
  }
  auto server = std::unique_ptr<SseTestServer>(new SseTestServer(std::move(impl)));
  server->port_ = port;
  server->tls_ = !options.cert_file.empty();
  return server;
}

SseTestServer::SseTestServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SseTestServer::~SseTestServer() {
  impl_->io.stop();
  for (std::thread& t : impl_->threads) t.join();
}

std::string SseTestServer::url() const {
  return absl::StrCat(tls_ ? "https" : "http", "://127.0.0.1:", port_);
}

std::vector<ServedRequest> SseTestServer::Served() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->served;
}

size_t SseTestServer::requests() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->served.size();
}

size_t SseTestServer::connections() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->connections;
}

size_t SseTestServer::received() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->received;
}

bool SseTestServer::WaitForServed(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&impl_->mu);
  Impl* impl = impl_.get();
  auto reached = [impl, n]()
                     ABSL_SHARED_LOCKS_REQUIRED(impl->mu) { return impl->served.size() >= n; };
  return impl_->mu.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool SseTestServer::WaitForReceived(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&impl_->mu);
  Impl* impl = impl_.get();
  auto reached = [impl, n]() ABSL_SHARED_LOCKS_REQUIRED(impl->mu) { return impl->received >= n; };
  return impl_->mu.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

absl::StatusOr<uint16_t> ClosedPort() {
  asio::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("binding a port: ", ec.message()));
  const uint16_t port = acceptor.local_endpoint().port();
  acceptor.close(ec);  // bound but never listening: connections are refused
  return port;
}

}  // namespace crest::loadgen::testing
