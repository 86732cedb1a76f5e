// crest-bench's own HTTP/1.1 client for plain http://: one kept-alive TCP
// connection per request slot, opened before anything is measured; each
// request is one prebuilt buffer and one send(); each read is one recvmsg()
// that also returns the kernel's arrival time of the bytes (SO_TIMESTAMPNS),
// so the figures do not include time the replies waited for the event loop.
// libcurl spends about twice as long per request on loopback (URL parsing,
// request formatting, connection-cache liveness polls, epoll re-registration;
// the profile is in docs/crest-bench.md), which capped non-streaming runs at
// half of wrk's rate.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

#include "loadgen/http1_parser.h"
#include "loadgen/transport.h"

namespace crest::loadgen {
namespace {

constexpr size_t kReadBuffer = size_t{64} * 1024;
// How often requests are checked against their timeout.
constexpr absl::Duration kTimeoutScan = absl::Milliseconds(20);

// One TCP connection to the server.
struct Conn {
  enum class State { kConnecting, kIdle, kBusy, kClosed };
  int fd = -1;
  State state = State::kConnecting;
  size_t index = 0;       // position in Http1Transport::conns_
  size_t idle_pos = 0;    // position in Http1Transport::idle_ while idle
  size_t addr = 0;        // which of the name's addresses it connects to
  int connect_error = 0;  // connect() failed at once with this errno
  Transfer* t = nullptr;
  bool reused = false;  // carried a complete exchange before the current one
  bool want_out = false;
  const std::string* out = nullptr;  // request bytes being written
  size_t out_off = 0;
  Http1ResponseParser parser;
  absl::Time deadline = absl::InfiniteFuture();
};

// Parses "http://host[:port][/path]".
struct ParsedUrl {
  std::string host;
  std::string port = "80";
  std::string authority;  // host[:port] as written, for the Host header
  std::string path = "/";
};

absl::StatusOr<ParsedUrl> ParseHttpUrl(absl::string_view url) {
  if (!absl::ConsumePrefix(&url, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" is not an http:// URL"));
  }
  ParsedUrl p;
  const size_t slash = url.find('/');
  p.authority = std::string(url.substr(0, slash));
  if (slash != absl::string_view::npos) p.path = std::string(url.substr(slash));
  absl::string_view a = p.authority;
  if (a.empty() || absl::StrContains(a, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat("URL host \"", a, "\" is empty or carries credentials"));
  }
  absl::string_view port;
  if (a.front() == '[') {  // [IPv6]:port
    const size_t close = a.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("unclosed [ in URL");
    p.host = std::string(a.substr(1, close - 1));
    if (close + 1 < a.size()) {
      if (a[close + 1] != ':') return absl::InvalidArgumentError("bad port in URL");
      port = a.substr(close + 2);
    }
  } else if (const size_t colon = a.rfind(':'); colon != absl::string_view::npos) {
    p.host = std::string(a.substr(0, colon));
    port = a.substr(colon + 1);
  } else {
    p.host = std::string(a);
  }
  if (!port.empty()) {
    int n = 0;
    if (!absl::SimpleAtoi(port, &n) || n <= 0 || n > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port \"", port, "\" in URL"));
    }
    p.port = std::string(port);
  }
  return p;
}

// Hands the parser's findings to the runner with the bytes' arrival time.
class ReplySink final : public Http1Sink {
 public:
  ReplySink(TransferSink* sink, Transfer* t, absl::Time arrived)
      : sink_(sink), t_(t), arrived_(arrived) {}
  bool OnStatus(int code) override {
    sink_->OnStatus(t_, code);
    return true;
  }
  bool OnBody(std::string_view data) override { return sink_->OnBody(t_, data, arrived_); }

 private:
  TransferSink* sink_;
  Transfer* t_;
  absl::Time arrived_;
};

class Http1Transport final : public Transport {
 public:
  Http1Transport(std::string url, bool stream, absl::Duration timeout, TransferSink* sink)
      : url_(std::move(url)), stream_(stream), timeout_(timeout), sink_(sink) {}
  ~Http1Transport() override {
    for (auto& c : conns_) close(c->fd);
  }
  Http1Transport(const Http1Transport&) = delete;
  Http1Transport& operator=(const Http1Transport&) = delete;

