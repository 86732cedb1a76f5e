#include "controller/grpc_agent_client.h"

#include <grpcpp/client_context.h>

#include <optional>

#include "absl/strings/str_cat.h"

#include "common/grpc_status.h"
#include "common/status.h"

namespace crest::controller {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// A client that fails every call (no channel could be made).
class BrokenClient final : public AgentClient {
 public:
  explicit BrokenClient(absl::Status status) : status_(std::move(status)) {}
  absl::StatusOr<crest::v1::NodeInfo> GetNodeInfo(absl::Duration) override { return status_; }
  absl::StatusOr<crest::v1::HostTuningReply> ApplyHostTuning(
      const crest::v1::ApplyHostTuningRequest&, absl::Duration) override {
    return status_;
  }
  absl::StatusOr<crest::v1::HostTuningReply> RestoreHostTuning(absl::Duration) override {
    return status_;
  }
  absl::StatusOr<DaemonOutcome> StartDaemon(const crest::v1::StartDaemonRequest&, absl::Duration,
                                            CancelSignal*) override {
    return status_;
  }
  absl::Status StopDaemon(uint32_t, absl::Duration) override { return status_; }
  absl::StatusOr<crest::v1::BenchmarkResult> RunBenchmark(
      uint32_t, const crest::v1::BenchmarkSpec&, absl::Duration,
      const std::function<void(const crest::v1::BenchmarkProgress&)>&, CancelSignal*) override {
    return status_;
  }

 private:
  absl::Status status_;
};

}  // namespace

GrpcAgentClient::GrpcAgentClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(crest::v1::NodeAgent::NewStub(std::move(channel))) {}

absl::StatusOr<crest::v1::NodeInfo> GrpcAgentClient::GetNodeInfo(absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  crest::v1::NodeInfo reply;
  CREST_RETURN_IF_ERROR(FromGrpcStatus(stub_->GetNodeInfo(&ctx, {}, &reply)));
  return reply;
}

absl::StatusOr<crest::v1::HostTuningReply> GrpcAgentClient::ApplyHostTuning(
    const crest::v1::ApplyHostTuningRequest& request, absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  crest::v1::HostTuningReply reply;
  CREST_RETURN_IF_ERROR(FromGrpcStatus(stub_->ApplyHostTuning(&ctx, request, &reply)));
  return reply;
}

absl::StatusOr<crest::v1::HostTuningReply> GrpcAgentClient::RestoreHostTuning(
    absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  crest::v1::HostTuningReply reply;
  CREST_RETURN_IF_ERROR(FromGrpcStatus(stub_->RestoreHostTuning(&ctx, {}, &reply)));
  return reply;
}

absl::StatusOr<DaemonOutcome> GrpcAgentClient::StartDaemon(
    const crest::v1::StartDaemonRequest& request, absl::Duration timeout, CancelSignal* cancel) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  ScopedCancelCallback on_cancel(cancel, [&ctx] { ctx.TryCancel(); });
  auto reader = stub_->StartDaemon(&ctx, request);
  crest::v1::DaemonEvent event;
  DaemonOutcome outcome;
  bool ended = false;
  while (reader->Read(&event)) {
    if (event.has_ready()) {
      outcome.ready = true;
      outcome.ready_event = event.ready();
      ended = true;
    } else if (event.has_failed()) {
      outcome.failed_event = event.failed();
      ended = true;
    }
  }
  grpc::Status status = reader->Finish();
  if (ended && (status.ok() || outcome.ready)) return outcome;
  if (!status.ok()) return FromGrpcStatus(status);
  return absl::UnavailableError("StartDaemon stream ended without READY or FAILED");
}

absl::Status GrpcAgentClient::StopDaemon(uint32_t slot, absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  crest::v1::StopDaemonRequest request;
  request.set_slot(slot);
  crest::v1::StopDaemonReply reply;
  return FromGrpcStatus(stub_->StopDaemon(&ctx, request, &reply));
}

absl::StatusOr<crest::v1::BenchmarkResult> GrpcAgentClient::RunBenchmark(
    uint32_t slot, const crest::v1::BenchmarkSpec& spec, absl::Duration timeout,
    const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
    CancelSignal* cancel) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  ScopedCancelCallback on_cancel(cancel, [&ctx] { ctx.TryCancel(); });
  crest::v1::RunBenchmarkRequest request;
  *request.mutable_spec() = spec;
  request.set_slot(slot);
  auto reader = stub_->RunBenchmark(&ctx, request);
  crest::v1::BenchmarkEvent event;
  std::optional<crest::v1::BenchmarkResult> result;
  while (reader->Read(&event)) {
    if (event.has_progress() && on_progress) on_progress(event.progress());
    if (event.has_result()) result = event.result();
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!result) return absl::UnavailableError("RunBenchmark stream ended without a result");
  return *result;
}

std::shared_ptr<AgentClient> GrpcAgentConnector::Connect(const std::string& node,
                                                         const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(node);
  if (it != clients_.end() && it->second.first == address) return it->second.second;
  std::shared_ptr<AgentClient> client;
  auto channel = MakeChannel(address, tls_);
  if (channel.ok()) {
    client = std::make_shared<GrpcAgentClient>(*channel);
  } else {
    client = std::make_shared<BrokenClient>(absl::UnavailableError(
        absl::StrCat("agent ", node, " at '", address, "': ", channel.status().message())));
  }
  clients_[node] = {address, client};
  return client;
}

}  // namespace crest::controller
