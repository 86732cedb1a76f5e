// The controller's seam to one crest-agent: the NodeAgent calls a trial
// needs, as blocking calls with a deadline and a cancel signal. The gRPC
// implementation (grpc_agent_client.h) is the production one; unit tests of
// scheduling, retries and resume use controller/testing/fake_agent_client.h.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "controller/cancel.h"
#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"

namespace crest::controller {

// How StartDaemon ended when the call itself worked: ready, or the daemon
// failed (which is a trial outcome, not a transport error).
struct DaemonOutcome {
  bool ready = false;
  crest::v1::DaemonReady ready_event;
  crest::v1::DaemonFailed failed_event;
};

class AgentClient {
 public:
  virtual ~AgentClient() = default;
  // Errors are transport/agent errors (UNAVAILABLE, DEADLINE_EXCEEDED,
  // INVALID_ARGUMENT, CANCELLED ...).
  virtual absl::StatusOr<crest::v1::NodeInfo> GetNodeInfo(absl::Duration timeout) = 0;
  virtual absl::StatusOr<crest::v1::HostTuningReply> ApplyHostTuning(
      const crest::v1::ApplyHostTuningRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<crest::v1::HostTuningReply> RestoreHostTuning(absl::Duration timeout) = 0;
  virtual absl::StatusOr<DaemonOutcome> StartDaemon(const crest::v1::StartDaemonRequest& request,
                                                    absl::Duration timeout,
                                                    CancelSignal* cancel) = 0;
  // `slot`: the daemon slot of the node (NodeInfo.slots; 0 without slots).
  // StartDaemon's request names its slot itself.
  virtual absl::Status StopDaemon(uint32_t slot, absl::Duration timeout) = 0;
  virtual absl::StatusOr<crest::v1::BenchmarkResult> RunBenchmark(
      uint32_t slot, const crest::v1::BenchmarkSpec& spec, absl::Duration timeout,
      const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
      CancelSignal* cancel) = 0;
};

// Makes (or reuses) the client for an agent at `address`.
class AgentConnector {
 public:
  virtual ~AgentConnector() = default;
  virtual std::shared_ptr<AgentClient> Connect(const std::string& node,
                                               const std::string& address) = 0;
};

}  // namespace crest::controller