  absl::Status Init(int epoll_fd) override;
  void Preconnect(uint32_t n, absl::Time deadline) override;
  void Start(Transfer* t) override;
  void Flush() override {}  // Start sends at once
  void HandleEvent(const epoll_event& event) override;
  void AfterEvents() override { graveyard_.clear(); }
  absl::Time NextDeadline() const override { return next_scan_; }
  void HandleDeadline(absl::Time now) override;

 private:
  // Starts `t` on an idle connection, or on a new one when there is none or `fresh`.
  void StartOn(Transfer* t, bool fresh);
  // Opens a connection (non-blocking connect); nullptr when no socket could be made.
  Conn* Open(std::string* failure);
  void Send(Conn* c, Transfer* t);
  void WriteOut(Conn* c);
  void Read(Conn* c);
  void SetWantOut(Conn* c, bool want);
  // The transfer on `c` ends: the connection goes back to idle or is closed.
  void Complete(Conn* c, bool reusable, const std::string& failure);
  // The connection failed under its transfer; a request that died unanswered
  // on a reused connection (the server closed it while idle) is sent once more
  // on a new one, as libcurl and browsers do.
  void Broken(Conn* c, const std::string& failure);
  void Close(Conn* c);
  void MakeIdle(Conn* c);
  Conn* TakeIdle();
  const std::string& RequestBytes(const Transfer& t);

  const std::string url_;
  const bool stream_;
  const absl::Duration timeout_;
  TransferSink* sink_;
  int epoll_fd_ = -1;
  std::string head_;  // the request up to the Content-Length value
  std::vector<sockaddr_storage> addrs_;
  std::vector<socklen_t> addr_lens_;
  size_t addr_ = 0;  // the address connections go to
  std::string resolve_error_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> idle_;
  std::vector<std::unique_ptr<Conn>> graveyard_;  // closed; freed by AfterEvents
  std::vector<std::string> requests_;             // request bytes by body_key
  std::vector<bool> have_request_;
  absl::Time next_scan_ = absl::InfiniteFuture();
  size_t busy_ = 0;
  std::vector<char> buffer_ = std::vector<char>(kReadBuffer);
};

absl::Status Http1Transport::Init(int epoll_fd) {
  epoll_fd_ = epoll_fd;
  absl::StatusOr<ParsedUrl> url = ParseHttpUrl(url_);
  if (!url.ok()) return url.status();
  head_ = absl::StrCat("POST ", url->path, " HTTP/1.1\r\nHost: ", url->authority,
                       "\r\nContent-Type: application/json\r\nAccept: ",
                       stream_ ? "text/event-stream" : "*/*", "\r\nContent-Length: ");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(url->host.c_str(), url->port.c_str(), &hints, &found); rc != 0) {
    resolve_error_ = gai_strerror(rc);
    spdlog::warn("cannot resolve {}: {}", url->host, resolve_error_);
    return absl::OkStatus();  // every request fails with reason "connect"
  }
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    sockaddr_storage s{};
    std::memcpy(&s, a->ai_addr, a->ai_addrlen);
    addrs_.push_back(s);
    addr_lens_.push_back(a->ai_addrlen);
  }
  freeaddrinfo(found);
  return absl::OkStatus();
}

Conn* Http1Transport::Open(std::string* failure) {
  if (addrs_.empty()) {
    *failure = "connect";
    return nullptr;
  }
  const auto* addr = reinterpret_cast<const sockaddr*>(&addrs_[addr_]);
  const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    spdlog::warn("socket: {}", std::strerror(errno));
    *failure = "connect";
    return nullptr;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // recvmsg then reports when the kernel received each read's bytes.
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
  auto conn = std::make_unique<Conn>();
  Conn* c = conn.get();
  c->fd = fd;
  c->addr = addr_;
  c->index = conns_.size();
  conns_.push_back(std::move(conn));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
  ev.data.ptr = c;
  c->want_out = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  if (connect(fd, addr, addr_lens_[addr_]) != 0 && errno != EINPROGRESS) {
    // Refused at once: reported when the loop sees the socket (EPOLLHUP).
    c->connect_error = errno;
  }
  return c;
}

