// The libcurl transport: the multi socket API on the runner's epoll, one easy
// handle per request slot, kept configured and reused with its connection.
// Used for https:// (TLS) and when asked for; plain http goes through
// crest-bench's own client (http1_transport.cc), which costs a third as much
// per request (profile in docs/crest-bench.md).
#include <curl/curl.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

#include "loadgen/transport.h"

namespace crest::loadgen {
namespace {

std::string FailureForCurl(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return "connect";
    case CURLE_OPERATION_TIMEDOUT:
      return "timeout";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
      return "reset";
    case CURLE_PARTIAL_FILE:
      return "truncated";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return "tls";
    default:
      return absl::StrCat("curl_", static_cast<int>(code));
  }
}

// Sets the TLS options of `target` on an easy handle.
void ApplyTls(CURL* easy, const Target& target) {
  if (!target.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, target.ca_file.c_str());
  if (target.insecure_skip_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!target.client_cert_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLCERT, target.client_cert_file.c_str());
  }
  if (!target.client_key_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLKEY, target.client_key_file.c_str());
  }
}

size_t DiscardBody(char* /*ptr*/, size_t size, size_t n, void* /*user*/) { return size * n; }

class CurlTransport final : public Transport {
 public:
  CurlTransport(std::string url, bool stream, const Target& target, absl::Duration timeout,
                TransferSink* sink)
      : url_(std::move(url)), stream_(stream), target_(target), timeout_(timeout), sink_(sink) {}

  ~CurlTransport() override {
    for (CURL* easy : busy_) {
      curl_multi_remove_handle(multi_, easy);
      curl_easy_cleanup(easy);
    }
    for (CURL* easy : idle_) curl_easy_cleanup(easy);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (headers_ != nullptr) curl_slist_free_all(headers_);
  }
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  absl::Status Init(int epoll_fd) override;
  void Preconnect(uint32_t /*n*/, absl::Time /*deadline*/) override {}  // warm-up requests do it
  void Start(Transfer* t) override;
  void Flush() override { Act(CURL_SOCKET_TIMEOUT, 0); }
  void HandleEvent(const epoll_event& event) override;
  absl::Time NextDeadline() const override { return timer_deadline_; }
  void HandleDeadline(absl::Time /*now*/) override { Act(CURL_SOCKET_TIMEOUT, 0); }

 private:
  static int OnSocket(CURL* easy, curl_socket_t s, int what, void* user, void* socketp);
  static int OnTimer(CURLM* multi, long timeout_ms, void* user);  // NOLINT(google-runtime-int)
  static size_t OnData(char* ptr, size_t size, size_t n, void* user);
  static int OnPrereq(void* user, char* conn_primary_ip, char* conn_local_ip, int conn_primary_port,
                      int conn_local_port);

  // Runs curl on one socket (or its timers) and reports finished transfers.
  void Act(curl_socket_t s, int flags);
  // A request that died unanswered on a reused connection (the server closed
  // it while idle) is sent once more on a new one, as the own client does
  // (http1_transport.cc): libcurl retries only some of these itself. True
  // when `e` was added again.
  bool SendAgain(CURL* e, Transfer* t, CURLcode code);
  CURL* NewHandle();

  const std::string url_;
  const bool stream_;
  const Target& target_;
  const absl::Duration timeout_;
  TransferSink* sink_;
  CURLM* multi_ = nullptr;
  int epoll_fd_ = -1;
  curl_slist* headers_ = nullptr;
  absl::Time timer_deadline_ = absl::InfiniteFuture();
  std::vector<CURL*> idle_;
  std::vector<CURL*> busy_;
};

int CurlTransport::OnSocket(CURL* /*easy*/, curl_socket_t s, int what, void* user, void* socketp) {
  auto* self = static_cast<CurlTransport*>(user);
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(self->epoll_fd_, EPOLL_CTL_DEL, s, nullptr);
    return 0;
  }
  epoll_event ev{};
  ev.data.fd = s;
  if ((what & CURL_POLL_IN) != 0) ev.events |= EPOLLIN;
  if ((what & CURL_POLL_OUT) != 0) ev.events |= EPOLLOUT;
  if (socketp == nullptr) {
    epoll_ctl(self->epoll_fd_, EPOLL_CTL_ADD, s, &ev);
    curl_multi_assign(self->multi_, s, self);  // marks the socket as registered
  } else if (epoll_ctl(self->epoll_fd_, EPOLL_CTL_MOD, s, &ev) != 0) {
    epoll_ctl(self->epoll_fd_, EPOLL_CTL_ADD, s, &ev);
  }
  return 0;
}

int CurlTransport::OnTimer(CURLM* /*multi*/, long timeout_ms, void* user) {  // NOLINT
  auto* self = static_cast<CurlTransport*>(user);
  self->timer_deadline_ =
      timeout_ms < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(timeout_ms);
  return 0;
}

// Called with the connection ready, just before the request is written: the
// send time excludes connecting and the TLS handshake.
int CurlTransport::OnPrereq(void* user, char* /*conn_primary_ip*/, char* /*conn_local_ip*/,
                            int /*conn_primary_port*/, int /*conn_local_port*/) {
  auto* t = static_cast<Transfer*>(user);
  static_cast<CurlTransport*>(t->conn)->sink_->OnSent(t, absl::Now());
  return CURL_PREREQFUNC_OK;
}

