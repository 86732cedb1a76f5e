// A lightweight node agent for the controller's load benchmark: the real
// NodeAgent gRPC contract (mutual TLS, the same authorisation table) over a
// controller::testing::FakeAgent instead of a host, a daemon and crest-bench.
// Every call answers at once except RunBenchmark, which takes
// `benchmark_time` of wall time and streams progress meanwhile, as a real
// agent does; cancelling the call ends it.
#pragma once

#include <memory>

#include "absl/time/time.h"

#include "common/peer_identity.h"
#include "controller/testing/fake_agent_client.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest::bench {

struct FakeNodeOptions {
  absl::Duration benchmark_time = absl::Seconds(1);
  absl::Duration progress_interval = absl::Seconds(1);
};

class FakeNodeAgentService final : public crest::v1::NodeAgent::CallbackService {
 public:
  FakeNodeAgentService(std::shared_ptr<controller::testing::FakeAgent> node,
                       const Authorizer* authz, FakeNodeOptions options)
      : node_(std::move(node)), authz_(authz), options_(options) {}

  grpc::ServerUnaryReactor* GetNodeInfo(grpc::CallbackServerContext* ctx,
                                        const crest::v1::GetNodeInfoRequest* request,
                                        crest::v1::NodeInfo* reply) override;
  grpc::ServerUnaryReactor* ApplyHostTuning(grpc::CallbackServerContext* ctx,
                                            const crest::v1::ApplyHostTuningRequest* request,
                                            crest::v1::HostTuningReply* reply) override;
  grpc::ServerUnaryReactor* RestoreHostTuning(grpc::CallbackServerContext* ctx,
                                              const crest::v1::RestoreHostTuningRequest* request,
                                              crest::v1::HostTuningReply* reply) override;
  grpc::ServerWriteReactor<crest::v1::DaemonEvent>* StartDaemon(
      grpc::CallbackServerContext* ctx, const crest::v1::StartDaemonRequest* request) override;
  grpc::ServerUnaryReactor* StopDaemon(grpc::CallbackServerContext* ctx,
                                       const crest::v1::StopDaemonRequest* request,
                                       crest::v1::StopDaemonReply* reply) override;
  grpc::ServerUnaryReactor* GetDaemonStatus(grpc::CallbackServerContext* ctx,
                                            const crest::v1::GetDaemonStatusRequest* request,
                                            crest::v1::DaemonStatus* reply) override;
  grpc::ServerWriteReactor<crest::v1::BenchmarkEvent>* RunBenchmark(
      grpc::CallbackServerContext* ctx, const crest::v1::RunBenchmarkRequest* request) override;

 private:
  std::shared_ptr<controller::testing::FakeAgent> node_;
  const Authorizer* authz_;
  FakeNodeOptions options_;
};

}  // namespace crest::bench
