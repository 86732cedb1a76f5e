#include "bench/load/fake_node_agent.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"

#include "common/grpc_status.h"
#include "common/stream_reactor.h"

namespace crest::bench {
namespace {

using google::protobuf::util::TimeUtil;

// The fake answers at once; a deadline only matters to a real agent.
constexpr absl::Duration kCallTimeout = absl::Seconds(10);

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

template <typename T>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, absl::StatusOr<T> result,
                                 T* reply) {
  if (result.ok()) *reply = std::move(*result);
  return Done(ctx, result.status());
}

// Waits `d` unless the call is cancelled first; false when it was.
bool Wait(absl::Duration d, const std::atomic<bool>* cancelled) {
  const absl::Time end = absl::Now() + d;
  constexpr absl::Duration kSlice = absl::Milliseconds(20);
  while (!cancelled->load()) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    absl::SleepFor(std::min(left, kSlice));
  }
  return false;
}

}  // namespace

grpc::ServerUnaryReactor* FakeNodeAgentService::GetNodeInfo(
    grpc::CallbackServerContext* ctx, const crest::v1::GetNodeInfoRequest* /*request*/,
    crest::v1::NodeInfo* reply) {
  if (absl::Status a = authz_->Check("GetNodeInfo", *ctx); !a.ok()) return Done(ctx, a);
  return Answer(ctx, node_->GetNodeInfo(kCallTimeout), reply);
}

grpc::ServerUnaryReactor* FakeNodeAgentService::ApplyHostTuning(
    grpc::CallbackServerContext* ctx, const crest::v1::ApplyHostTuningRequest* request,
    crest::v1::HostTuningReply* reply) {
  if (absl::Status a = authz_->Check("ApplyHostTuning", *ctx); !a.ok()) return Done(ctx, a);
  return Answer(ctx, node_->ApplyHostTuning(*request, kCallTimeout), reply);
}

grpc::ServerUnaryReactor* FakeNodeAgentService::RestoreHostTuning(
    grpc::CallbackServerContext* ctx, const crest::v1::RestoreHostTuningRequest* /*request*/,
    crest::v1::HostTuningReply* reply) {
  if (absl::Status a = authz_->Check("RestoreHostTuning", *ctx); !a.ok()) return Done(ctx, a);
  return Answer(ctx, node_->RestoreHostTuning(kCallTimeout), reply);
}

grpc::ServerWriteReactor<crest::v1::DaemonEvent>* FakeNodeAgentService::StartDaemon(
    grpc::CallbackServerContext* ctx, const crest::v1::StartDaemonRequest* request) {
  auto* reactor = new StreamReactor<crest::v1::DaemonEvent>(nullptr);
  if (absl::Status a = authz_->Check("StartDaemon", *ctx); !a.ok()) {
    reactor->FinishNow(ToGrpcStatus(a));
    return reactor;
  }
  reactor->Start([this, request = *request](auto* r) {
    auto outcome = node_->StartDaemon(request, kCallTimeout, nullptr);
    if (!outcome.ok()) return ToGrpcStatus(outcome.status());
    crest::v1::DaemonEvent e;
    *e.mutable_time() = TimeUtil::GetCurrentTime();
    if (!outcome->ready) {
      *e.mutable_failed() = outcome->failed_event;
      r->Push(e);
      return grpc::Status::OK;
    }
    e.mutable_starting()->set_pid(1);
    r->Push(e);
    *e.mutable_ready() = outcome->ready_event;
    r->Push(e);
    return grpc::Status::OK;
  });
  return reactor;
}

grpc::ServerUnaryReactor* FakeNodeAgentService::StopDaemon(
    grpc::CallbackServerContext* ctx, const crest::v1::StopDaemonRequest* /*request*/,
    crest::v1::StopDaemonReply* reply) {
  if (absl::Status a = authz_->Check("StopDaemon", *ctx); !a.ok()) return Done(ctx, a);
  reply->set_was_running(node_->daemons_running() > 0);
  return Done(ctx, node_->StopDaemon(0, kCallTimeout));
}

grpc::ServerUnaryReactor* FakeNodeAgentService::GetDaemonStatus(
    grpc::CallbackServerContext* ctx, const crest::v1::GetDaemonStatusRequest* /*request*/,
    crest::v1::DaemonStatus* reply) {
  if (absl::Status a = authz_->Check("GetDaemonStatus", *ctx); !a.ok()) return Done(ctx, a);
  reply->set_state(node_->daemons_running() > 0 ? crest::v1::DAEMON_READY
                                                : crest::v1::DAEMON_STOPPED);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerWriteReactor<crest::v1::BenchmarkEvent>* FakeNodeAgentService::RunBenchmark(
    grpc::CallbackServerContext* ctx, const crest::v1::RunBenchmarkRequest* request) {
  // Progress is a snapshot: an unsent one is replaced by the next.
  auto* reactor = new StreamReactor<crest::v1::BenchmarkEvent>(
      [](const crest::v1::BenchmarkEvent& queued, const crest::v1::BenchmarkEvent& next) {
        return queued.has_progress() && next.has_progress();
      });
  if (absl::Status a = authz_->Check("RunBenchmark", *ctx); !a.ok()) {
    reactor->FinishNow(ToGrpcStatus(a));
    return reactor;
  }
  reactor->Start([this, spec = request->spec()](auto* r) {
    const uint64_t total = spec.request_count();
    const absl::Time start = absl::Now();
    for (absl::Duration elapsed; (elapsed = absl::Now() - start) < options_.benchmark_time;) {
      if (!Wait(std::min(options_.progress_interval, options_.benchmark_time - elapsed),
                r->cancelled())) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "benchmark cancelled");
      }
      const double share =
          std::min(1.0, absl::FDivDuration(absl::Now() - start, options_.benchmark_time));
      crest::v1::BenchmarkEvent e;
      auto* p = e.mutable_progress();
      p->set_requests_total(total);
      p->set_requests_done(static_cast<uint64_t>(share * static_cast<double>(total)));
      *p->mutable_elapsed() =
          TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(absl::Now() - start));
      r->Push(e);
    }
    auto result = node_->RunBenchmark(0, spec, kCallTimeout, nullptr, nullptr);
    if (!result.ok()) return ToGrpcStatus(result.status());
    crest::v1::BenchmarkEvent e;
    *e.mutable_result() = std::move(*result);
    *e.mutable_result()->mutable_duration() =
        TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(absl::Now() - start));
    r->Push(e);
    return grpc::Status::OK;
  });
  return reactor;
}

}  // namespace crest::bench
