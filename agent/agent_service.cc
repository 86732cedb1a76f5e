#include "agent/agent_service.h"

#include <atomic>
#include <deque>
#include <utility>

#include "spdlog/spdlog.h"

#include "common/grpc_status.h"
#include "common/status.h"

namespace crest::agent {
namespace {

// A server stream fed by a worker thread: events queue up, one write is in
// flight, and Finish comes once the worker is done and the queue drained.
// `coalesce` says whether a new event may replace the last unsent one.
template <typename Event>
class StreamReactor : public grpc::ServerWriteReactor<Event> {
 public:
  using Coalesce = std::function<bool(const Event& queued, const Event& next)>;
  explicit StreamReactor(Coalesce coalesce) : coalesce_(std::move(coalesce)) {}

  // Starts `work` on its own thread; it calls Push and returns the status.
  void Start(std::function<grpc::Status(StreamReactor*)> work) {
    thread_ = std::thread([this, work = std::move(work)] {
      grpc::Status status = work(this);
      WorkDone(status);
    });
  }
  void FinishNow(const grpc::Status& status) { this->Finish(status); }

  void Push(const Event& event) {
    absl::MutexLock lock(&mu_);
    if (broken_) return;
    if (!queue_.empty() && coalesce_ && coalesce_(queue_.back(), event)) {
      queue_.back() = event;
    } else {
      queue_.push_back(event);
    }
    MaybeWriteLocked();
  }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      broken_ = true;
      cancelled_ = true;
      queue_.clear();
    }
    MaybeWriteLocked();
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override {
    if (thread_.joinable()) {
      // OnDone may run inline on the worker thread itself, right after Finish.
      if (thread_.get_id() == std::this_thread::get_id()) {
        thread_.detach();
      } else {
        thread_.join();
      }
    }
    delete this;
  }

 private:
  void WorkDone(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    status_ = status;
    work_done_ = true;
    MaybeWriteLocked();
  }
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty()) {
      writing_ = true;
      this->StartWrite(&queue_.front());
      return;
    }
    if (work_done_) {
      finished_ = true;
      this->Finish(status_);
    }
  }

  Coalesce coalesce_;
  std::thread thread_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool work_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

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
    grpc::CallbackServerContext* ctx, const crest::v1::GetDaemonStatusRequest* /*request*/,
    crest::v1::DaemonStatus* reply) {
  if (absl::Status a = authz_->Check("GetDaemonStatus", *ctx); !a.ok()) return Refuse(ctx, a);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  *reply = agent_->GetDaemonStatus();
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
  reactor->Start([this, options = std::move(*options)](auto* r) {
    auto result = agent_->RunBenchmark(
        options,
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
