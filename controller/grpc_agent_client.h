// AgentClient over gRPC (crest.v1.NodeAgent), one channel per agent, with a
// deadline on every call; cancelling the signal cancels the call in flight.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"

#include "common/tls.h"
#include "controller/agent_client.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest::controller {

class GrpcAgentClient final : public AgentClient {
 public:
  explicit GrpcAgentClient(std::shared_ptr<grpc::Channel> channel);

  absl::StatusOr<crest::v1::NodeInfo> GetNodeInfo(absl::Duration timeout) override;
  absl::StatusOr<crest::v1::HostTuningReply> ApplyHostTuning(
      const crest::v1::ApplyHostTuningRequest& request, absl::Duration timeout) override;
  absl::StatusOr<crest::v1::HostTuningReply> RestoreHostTuning(absl::Duration timeout) override;
  absl::StatusOr<DaemonOutcome> StartDaemon(const crest::v1::StartDaemonRequest& request,
                                            absl::Duration timeout, CancelSignal* cancel) override;
  absl::Status StopDaemon(uint32_t slot, absl::Duration timeout) override;
  absl::StatusOr<crest::v1::BenchmarkResult> RunBenchmark(
      uint32_t slot, const crest::v1::BenchmarkSpec& spec, absl::Duration timeout,
      const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
      CancelSignal* cancel) override;

 private:
  std::unique_ptr<crest::v1::NodeAgent::Stub> stub_;
};

// Keeps one client per (node, address); TLS options as for the controller's
// own endpoint (its certificate is the client certificate agents verify).
class GrpcAgentConnector final : public AgentConnector {
 public:
  explicit GrpcAgentConnector(TlsOptions tls) : tls_(std::move(tls)) {}
  std::shared_ptr<AgentClient> Connect(const std::string& node,
                                       const std::string& address) override;

 private:
  TlsOptions tls_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<std::string, std::shared_ptr<AgentClient>>> clients_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::controller
