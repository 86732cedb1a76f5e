// RunBenchmark: one event-loop thread drives every in-flight request through
// libcurl's multi socket API on epoll, so 1000 concurrent streams cost one
// core at most and timestamps are taken the moment bytes arrive.
#include "loadgen/runner.h"

#include <curl/curl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "common/cpu_list.h"
#include "common/status.h"
#include "loadgen/dataset.h"
#include "loadgen/run_statistics.h"
#include "loadgen/sse_parser.h"

namespace crest::loadgen {
namespace {

using crest::v1::BenchmarkApi;
using google::protobuf::util::TimeUtil;

constexpr absl::Duration kDefaultRequestTimeout = absl::Seconds(600);  // MindIE's RequestTimeOut
constexpr absl::Duration kProgressInterval = absl::Milliseconds(500);
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
constexpr size_t kMaxErrorBody = 4096;

// The validated, defaulted parameters of one run.
struct Plan {
  BenchmarkApi api = crest::v1::BENCHMARK_API_MINDIE;
  bool stream = true;
  std::string url;
  uint32_t concurrency = 1;
  double rate = 0;
  bool poisson = true;
  uint64_t measured = 0;  // requests to measure; max() = until the duration ends
  absl::Duration max_duration = absl::InfiniteDuration();
  absl::Duration request_timeout = kDefaultRequestTimeout;
  uint32_t warmup = 0;
  uint32_t max_output_len = 0;
  uint32_t synthetic_input_tokens = 0;
  std::vector<std::string> prompts;
  std::vector<size_t> order;  // prompt index for request i: order[i % size]
};

absl::Duration ToAbsl(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::StatusOr<Plan> MakePlan(const RunOptions& options) {
  const crest::v1::BenchmarkSpec& spec = options.spec;
  Plan plan;
  const std::string& base = options.target.base_url;
  if (!absl::StartsWith(base, "http://") && !absl::StartsWith(base, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("target URL \"", base, "\" must start with http:// or https://"));
  }
  plan.api = spec.api() == crest::v1::BENCHMARK_API_OPENAI ? crest::v1::BENCHMARK_API_OPENAI
                                                           : crest::v1::BENCHMARK_API_MINDIE;
  plan.stream = spec.task_kind() != crest::v1::TASK_KIND_TEXT;
  std::string trimmed = base;
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  plan.url = trimmed + (plan.api == crest::v1::BENCHMARK_API_OPENAI ? "/v1/completions" : "/infer");
  if (spec.concurrency() == 0) return absl::InvalidArgumentError("concurrency must be >= 1");
  plan.concurrency = spec.concurrency();
  if (!(spec.request_rate() >= 0) || std::isinf(spec.request_rate())) {
    return absl::InvalidArgumentError(
        absl::StrCat("request rate must be a finite number >= 0, got ", spec.request_rate()));
  }
  plan.rate = spec.request_rate();
  plan.poisson = spec.distribution() != crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT;
  if (spec.max_output_len() == 0)
    return absl::InvalidArgumentError("max output length must be >= 1");
  plan.max_output_len = spec.max_output_len();
  plan.warmup = spec.warmup_requests();
  if (spec.has_max_duration()) {
    absl::Duration d = ToAbsl(spec.max_duration());
    if (d < absl::ZeroDuration()) return absl::InvalidArgumentError("max duration is negative");
    if (d > absl::ZeroDuration()) plan.max_duration = d;
  }
  if (spec.has_request_timeout()) {
    absl::Duration d = ToAbsl(spec.request_timeout());
    if (d < absl::ZeroDuration()) return absl::InvalidArgumentError("request timeout is negative");
    if (d > absl::ZeroDuration()) plan.request_timeout = d;
  }
  const bool synthetic = spec.dataset().type() == crest::v1::DATASET_TYPE_SYNTHETIC;
  if (synthetic && spec.request_count() == 0 && plan.max_duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "a synthetic dataset needs a request count or a duration limit");
  }
  std::string path = options.dataset_path;
  if (!synthetic && path.empty()) {
    CREST_ASSIGN_OR_RETURN(std::string dir, DefaultDatasetDir());
    CREST_ASSIGN_OR_RETURN(path, ResolveDatasetPath(dir));
  }
  CREST_ASSIGN_OR_RETURN(plan.prompts, LoadPrompts(spec.dataset(), path, 1));
  if (synthetic) plan.synthetic_input_tokens = spec.dataset().synthetic_input_tokens();
  if (spec.request_count() > 0) {
    plan.measured = spec.request_count();
  } else if (plan.max_duration != absl::InfiniteDuration()) {
    plan.measured = std::numeric_limits<uint64_t>::max();
  } else {
    plan.measured = plan.prompts.size();
  }
  plan.order.resize(plan.prompts.size());
  for (size_t i = 0; i < plan.order.size(); ++i) plan.order[i] = i;
  // Seed 0 keeps the dataset's order (as MindIE's tool sends it); any other
  // seed shuffles it reproducibly.
  if (spec.seed() != 0) {
    std::mt19937_64 rng(spec.seed());
    std::shuffle(plan.order.begin(), plan.order.end(), rng);
  }
  return plan;
}

std::string RequestBody(const Plan& plan, const std::string& model, const std::string& prompt) {
  nlohmann::json body;
  if (plan.api == crest::v1::BENCHMARK_API_OPENAI) {
    body = {{"model", model},
            {"prompt", prompt},
            {"max_tokens", plan.max_output_len},
            {"stream", plan.stream}};
  } else {
    body = {{"inputs", prompt},
            {"stream", plan.stream},
            {"parameters", {{"max_new_tokens", plan.max_output_len}}}};
  }
  return body.dump();
}

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

// GET <management>/v2/health/ready must answer 200 before load starts.
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

class Engine;

// One request in flight.
struct Transfer {
  Engine* engine = nullptr;
  CURL* easy = nullptr;
  uint64_t index = 0;
  bool warmup = false;
  std::string body;
  absl::Time sent;
  absl::Time first_token;
  absl::Time last_token;
  bool have_token = false;
  long http_status = 0;  // NOLINT(google-runtime-int): libcurl's type
  SseFramer framer;
  ReplyState state;
  std::string text;  // non-stream body, or the start of an error body
  std::vector<float> gaps;
};

class Engine {
 public:
  Engine(const RunOptions& options, Plan plan, const ProgressCallback& on_progress,
         const std::atomic<bool>* cancel)
      : options_(options),
        plan_(std::move(plan)),
        on_progress_(on_progress),
        cancel_(cancel),
        rng_(options.spec.seed()) {}

