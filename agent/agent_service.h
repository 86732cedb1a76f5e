// The NodeAgent gRPC service: thin callback-API adapters over NodeAgent.
// Work that can block (daemon start/stop, benchmarks, tuning through
// cpupower) runs on the service's own worker threads, never on a reactor;
// streams keep one write in flight and, for benchmark progress, only the
// latest message. Cancelling a call stops its work. Every handler first
// asks the Authorizer whether the caller's certificate may call it.
#pragma once

#include <functional>
#include <list>
#include <thread>

#include "absl/synchronization/mutex.h"

#include "agent/node_agent.h"
#include "common/peer_identity.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest::agent {

// Threads for blocking work; joined at destruction (finished ones earlier).
class Workers {
 public:
  Workers() = default;
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  void Run(std::function<void()> work);

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };
  absl::Mutex mu_;
  std::list<Worker> workers_ ABSL_GUARDED_BY(mu_);
};

class AgentService final : public crest::v1::NodeAgent::CallbackService {
 public:
  AgentService(NodeAgent* agent, const Authorizer* authz) : agent_(agent), authz_(authz) {}

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
  NodeAgent* agent_;
  const Authorizer* authz_;
  Workers workers_;
};

}  // namespace crest::agent