size_t CurlTransport::OnData(char* ptr, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  auto* self = static_cast<CurlTransport*>(t->conn);
  if (t->http_status == 0) {
    long status = 0;  // NOLINT(google-runtime-int): libcurl's type
    curl_easy_getinfo(static_cast<CURL*>(t->easy), CURLINFO_RESPONSE_CODE, &status);
    self->sink_->OnStatus(t, static_cast<int>(status));
  }
  // libcurl reads the socket itself: the arrival time is when it hands the bytes over.
  const bool ok = self->sink_->OnBody(t, std::string_view(ptr, size * n), absl::Now());
  return ok ? size * n : 0;  // 0 aborts the transfer (CURLE_WRITE_ERROR)
}

absl::Status CurlTransport::Init(int epoll_fd) {
  epoll_fd_ = epoll_fd;
  multi_ = curl_multi_init();
  if (multi_ == nullptr) return absl::InternalError("curl_multi_init failed");
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlTransport::OnSocket);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlTransport::OnTimer);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  headers_ = curl_slist_append(headers_, "Content-Type: application/json");
  headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
  if (stream_) headers_ = curl_slist_append(headers_, "Accept: text/event-stream");
  return absl::OkStatus();
}

// A handle with everything that is the same for every request; Start sets the rest.
CURL* CurlTransport::NewHandle() {
  CURL* e = curl_easy_init();
  curl_easy_setopt(e, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlTransport::OnData);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, &CurlTransport::OnPrereq);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(timeout_)));  // NOLINT
  ApplyTls(e, target_);
  return e;
}

void CurlTransport::Start(Transfer* t) {
  CURL* e = nullptr;
  if (idle_.empty()) {
    e = NewHandle();
    // Keep one idle connection per handle so the next request reuses it.
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS,
                      static_cast<long>(busy_.size() + idle_.size() + 1));  // NOLINT
  } else {
    e = idle_.back();
    idle_.pop_back();
  }
  t->easy = e;
  t->conn = this;
  curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 0L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body->c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(t->body->size()));  // NOLINT
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, t);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  curl_multi_add_handle(multi_, e);
  busy_.push_back(e);
}

void CurlTransport::HandleEvent(const epoll_event& event) {
  int flags = 0;
  if ((event.events & EPOLLIN) != 0) flags |= CURL_CSELECT_IN;
  if ((event.events & EPOLLOUT) != 0) flags |= CURL_CSELECT_OUT;
  if ((event.events & (EPOLLERR | EPOLLHUP)) != 0) flags |= CURL_CSELECT_ERR;
  Act(event.data.fd, flags);
}

void CurlTransport::Act(curl_socket_t s, int flags) {
  if (s == CURL_SOCKET_TIMEOUT) timer_deadline_ = absl::InfiniteFuture();
  int running = 0;
  curl_multi_socket_action(multi_, s, flags, &running);
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL* e = msg->easy_handle;
    const CURLcode code = msg->data.result;
    Transfer* t = nullptr;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, &t);
    if (t->http_status == 0) {
      long status = 0;  // NOLINT(google-runtime-int)
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
      if (status != 0) sink_->OnStatus(t, static_cast<int>(status));
    }
    curl_multi_remove_handle(multi_, e);
    if (SendAgain(e, t, code)) continue;
    auto it = std::find(busy_.begin(), busy_.end(), e);
    std::iter_swap(it, busy_.end() - 1);
    busy_.pop_back();
    idle_.push_back(e);
    t->easy = nullptr;
    t->conn = nullptr;
    if (code != CURLE_OK) spdlog::debug("request {}: curl {}", t->index, static_cast<int>(code));
    sink_->OnDone(t, code == CURLE_OK ? std::string() : FailureForCurl(code));
  }
}

bool CurlTransport::SendAgain(CURL* e, Transfer* t, CURLcode code) {
  if (code != CURLE_RECV_ERROR && code != CURLE_SEND_ERROR && code != CURLE_GOT_NOTHING) {
    return false;
  }
  long connects = 0;      // NOLINT(google-runtime-int): libcurl's type
  long header_bytes = 0;  // NOLINT(google-runtime-int)
  curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &header_bytes);
  if (connects != 0 || header_bytes != 0 || t->http_status != 0 || t->attempts != 0) return false;
  ++t->attempts;
  spdlog::debug("request {}: kept-alive connection closed by the server; sending again", t->index);
  curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);  // the other idle ones may be closing too
  return curl_multi_add_handle(multi_, e) == CURLM_OK;
}

}  // namespace

std::unique_ptr<Transport> MakeCurlTransport(std::string url, bool stream, const Target& target,
                                             absl::Duration request_timeout, TransferSink* sink) {
  return std::make_unique<CurlTransport>(std::move(url), stream, target, request_timeout, sink);
}

absl::Status CheckReady(const Target& target) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), curl_easy_cleanup);
  std::string url = target.management_url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += "/v2/health/ready";
  curl_easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, DiscardBody);
  ApplyTls(easy.get(), target);
  CURLcode code = curl_easy_perform(easy.get());
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("management endpoint ", url, ": ", curl_easy_strerror(code)));
  }
  long status = 0;  // NOLINT(google-runtime-int): libcurl's type
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    return absl::UnavailableError(
        absl::StrCat("server not ready: ", url, " answered HTTP ", status, " (expected 200)"));
  }
  return absl::OkStatus();
}

}  // namespace crest::loadgen