  ~Engine() {
    for (auto& t : active_) {
      curl_multi_remove_handle(multi_, t->easy);
      curl_easy_cleanup(t->easy);
    }
    for (CURL* easy : idle_) curl_easy_cleanup(easy);
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (headers_ != nullptr) curl_slist_free_all(headers_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  absl::StatusOr<RunOutput> Run();

 private:
  static int OnSocket(CURL* easy, curl_socket_t s, int what, void* user, void* socketp);
  static int OnTimer(CURLM* multi, long timeout_ms, void* user);  // NOLINT(google-runtime-int)
  static size_t OnData(char* ptr, size_t size, size_t n, void* user);

  absl::Status Init();
  // Runs requests [first, first + count) to completion (count may be "until
  // the duration ends"); `warmup` requests are not recorded.
  absl::Status RunPhase(uint64_t count, bool warmup);
  void Start(uint64_t index, bool warmup);
  void Finish(Transfer* t, CURLcode code);
  // Finishes every completed transfer; returns how many.
  size_t DrainCompleted();
  void ReportProgress(absl::Time now, bool force);
  absl::Duration NextGap();

  const RunOptions& options_;
  Plan plan_;
  const ProgressCallback& on_progress_;
  const std::atomic<bool>* cancel_;
  std::mt19937_64 rng_;

  CURLM* multi_ = nullptr;
  int epoll_fd_ = -1;
  curl_slist* headers_ = nullptr;
  absl::Time timer_deadline_ = absl::InfiniteFuture();
  std::vector<std::unique_ptr<Transfer>> active_;
  std::vector<CURL*> idle_;

  uint64_t next_prompt_ = 0;
  RunOutput output_;
  absl::Time measure_start_ = absl::InfiniteFuture();
  uint64_t live_tokens_ = 0;  // token events of measured requests so far
  uint64_t done_ = 0;
  uint64_t failed_ = 0;
  absl::Time next_progress_ = absl::InfinitePast();
};

int Engine::OnSocket(CURL* /*easy*/, curl_socket_t s, int what, void* user, void* socketp) {
  auto* self = static_cast<Engine*>(user);
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

int Engine::OnTimer(CURLM* /*multi*/, long timeout_ms, void* user) {  // NOLINT
  auto* self = static_cast<Engine*>(user);
  self->timer_deadline_ =
      timeout_ms < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(timeout_ms);
  return 0;
}

size_t Engine::OnData(char* ptr, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (t->http_status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->http_status);
  if (t->http_status >= 400) {
    if (t->text.size() < kMaxErrorBody) t->text.append(ptr, std::min(len, kMaxErrorBody));
    return len;
  }
  const Plan& plan = t->engine->plan_;
  if (!plan.stream) {
    t->text.append(ptr, len);
    return len;
  }
  // One timestamp per arriving chunk: every event in it arrived together.
  const absl::Time now = absl::Now();
  const bool ok = t->framer.Feed(std::string_view(ptr, len), [&](std::string_view data) {
    const uint32_t before = t->state.token_events;
    if (!HandleStreamEvent(plan.api, data, t->state)) return false;
    if (t->state.token_events == before) return true;
    if (!t->have_token) {
      t->first_token = now;
      t->have_token = true;
    } else {
      t->gaps.push_back(static_cast<float>(absl::ToDoubleMilliseconds(now - t->last_token)));
    }
    t->last_token = now;
    if (!t->warmup) ++t->engine->live_tokens_;
    return true;
  });
  return ok ? len : 0;  // 0 aborts the transfer (CURLE_WRITE_ERROR)
}

absl::Status Engine::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError("epoll_create1 failed");
  multi_ = curl_multi_init();
  if (multi_ == nullptr) return absl::InternalError("curl_multi_init failed");
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &Engine::OnSocket);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &Engine::OnTimer);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  // Keep one idle connection per client so the next request reuses it.
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(plan_.concurrency));  // NOLINT
  headers_ = curl_slist_append(headers_, "Content-Type: application/json");
  headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
  if (plan_.stream) headers_ = curl_slist_append(headers_, "Accept: text/event-stream");
  return absl::OkStatus();
}

void Engine::Start(uint64_t index, bool warmup) {
  auto t = std::make_unique<Transfer>();
  t->engine = this;
  t->index = index;
  t->warmup = warmup;
  const std::string& prompt = plan_.prompts[plan_.order[next_prompt_++ % plan_.order.size()]];
  t->body = RequestBody(plan_, options_.spec.model_name(), prompt);
  if (idle_.empty()) {
    t->easy = curl_easy_init();
  } else {
    t->easy = idle_.back();
    idle_.pop_back();
    curl_easy_reset(t->easy);
  }
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, plan_.url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(t->body.size()));  // NOLINT
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Engine::OnData);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(plan_.request_timeout)));  // NOLINT
  ApplyTls(e, options_.target);
  t->sent = absl::Now();
  if (!warmup && measure_start_ == absl::InfiniteFuture()) measure_start_ = t->sent;
  curl_multi_add_handle(multi_, e);
  active_.push_back(std::move(t));
}