void Http1Transport::Preconnect(uint32_t n, absl::Time deadline) {
  std::vector<epoll_event> events(256);
  auto connecting = [this] {
    return std::any_of(conns_.begin(), conns_.end(),
                       [](const auto& c) { return c->state == Conn::State::kConnecting; });
  };
  // A wave per address of the name until one answers.
  for (size_t address = addr_; address < addrs_.size() && idle_.empty(); address = addr_) {
    std::string failure;
    for (uint32_t i = 0; i < n; ++i) {
      if (Open(&failure) == nullptr) break;
    }
    while (connecting()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 100));
      const int got = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), ms);
      for (int i = 0; i < got; ++i) HandleEvent(events[i]);
      graveyard_.clear();
    }
    if (addr_ == address) break;  // this address answered, timed out, or was the last
  }
  // Connections still opening are dropped: their slots connect when first used.
  std::vector<Conn*> late;
  for (auto& c : conns_) {
    if (c->state == Conn::State::kConnecting) late.push_back(c.get());
  }
  for (Conn* c : late) Close(c);
  graveyard_.clear();
  spdlog::debug("preconnected {} of {} connections", idle_.size(), n);
}

const std::string& Http1Transport::RequestBytes(const Transfer& t) {
  if (t.body_key >= requests_.size()) {
    requests_.resize(t.body_key + 1);
    have_request_.resize(t.body_key + 1);
  }
  if (!have_request_[t.body_key]) {
    requests_[t.body_key] = absl::StrCat(head_, t.body->size(), "\r\n\r\n", *t.body);
    have_request_[t.body_key] = true;
  }
  return requests_[t.body_key];
}

void Http1Transport::Start(Transfer* t) { StartOn(t, /*fresh=*/false); }

void Http1Transport::StartOn(Transfer* t, bool fresh) {
  ++busy_;
  if (next_scan_ == absl::InfiniteFuture()) next_scan_ = absl::Now() + kTimeoutScan;
  t->conn = nullptr;
  if (Conn* c = fresh ? nullptr : TakeIdle()) {
    Send(c, t);
    return;
  }
  std::string failure;
  Conn* c = Open(&failure);
  if (c == nullptr) {
    --busy_;
    sink_->OnDone(t, failure);
    return;
  }
  c->t = t;
  t->conn = c;
  c->deadline = t->started + timeout_;
}

Conn* Http1Transport::TakeIdle() {
  if (idle_.empty()) return nullptr;
  Conn* c = idle_.back();  // the most recently used: its state is warmest
  idle_.pop_back();
  c->state = Conn::State::kBusy;
  return c;
}

void Http1Transport::MakeIdle(Conn* c) {
  c->state = Conn::State::kIdle;
  c->t = nullptr;
  c->deadline = absl::InfiniteFuture();
  c->idle_pos = idle_.size();
  idle_.push_back(c);
}

void Http1Transport::Send(Conn* c, Transfer* t) {
  c->state = Conn::State::kBusy;
  c->t = t;
  t->conn = c;
  c->deadline = t->started + timeout_;
  c->parser.Reset();
  c->out = &RequestBytes(*t);
  c->out_off = 0;
  sink_->OnSent(t, absl::Now());
  WriteOut(c);
}

void Http1Transport::WriteOut(Conn* c) {
  while (c->out_off < c->out->size()) {
    const ssize_t n = send(c->fd, c->out->data() + c->out_off, c->out->size() - c->out_off,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      SetWantOut(c, true);
      return;
    }
    if (n < 0 && errno == EINTR) continue;
    Broken(c, "reset");
    return;
  }
  SetWantOut(c, false);
}

void Http1Transport::SetWantOut(Conn* c, bool want) {
  if (c->want_out == want) return;
  c->want_out = want;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want ? static_cast<uint32_t>(EPOLLOUT) : 0U);
  ev.data.ptr = c;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

