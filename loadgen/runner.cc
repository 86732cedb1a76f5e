// RunBenchmark: one event-loop thread on epoll drives every in-flight request
// through a Transport (crest-bench's own HTTP/1.1 client for http://, libcurl
// for https://), so 1000 concurrent streams cost a fraction of one core, and
// measures the client's own health while it does.
#include "loadgen/runner.h"

#include <curl/curl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "common/cpu_list.h"
#include "common/status.h"
#include "loadgen/client_health.h"
#include "loadgen/dataset.h"
#include "loadgen/run_statistics.h"
#include "loadgen/sse_parser.h"
#include "loadgen/transport.h"

namespace crest::loadgen {
namespace {

using crest::v1::BenchmarkApi;
using google::protobuf::util::TimeUtil;

constexpr absl::Duration kDefaultRequestTimeout = absl::Seconds(600);  // MindIE's RequestTimeOut
constexpr absl::Duration kProgressInterval = absl::Milliseconds(500);
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
constexpr size_t kMaxErrorBody = 4096;
// Period of the loop-lag check (see ClientHealth.loop_lag_*).
constexpr absl::Duration kLagTick = absl::Milliseconds(1);
// How long connections may take to open before the first request.
constexpr absl::Duration kPreconnectWait = absl::Seconds(10);

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

// CPU time of the calling thread.
absl::Duration ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

// The client's own health over the measured window (ClientHealth).
struct HealthWindow {
  bool active = false;
  absl::Time start;
  absl::Duration cpu_start;
  absl::Duration blocked;                          // time spent waiting in epoll
  absl::Time next_tick;                            // when the loop-lag check is due
  absl::Time full_seen_at = absl::InfinitePast();  // a due arrival last found every slot busy
  LagHistogram loop_lag;
  LagHistogram send_lag;
  uint64_t slot_waits = 0;
  crest::v1::ClientHealth result;
};

class Engine final : public TransferSink {
 public:
  Engine(const RunOptions& options, Plan plan, const ProgressCallback& on_progress,
         const std::atomic<bool>* cancel)
      : options_(options),
        plan_(std::move(plan)),
        on_progress_(on_progress),
        cancel_(cancel),
        rng_(options.spec.seed()) {}