void Engine::Finish(Transfer* t, CURLcode code) {
  const absl::Time now = absl::Now();
  RequestRecord r;
  r.index = t->index;
  r.sent = t->sent;
  r.e2e_ms = absl::ToDoubleMilliseconds(now - t->sent);
  r.http_status = static_cast<int>(t->http_status);
  if (r.http_status == 0) {
    long status = 0;  // NOLINT(google-runtime-int)
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    r.http_status = static_cast<int>(status);
  }
  ReplyState& st = t->state;
  if (!st.failure.empty()) {
    r.failure = st.failure;
  } else if (r.http_status >= 400) {
    r.failure = absl::StrCat("http_", r.http_status);
  } else if (code != CURLE_OK) {
    r.failure = FailureForCurl(code);
  } else if (plan_.stream) {
    if (!st.done_seen && (!st.final_seen || t->framer.HasPartialEvent())) r.failure = "truncated";
  } else {
    HandleTextBody(plan_.api, t->text, st);  // sets st.failure when the body is not valid
    r.failure = st.failure;
  }
  r.ok = r.failure.empty();
  r.token_events = st.token_events;
  r.usage_reported = st.usage_output >= 0;
  r.output_tokens = static_cast<uint32_t>(r.usage_reported ? st.usage_output : st.token_events);
  r.token_count_mismatch =
      plan_.stream && r.usage_reported && st.usage_output != static_cast<int64_t>(st.token_events);
  if (st.usage_input >= 0) {
    r.input_tokens = static_cast<uint32_t>(st.usage_input);
  } else {
    r.input_tokens = plan_.synthetic_input_tokens;
  }
  if (plan_.stream) {
    if (t->have_token) r.first_token_ms = absl::ToDoubleMilliseconds(t->first_token - t->sent);
  } else if (r.ok) {
    r.first_token_ms = r.e2e_ms;  // the whole answer arrives at once
  }
  if (!t->gaps.empty()) {
    double sum = 0;
    for (float g : t->gaps) sum += g;
    r.decode_avg_ms = sum / static_cast<double>(t->gaps.size());
  }
  r.decode_gaps_ms = std::move(t->gaps);
  if (!r.ok) {
    spdlog::debug("request {} failed: {} (http {}, curl {}) {}", r.index, r.failure, r.http_status,
                  static_cast<int>(code), t->text.substr(0, 200));
  }
  if (r.token_count_mismatch) {
    spdlog::debug("request {}: usage says {} tokens, stream carried {}; using usage", r.index,
                  st.usage_output, st.token_events);
  }
  curl_multi_remove_handle(multi_, t->easy);
  idle_.push_back(t->easy);
  if (!t->warmup) {
    ++done_;
    if (!r.ok) ++failed_;
    output_.requests.push_back(std::move(r));
  }
  auto it = std::find_if(active_.begin(), active_.end(),
                         [t](const std::unique_ptr<Transfer>& p) { return p.get() == t; });
  std::iter_swap(it, active_.end() - 1);
  active_.pop_back();
}

