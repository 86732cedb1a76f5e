// The load benchmark's agents: N fake nodes in this process, each with its
// own certificate (identity = its node name), its own NodeAgent gRPC server
// on loopback (FakeNodeAgentService) and the real agent's Registrar
// (RegisterAgent, then Heartbeat at the interval the controller asks for),
// on a channel whose Heartbeat calls are timed.
#pragma once

#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "agent/registrar.h"
#include "bench/load/fake_node_agent.h"
#include "common/peer_identity.h"
#include "common/testing/test_ca.h"
#include "controller/testing/fake_agent_client.h"

namespace crest::bench {

// Latencies of one kind of call, in milliseconds.
class LatencyLog {
 public:
  void Add(double ms);
  size_t count() const;
  // The q-quantile (0..1) of what was added; 0 when empty.
  double Quantile(double q) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<double> ms_ ABSL_GUARDED_BY(mu_);
};

struct FleetOptions {
  int agents = 64;
  int groups = 4;  // node-i gets the label group=g<i % groups>
  std::string controller;
  const crest::testing::TestCa* ca = nullptr;
  std::string model;  // the label model=<model>
  int64_t npu_block_num = 0;
  std::function<double(int64_t)> curve;  // GenerateSpeed by maxBatchSize
  FakeNodeOptions node;
};

class Fleet {
 public:
  static absl::StatusOr<std::unique_ptr<Fleet>> Start(const FleetOptions& options);
  ~Fleet();  // Stop()
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Stops heartbeating, then the servers.
  void Stop();
  static std::string NodeName(int i);
  static std::string Group(int i, int groups);
  // Registrations sent over all agents (one each unless the controller forgot one).
  uint64_t registrations() const;
  uint64_t heartbeats() const;
  const LatencyLog& heartbeat_latency() const { return heartbeat_latency_; }

 private:
  struct Node {
    std::shared_ptr<controller::testing::FakeAgent> fake;
    std::unique_ptr<FakeNodeAgentService> service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<agent::Registrar> registrar;
  };
  Fleet() = default;

  bool stopped_ = false;
  std::unique_ptr<Authorizer> authz_;
  LatencyLog heartbeat_latency_;
  std::vector<Node> nodes_;
};

}  // namespace crest::bench
