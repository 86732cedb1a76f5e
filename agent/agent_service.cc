#include "agent/agent_service.h"

#include <utility>

#include "spdlog/spdlog.h"

#include "common/grpc_status.h"
#include "common/status.h"
#include "common/stream_reactor.h"

namespace crest::agent {
namespace {

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

Workers::~Workers() {
  std::list<Worker> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(workers_);
  }
  for (Worker& w : all) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void Workers::Run(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  // Reap finished threads so the list stays short.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  workers_.emplace_back();
  Worker* w = &workers_.back();
  w->thread = std::thread([this, w, work = std::move(work)] {
    work();
    absl::MutexLock l(&mu_);
    w->done = true;
  });
}

grpc::ServerUnaryReactor* AgentService::GetNodeInfo(
    grpc::CallbackServerContext* ctx, const crest::v1::GetNodeInfoRequest* /*request*/,
    crest::v1::NodeInfo* reply) {
  if (absl::Status a = authz_->Check("GetNodeInfo", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // npu-smi may take a while: off the reactor.
  workers_.Run([this, reactor, reply] {
    auto info = agent_->GetNodeInfo();
    if (info.ok()) *reply = std::move(*info);
    reactor->Finish(ToGrpcStatus(info.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::ApplyHostTuning(
    grpc::CallbackServerContext* ctx, const crest::v1::ApplyHostTuningRequest* request,
    crest::v1::HostTuningReply* reply) {
  if (absl::Status a = authz_->Check("ApplyHostTuning", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  workers_.Run([this, reactor, request, reply] {
    auto r = agent_->ApplyHostTuning(*request);
    if (r.ok()) *reply = std::move(*r);
    if (!r.ok()) spdlog::warn("ApplyHostTuning: {}", std::string(r.status().message()));
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::RestoreHostTuning(
    grpc::CallbackServerContext* ctx, const crest::v1::RestoreHostTuningRequest* /*request*/,
    crest::v1::HostTuningReply* reply) {
  if (absl::Status a = authz_->Check("RestoreHostTuning", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  workers_.Run([this, reactor, reply] {
    auto r = agent_->RestoreHostTuning();
    if (r.ok()) *reply = std::move(*r);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<crest::v1::DaemonEvent>* AgentService::StartDaemon(
    grpc::CallbackServerContext* ctx, const crest::v1::StartDaemonRequest* request) {
  auto* reactor = new StreamReactor<crest::v1::DaemonEvent>(nullptr);
  if (absl::Status a = authz_->Check("StartDaemon", *ctx); !a.ok()) {
    reactor->FinishNow(ToGrpcStatus(a));
    return reactor;
  }
  auto params = agent_->PrepareStart(*request);
  if (!params.ok()) {
    spdlog::warn("StartDaemon refused: {}", std::string(params.status().message()));
    reactor->FinishNow(ToGrpcStatus(params.status()));
    return reactor;
  }
  reactor->Start([this, params = std::move(*params)](auto* r) {
    absl::Status s = agent_->StartDaemon(
        params, [r](const crest::v1::DaemonEvent& e) { r->Push(e); }, r->cancelled());
    return ToGrpcStatus(s);
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::StopDaemon(grpc::CallbackServerContext* ctx,
                                                   const crest::v1::StopDaemonRequest* request,
                                                   crest::v1::StopDaemonReply* reply) {
  if (absl::Status a = authz_->Check("StopDaemon", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  workers_.Run([this, reactor, request, reply] {
    auto r = agent_->StopDaemon(*request);
    if (r.ok()) *reply = std::move(*r);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::GetDaemonStatus(
    grpc::CallbackServerContext* ctx, const crest::v1::GetDaemonStatusRequest* request,
    crest::v1::DaemonStatus* reply) {
  if (absl::Status a = authz_->Check("GetDaemonStatus", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status slot = agent_->CheckSlot(request->slot()); !slot.ok()) {
    reactor->Finish(ToGrpcStatus(slot));
    return reactor;
  }
  *reply = agent_->GetDaemonStatus(request->slot());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<crest::v1::BenchmarkEvent>* AgentService::RunBenchmark(
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
  auto options = agent_->PrepareBenchmark(*request);
  if (!options.ok()) {
    spdlog::warn("RunBenchmark refused: {}", std::string(options.status().message()));
    reactor->FinishNow(ToGrpcStatus(options.status()));
    return reactor;
  }
  reactor->Start([this, slot = request->slot(), options = std::move(*options)](auto* r) {
    auto result = agent_->RunBenchmark(
        slot, options,
        [r](const crest::v1::BenchmarkProgress& p) {
          crest::v1::BenchmarkEvent e;
          *e.mutable_progress() = p;
          r->Push(e);
        },
        r->cancelled());
    if (!result.ok()) return ToGrpcStatus(result.status());
    crest::v1::BenchmarkEvent e;
    *e.mutable_result() = std::move(*result);
    r->Push(e);
    return grpc::Status::OK;
  });
  return reactor;
}

}  // namespace crest::agent