size_t Engine::DrainCompleted() {
  int left = 0;
  size_t finished = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
    Finish(t, msg->data.result);
    ++finished;
  }
  return finished;
}

absl::Duration Engine::NextGap() {
  if (!plan_.poisson) return absl::Seconds(1.0 / plan_.rate);
  std::exponential_distribution<double> gap(plan_.rate);
  return absl::Seconds(gap(rng_));
}

void Engine::ReportProgress(absl::Time now, bool force) {
  if (!on_progress_ || (!force && now < next_progress_)) return;
  next_progress_ = now + kProgressInterval;
  crest::v1::BenchmarkProgress p;
  p.set_requests_done(done_);
  p.set_requests_failed(failed_);
  const bool bounded = plan_.measured != std::numeric_limits<uint64_t>::max();
  p.set_requests_total(bounded ? plan_.measured : 0);
  const absl::Duration elapsed =
      measure_start_ == absl::InfiniteFuture() ? absl::ZeroDuration() : now - measure_start_;
  const double secs = absl::ToDoubleSeconds(elapsed);
  p.set_tokens_per_second(secs > 0 ? static_cast<double>(live_tokens_) / secs : 0);
  *p.mutable_elapsed() = TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(elapsed));
  absl::Duration eta = absl::ZeroDuration();
  if (plan_.max_duration != absl::InfiniteDuration()) eta = plan_.max_duration - elapsed;
  if (bounded && done_ > 0) {
    absl::Duration by_count =
        elapsed * (static_cast<double>(plan_.measured - done_) / static_cast<double>(done_));
    eta = eta > absl::ZeroDuration() ? std::min(eta, by_count) : by_count;
  }
  *p.mutable_eta() = TimeUtil::NanosecondsToDuration(
      absl::ToInt64Nanoseconds(std::max(eta, absl::ZeroDuration())));
  on_progress_(p);
}

