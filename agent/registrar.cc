#include "agent/registrar.h"

#include <grpcpp/client_context.h>

#include <chrono>

#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "common/version.h"

namespace crest::agent {

Registrar::Registrar(std::shared_ptr<crest::v1::Controller::StubInterface> stub,
                     RegistrarOptions options, std::function<crest::v1::DaemonState()> daemon_state)
    : stub_(std::move(stub)),
      options_(std::move(options)),
      daemon_state_(std::move(daemon_state)),
      backoff_(options_.initial_backoff),
      jitter_state_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) | 1) {}

Registrar::~Registrar() { Stop(); }

void Registrar::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Registrar::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t Registrar::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

uint64_t Registrar::heartbeats() const {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

bool Registrar::registered() const {
  absl::MutexLock lock(&mu_);
  return registered_;
}

bool Registrar::WaitForRegistrations(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto cond = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return registrations_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
}

bool Registrar::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_), d);
  return !stop_;
}

absl::Duration Registrar::NextBackoff() {
  // xorshift jitter in [0.5, 1.5) x the current back-off; then double it.
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  double factor = 0.5 + static_cast<double>(jitter_state_ % 1000) / 1000.0;
  absl::Duration wait = backoff_ * factor;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  return wait;
}

void Registrar::Loop() {
  absl::Duration interval = absl::Seconds(5);
  bool logged_away = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    if (!registered()) {
      crest::v1::RegisterAgentRequest request;
      request.set_node_name(options_.node_name);
      request.set_advertise_address(options_.advertise_address);
      for (const auto& [k, v] : options_.labels) (*request.mutable_labels())[k] = v;
      for (const std::string& c : options_.capabilities) request.add_capabilities(c);
      for (const auto& l : options_.parameter_limits) *request.add_parameter_limits() = l;
      for (const auto& l : options_.benchmark_limits) *request.add_benchmark_limits() = l;
      request.set_slots(options_.slots);
      request.set_agent_version(kVersion);
      crest::v1::RegisterAgentReply reply;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options_.rpc_deadline));
      grpc::Status status = stub_->RegisterAgent(&ctx, request, &reply);
      if (!status.ok()) {
        if (!logged_away) {
          // A refusal (wrong certificate, a static name, bad labels) needs the
          // operator, not patience: say which it is.
          bool refused = status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                         status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                         status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                         status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
          if (refused) {
            spdlog::error(
                "the controller refused to register this node ({}); retrying with "
                "back-off",
                status.error_message());
          } else {
            spdlog::warn("controller unreachable ({}); retrying with back-off",
                         status.error_message());
          }
          logged_away = true;
        }
        if (!Sleep(NextBackoff())) return;
        continue;
      }
      logged_away = false;
      backoff_ = options_.initial_backoff;
      int64_t ms =
          google::protobuf::util::TimeUtil::DurationToMilliseconds(reply.heartbeat_interval());
      interval = ms > 0 ? absl::Milliseconds(ms) : absl::Seconds(5);
      {
        absl::MutexLock lock(&mu_);
        registered_ = true;
        ++registrations_;
      }
      spdlog::info("registered with the controller as {} (heartbeat every {})", options_.node_name,
                   absl::FormatDuration(interval));
    }
    if (!Sleep(interval)) return;
    crest::v1::HeartbeatRequest hb;
    hb.set_node_name(options_.node_name);
    hb.set_daemon_state(daemon_state_ ? daemon_state_() : crest::v1::DAEMON_STATE_UNSPECIFIED);
    crest::v1::HeartbeatReply reply;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoMilliseconds(options_.rpc_deadline));
    grpc::Status status = stub_->Heartbeat(&ctx, hb, &reply);
    if (!status.ok()) {
      if (!logged_away) {
        spdlog::warn("heartbeat failed ({}); retrying with back-off", status.error_message());
        logged_away = true;
      }
      if (!Sleep(NextBackoff())) return;
      continue;
    }
    logged_away = false;
    backoff_ = options_.initial_backoff;
    {
      absl::MutexLock lock(&mu_);
      ++heartbeats_;
      if (!reply.known()) {
        spdlog::warn("the controller does not know this node; registering again");
        registered_ = false;
      }
    }
  }
}

}  // namespace crest::agent