void Http1Transport::HandleEvent(const epoll_event& event) {
  auto* c = static_cast<Conn*>(event.data.ptr);
  if (c->state == Conn::State::kClosed) return;
  if (c->state == Conn::State::kConnecting) {
    if ((event.events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    int err = c->connect_error;
    socklen_t len = sizeof(err);
    if (err == 0) getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      spdlog::debug("connect: {}", std::strerror(err));
      Transfer* t = c->t;
      // Another address of the name may answer (localhost: ::1, then 127.0.0.1).
      bool next_address = c->addr < addr_;  // one already moved on
      if (!next_address && addr_ + 1 < addrs_.size()) {
        ++addr_;
        next_address = true;
      }
      Close(c);
      if (t != nullptr) {
        --busy_;
        if (next_address) {
          StartOn(t, /*fresh=*/true);  // nothing was sent: not a repeat
        } else {
          sink_->OnDone(t, "connect");
        }
      }
      return;
    }
    if (c->t != nullptr) {
      Send(c, c->t);
    } else {
      SetWantOut(c, false);
      MakeIdle(c);
    }
    return;
  }
  if (c->state == Conn::State::kIdle) {
    // Nothing was asked on it: the server closed it (or talks out of turn).
    if ((event.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
      idle_[c->idle_pos] = idle_.back();
      idle_[c->idle_pos]->idle_pos = c->idle_pos;
      idle_.pop_back();
      Close(c);
    }
    return;
  }
  if ((event.events & EPOLLOUT) != 0 && c->out_off < c->out->size()) {
    WriteOut(c);
    if (c->state != Conn::State::kBusy) return;
  }
  if ((event.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) Read(c);
}

void Http1Transport::Read(Conn* c) {
  char control[CMSG_SPACE(sizeof(timespec))];
  iovec iov{buffer_.data(), buffer_.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    Broken(c, "reset");
    return;
  }
  Transfer* t = c->t;
  if (n == 0) {
    const bool in_body = c->parser.in_body();
    if (c->parser.Eof() == Http1ResponseParser::Result::kComplete) {
      Complete(c, false, "");
    } else {
      Broken(c, in_body ? "truncated" : "reset");
    }
    return;
  }
  absl::Time arrived = absl::InfinitePast();
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
      arrived = absl::TimeFromTimespec(ts);
    }
  }
  // Without a kernel stamp (or one from a clock step), the time it is read.
  const absl::Time now = absl::Now();
  if (arrived == absl::InfinitePast() || arrived > now) arrived = now;
  ReplySink reply(sink_, t, arrived);
  size_t consumed = 0;
  const std::string_view bytes(buffer_.data(), static_cast<size_t>(n));
  switch (c->parser.Feed(bytes, &consumed, reply)) {
    case Http1ResponseParser::Result::kNeedMore:
      return;
    case Http1ResponseParser::Result::kComplete:
      // Bytes past the response were never asked for: do not reuse the connection.
      Complete(c, c->parser.keep_alive() && consumed == bytes.size(), "");
      return;
    case Http1ResponseParser::Result::kAborted:
      Complete(c, false, "aborted");  // the runner recorded why
      return;
    case Http1ResponseParser::Result::kError:
      spdlog::debug("request {}: {}", t->index, c->parser.error());
      Complete(c, false, "malformed_http");
      return;
  }
}

void Http1Transport::Complete(Conn* c, bool reusable, const std::string& failure) {
  Transfer* t = c->t;
  t->conn = nullptr;
  if (reusable) {
    c->reused = true;
    MakeIdle(c);
  } else {
    Close(c);
  }
  --busy_;
  sink_->OnDone(t, failure);
}

void Http1Transport::Broken(Conn* c, const std::string& failure) {
  Transfer* t = c->t;
  const bool retry = c->reused && !c->parser.started() && t->attempts == 0;
  Close(c);
  if (retry) {
    ++t->attempts;
    --busy_;
    spdlog::debug("request {}: kept-alive connection closed by the server; sending again",
                  t->index);
    StartOn(t, /*fresh=*/true);  // the other idle connections may be closing too
    return;
  }
  t->conn = nullptr;
  --busy_;
  sink_->OnDone(t, failure);
}

void Http1Transport::Close(Conn* c) {
  close(c->fd);  // also removes it from the epoll set
  c->state = Conn::State::kClosed;
  c->t = nullptr;
  const size_t i = c->index;
  graveyard_.push_back(std::move(conns_[i]));
  if (i + 1 != conns_.size()) {
    conns_[i] = std::move(conns_.back());
    conns_[i]->index = i;
  }
  conns_.pop_back();
}

void Http1Transport::HandleDeadline(absl::Time now) {
  if (busy_ == 0) {
    next_scan_ = absl::InfiniteFuture();
    return;
  }
  next_scan_ = now + kTimeoutScan;
  std::vector<Conn*> expired;
  for (auto& c : conns_) {
    if (c->t != nullptr && c->deadline <= now) expired.push_back(c.get());
  }
  for (Conn* c : expired) {
    Transfer* t = c->t;
    t->conn = nullptr;
    Close(c);
    --busy_;
    sink_->OnDone(t, "timeout");
  }
}

}  // namespace

std::unique_ptr<Transport> MakeHttp1Transport(std::string url, bool stream,
                                              absl::Duration request_timeout, TransferSink* sink) {
  return std::make_unique<Http1Transport>(std::move(url), stream, request_timeout, sink);
}

}  // namespace crest::loadgen