absl::Status Engine::RunPhase(uint64_t count, bool warmup) {
  const bool rate_mode = !warmup && plan_.rate > 0;
  const uint32_t cap = plan_.concurrency;
  uint64_t started = 0;
  absl::Time phase_start = absl::Now();
  absl::Time send_deadline = warmup ? absl::InfiniteFuture() : phase_start + plan_.max_duration;
  absl::Time next_arrival = phase_start;
  std::vector<epoll_event> events(256);
  int running = 0;
  while (true) {
    if (cancel_ != nullptr && cancel_->load()) return absl::CancelledError("benchmark cancelled");
    absl::Time now = absl::Now();
    const bool may_send = started < count && now < send_deadline;
    if (may_send) {
      bool added = false;
      while (started < count && active_.size() < cap && (!rate_mode || next_arrival <= now)) {
        Start(started++, warmup);
        if (rate_mode) next_arrival += NextGap();
        added = true;
      }
      // Send what was just added now rather than on the next turn of the loop:
      // time spent here is client overhead inside every measured latency.
      if (added) {
        timer_deadline_ = absl::InfiniteFuture();
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
        // A reply can complete inside that call; its slot must refill now,
        // not after the next wait.
        if (DrainCompleted() > 0) continue;
        now = absl::Now();
      }
    } else if (active_.empty()) {
      break;
    }
    absl::Time wake = std::min(timer_deadline_, now + kCancelPoll);
    if (may_send && rate_mode && active_.size() < cap) wake = std::min(wake, next_arrival);
    if (on_progress_ && !warmup) wake = std::min(wake, next_progress_);
    if (may_send) wake = std::min(wake, send_deadline);
    // epoll_pwait2 takes a timespec: no rounding of curl's short timers up to
    // whole milliseconds, which would add to every measured latency.
    const timespec wait = absl::ToTimespec(std::max(wake - now, absl::ZeroDuration()));
    const int n =
        epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()), &wait, nullptr);
    for (int i = 0; i < n; ++i) {
      int flags = 0;
      if ((events[i].events & EPOLLIN) != 0) flags |= CURL_CSELECT_IN;
      if ((events[i].events & EPOLLOUT) != 0) flags |= CURL_CSELECT_OUT;
      if ((events[i].events & (EPOLLERR | EPOLLHUP)) != 0) flags |= CURL_CSELECT_ERR;
      curl_multi_socket_action(multi_, events[i].data.fd, flags, &running);
    }
    if (absl::Now() >= timer_deadline_) {
      timer_deadline_ = absl::InfiniteFuture();
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    DrainCompleted();
    if (!warmup) ReportProgress(absl::Now(), false);
  }
  return absl::OkStatus();
}

absl::StatusOr<RunOutput> Engine::Run() {
  CREST_RETURN_IF_ERROR(Init());
  if (!options_.target.management_url.empty()) CREST_RETURN_IF_ERROR(CheckReady(options_.target));
  if (plan_.warmup > 0) CREST_RETURN_IF_ERROR(RunPhase(plan_.warmup, /*warmup=*/true));
  next_prompt_ = 0;  // measured requests start at the top of the dataset too
  if (plan_.measured != std::numeric_limits<uint64_t>::max()) {
    output_.requests.reserve(plan_.measured);
  }
  CREST_RETURN_IF_ERROR(RunPhase(plan_.measured, /*warmup=*/false));
  ReportProgress(absl::Now(), true);
  std::sort(output_.requests.begin(), output_.requests.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  output_.result = ComputeResult(output_.requests, plan_.concurrency);
  uint64_t mismatches = 0;
  for (const RequestRecord& r : output_.requests) mismatches += r.token_count_mismatch ? 1 : 0;
  if (mismatches > 0) {
    spdlog::warn(
        "{} requests: the server's usage token count disagreed with the stream's token "
        "events; the usage counts were used",
        mismatches);
  }
  return std::move(output_);
}

absl::Status PinThread(const std::vector<uint32_t>& cpus) {
  if (cpus.empty()) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (uint32_t cpu : cpus) {
    if (cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", cpu, " is out of range"));
    }
    CPU_SET(cpu, &set);
  }
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pin the load generator to CPUs ",
                                                   FormatCpuList(cpus), ": ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunOutput> RunBenchmark(const RunOptions& options,
                                       const ProgressCallback& on_progress,
                                       const std::atomic<bool>* cancel) {
  CREST_ASSIGN_OR_RETURN(Plan plan, MakePlan(options));
  // Reference-counted and thread-safe in libcurl >= 7.84.
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    return absl::InternalError("curl_global_init failed");
  }
  absl::StatusOr<RunOutput> out = absl::InternalError("runner thread did not run");
  // The runner gets its own thread so pinning it never changes the caller's affinity.
  std::thread runner([&] {
    absl::Status pinned = PinThread(options.cpus);
    if (!pinned.ok()) {
      out = pinned;
      return;
    }
    Engine engine(options, std::move(plan), on_progress, cancel);
    out = engine.Run();
  });
  runner.join();
  curl_global_cleanup();
  return out;
}

}  // namespace crest::loadgen