  ~Engine() override {
    transport_.reset();  // closes every connection before the transfers go
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  absl::StatusOr<RunOutput> Run();

  void OnSent(Transfer* t, absl::Time at) override { t->sent = at; }
  void OnStatus(Transfer* t, int http_status) override { t->http_status = http_status; }
  bool OnBody(Transfer* t, std::string_view bytes, absl::Time arrived) override;
  void OnDone(Transfer* t, const std::string& failure) override { Finish(t, failure); }

 private:
  absl::Status Init();
  // Runs `count` requests to completion (count may be "until the duration
  // ends"); `warmup` requests are not recorded.
  absl::Status RunPhase(uint64_t count, bool warmup);
  void Start(uint64_t index, bool warmup, absl::Time scheduled);
  void Finish(Transfer* t, const std::string& transport_failure);
  void ReportProgress(absl::Time now, bool force);
  absl::Duration NextGap();
  // The request body for prompt `key`, built once.
  const std::string& Body(size_t key);
  void BeginHealth(absl::Time now);
  void EndHealth(absl::Time now);

  const RunOptions& options_;
  Plan plan_;
  const ProgressCallback& on_progress_;
  const std::atomic<bool>* cancel_;
  std::mt19937_64 rng_;

  int epoll_fd_ = -1;
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Transfer>> active_;
  std::vector<std::unique_ptr<Transfer>> spare_;  // finished, reused for the next request
  std::vector<std::string> bodies_;
  std::vector<bool> have_body_;
  uint64_t completions_ = 0;

  uint64_t next_prompt_ = 0;
  RunOutput output_;
  absl::Time measure_start_ = absl::InfiniteFuture();
  uint64_t live_tokens_ = 0;  // token events of measured requests so far
  uint64_t done_ = 0;
  uint64_t failed_ = 0;
  absl::Time next_progress_ = absl::InfinitePast();
  HealthWindow health_;
};

bool Engine::OnBody(Transfer* t, std::string_view bytes, absl::Time arrived) {
  t->last_byte = arrived;
  t->have_bytes = true;
  if (t->http_status >= 400) {
    if (t->text.size() < kMaxErrorBody) {
      t->text.append(bytes.substr(0, kMaxErrorBody - t->text.size()));
    }
    return true;
  }
  if (!plan_.stream) {
    t->text.append(bytes);
    return true;
  }
  // One timestamp per read: every event in it arrived together.
  return t->framer.Feed(bytes, [&](std::string_view data) {
    const uint32_t before = t->state.token_events;
    if (!HandleStreamEvent(plan_.api, data, t->state)) return false;
    if (t->state.token_events == before) return true;
    if (!t->have_token) {
      t->first_token = arrived;
      t->have_token = true;
    } else {
      t->gaps.push_back(static_cast<float>(absl::ToDoubleMilliseconds(arrived - t->last_token)));
    }
    t->last_token = arrived;
    if (!t->warmup) ++live_tokens_;
    return true;
  });
}

absl::Status Engine::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError("epoll_create1 failed");
  const bool https = absl::StartsWith(plan_.url, "https://");
  if (https || options_.http_client == HttpClient::kLibcurl) {
    transport_ =
        MakeCurlTransport(plan_.url, plan_.stream, options_.target, plan_.request_timeout, this);
  } else {
    transport_ = MakeHttp1Transport(plan_.url, plan_.stream, plan_.request_timeout, this);
  }
  return transport_->Init(epoll_fd_);
}

const std::string& Engine::Body(size_t key) {
  if (key >= bodies_.size()) {
    bodies_.resize(plan_.prompts.size());
    have_body_.resize(plan_.prompts.size());
  }
  if (!have_body_[key]) {
    bodies_[key] = RequestBody(plan_, options_.spec.model_name(), plan_.prompts[key]);
    have_body_[key] = true;
  }
  return bodies_[key];
}

void Engine::Start(uint64_t index, bool warmup, absl::Time scheduled) {
  std::unique_ptr<Transfer> owned;
  if (spare_.empty()) {
    owned = std::make_unique<Transfer>();
  } else {
    owned = std::move(spare_.back());
    spare_.pop_back();
    *owned = Transfer();
  }
  Transfer* t = owned.get();
  t->index = index;
  t->warmup = warmup;
  t->body_key = plan_.order[next_prompt_++ % plan_.order.size()];
  t->body = &Body(t->body_key);
  t->started = absl::Now();
  t->sent = t->started;
  t->scheduled = scheduled;
  if (!warmup && scheduled != absl::InfinitePast()) {
    if (scheduled <= health_.full_seen_at) ++health_.slot_waits;
  }
  if (!warmup && measure_start_ == absl::InfiniteFuture()) measure_start_ = t->started;
  t->slot = active_.size();
  active_.push_back(std::move(owned));
  transport_->Start(t);  // may finish it at once (no connection)
}

void Engine::Finish(Transfer* t, const std::string& transport_failure) {
  const absl::Time now = absl::Now();
  ++completions_;
  RequestRecord r;
  r.index = t->index;
  r.sent = t->sent;
  r.http_status = t->http_status;
  ReplyState& st = t->state;
  if (!st.failure.empty()) {
    r.failure = st.failure;
  } else if (r.http_status >= 400) {
    r.failure = absl::StrCat("http_", r.http_status);
  } else if (!transport_failure.empty()) {
    r.failure = transport_failure;
  } else if (plan_.stream) {
    if (!st.done_seen && (!st.final_seen || t->framer.HasPartialEvent())) r.failure = "truncated";
  } else {
    HandleTextBody(plan_.api, t->text, st);  // sets st.failure when the body is not valid
    r.failure = st.failure;
  }
  r.ok = r.failure.empty();
  // A complete reply ends with its last bytes' arrival; a failure when it was noticed.
  r.e2e_ms = absl::ToDoubleMilliseconds(((r.ok && t->have_bytes) ? t->last_byte : now) - t->sent);
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
    spdlog::debug("request {} failed: {} (http {}, transport \"{}\") {}", r.index, r.failure,
                  r.http_status, transport_failure, t->text.substr(0, 200));
  }
  if (r.token_count_mismatch) {
    spdlog::debug("request {}: usage says {} tokens, stream carried {}; using usage", r.index,
                  st.usage_output, st.token_events);
  }
  if (!t->warmup) {
    if (health_.active && t->scheduled != absl::InfinitePast()) {
      health_.send_lag.Record(t->sent - t->scheduled);
    }
    ++done_;
    if (!r.ok) ++failed_;
    output_.requests.push_back(std::move(r));
  }
  // Swap-remove from the active list; the Transfer is kept for reuse.
  const size_t slot = t->slot;
  std::unique_ptr<Transfer> owned = std::move(active_[slot]);
  if (slot + 1 != active_.size()) {
    active_[slot] = std::move(active_.back());
    active_[slot]->slot = slot;
  }
  active_.pop_back();
  spare_.push_back(std::move(owned));
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
  p.set_requests_in_flight(active_.size());
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

void Engine::BeginHealth(absl::Time now) {
  health_ = HealthWindow();
  health_.active = true;
  health_.start = now;
  health_.cpu_start = ThreadCpu();
  health_.next_tick = now + kLagTick;
}

void Engine::EndHealth(absl::Time now) {
  health_.active = false;
  crest::v1::ClientHealth& h = health_.result;
  const double wall = std::max(absl::ToDoubleSeconds(now - health_.start), 1e-9);
  const double cpu = absl::ToDoubleSeconds(ThreadCpu() - health_.cpu_start);
  h.set_wall_seconds(wall);
  h.set_cpu_seconds(cpu);
  h.set_cpu_utilisation(cpu / wall);
  h.set_loop_busy(std::clamp(1.0 - absl::ToDoubleSeconds(health_.blocked) / wall, 0.0, 1.0));
  h.set_loop_lag_p50_ms(health_.loop_lag.PercentileMs(50));
  h.set_loop_lag_p99_ms(health_.loop_lag.PercentileMs(99));
  h.set_loop_lag_max_ms(health_.loop_lag.MaxMs());
  if (plan_.rate > 0) {
    h.set_send_lag_p50_ms(health_.send_lag.PercentileMs(50));
    h.set_send_lag_p99_ms(health_.send_lag.PercentileMs(99));
    h.set_send_lag_max_ms(health_.send_lag.MaxMs());
    h.set_slot_waits(health_.slot_waits);
  }
  JudgeClientHealth(plan_.rate, &h);
}

absl::Status Engine::RunPhase(uint64_t count, bool warmup) {
  const bool rate_mode = !warmup && plan_.rate > 0;
  const uint32_t cap = plan_.concurrency;
  uint64_t started = 0;
  const absl::Time phase_start = absl::Now();
  const absl::Time send_deadline =
      warmup ? absl::InfiniteFuture() : phase_start + plan_.max_duration;
  absl::Time next_arrival = phase_start;
  if (!warmup) BeginHealth(phase_start);
  // Starts every request that is due and has a free slot, and sends it now:
  // a slot that stays empty while the loop does other work lowers the load.
  auto refill = [&](absl::Time now) {
    if (started >= count || now >= send_deadline) return;
    bool added = false;
    while (started < count && active_.size() < cap && (!rate_mode || next_arrival <= now)) {
      Start(started++, warmup, rate_mode ? next_arrival : absl::InfinitePast());
      if (rate_mode) next_arrival += NextGap();
      added = true;
    }
    if (rate_mode && started < count && next_arrival <= now) health_.full_seen_at = now;
    if (added) transport_->Flush();
  };
  std::vector<epoll_event> events(512);
  while (true) {
    if (cancel_ != nullptr && cancel_->load()) return absl::CancelledError("benchmark cancelled");
    absl::Time now = absl::Now();
    const bool may_send = started < count && now < send_deadline;
    if (may_send) {
      const uint64_t completions = completions_;
      refill(now);
      // A reply can complete while sending; its slot must refill now, not
      // after the next wait.
      if (completions_ != completions) continue;
      now = absl::Now();
    } else if (active_.empty()) {
      break;
    }
    absl::Time wake = std::min(transport_->NextDeadline(), now + kCancelPoll);
    if (may_send && rate_mode && active_.size() < cap) wake = std::min(wake, next_arrival);
    if (on_progress_ && !warmup) wake = std::min(wake, next_progress_);
    if (may_send) wake = std::min(wake, send_deadline);
    if (health_.active) wake = std::min(wake, health_.next_tick);
    // epoll_pwait2 takes a timespec: no rounding of short timers up to whole
    // milliseconds, which would add to every measured latency.
    const absl::Time before = absl::Now();
    const timespec wait = absl::ToTimespec(std::max(wake - before, absl::ZeroDuration()));
    const int n =
        epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()), &wait, nullptr);
    const absl::Time woke = absl::Now();
    if (health_.active) {
      health_.blocked += woke - before;
      if (woke >= health_.next_tick) {
        health_.loop_lag.RecordStall(woke - health_.next_tick, kLagTick);
        health_.next_tick = woke + kLagTick;
      }
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t completions = completions_;
      transport_->HandleEvent(events[i]);
      // Refill at once, as wrk does, rather than after the whole batch: the
      // server should not idle while the loop reads other replies.
      if (completions_ != completions) refill(absl::Now());
    }
    transport_->AfterEvents();
    if (const absl::Time t = absl::Now(); t >= transport_->NextDeadline()) {
      transport_->HandleDeadline(t);
    }
    if (!warmup) ReportProgress(absl::Now(), false);
  }
  if (!warmup) EndHealth(absl::Now());
  return absl::OkStatus();
}

absl::StatusOr<RunOutput> Engine::Run() {
  CREST_RETURN_IF_ERROR(Init());
  if (!options_.target.management_url.empty()) CREST_RETURN_IF_ERROR(CheckReady(options_.target));
  // One connection per client slot, opened before anything is measured.
  transport_->Preconnect(plan_.concurrency, absl::Now() + kPreconnectWait);
  if (plan_.warmup > 0) CREST_RETURN_IF_ERROR(RunPhase(plan_.warmup, /*warmup=*/true));
  next_prompt_ = 0;  // measured requests start at the top of the dataset too
  if (plan_.measured != std::numeric_limits<uint64_t>::max()) {
    output_.requests.reserve(plan_.measured);
  }
  if (options_.on_measured_start) options_.on_measured_start();
  CREST_RETURN_IF_ERROR(RunPhase(plan_.measured, /*warmup=*/false));
  ReportProgress(absl::Now(), true);
  std::sort(output_.requests.begin(), output_.requests.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  output_.result = ComputeResult(output_.requests, plan_.concurrency);
  *output_.result.mutable_client() = health_.result;
  if (health_.result.client_bound()) {
    spdlog::warn("client-bound run (the load generator limited it): {}",
                 health_.result.client_bound_reason());
  }
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
