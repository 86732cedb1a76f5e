// Registration with the controller (--controller): RegisterAgent, then a
// Heartbeat at the interval the controller asks for; while the controller is
// away it retries with exponential back-off and jitter, and it registers
// again when a heartbeat says the controller does not know the node. The
// agent serves its own RPCs throughout.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "crest/v1/controller.grpc.pb.h"

namespace crest::agent {

struct RegistrarOptions {
  std::string node_name;
  std::string advertise_address;
  std::map<std::string, std::string> labels;
  std::vector<std::string> capabilities;
  // What the agent accepts (request_validation.h), sent with every registration.
  std::vector<crest::v1::ParameterLimit> parameter_limits;
  uint32_t slots = 1;  // daemon slots (NodeInfo.slots)
  std::vector<crest::v1::ParameterLimit> benchmark_limits;
  absl::Duration rpc_deadline = absl::Seconds(5);
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(30);
};

class Registrar {
 public:
  // `daemon_state` is asked at every heartbeat.
  Registrar(std::shared_ptr<crest::v1::Controller::StubInterface> stub, RegistrarOptions options,
            std::function<crest::v1::DaemonState()> daemon_state);
  ~Registrar();  // Stop()
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  void Start();
  void Stop();

  // For tests and logs.
  uint64_t registrations() const;
  uint64_t heartbeats() const;
  bool registered() const;
  // Blocks until registrations() >= n or the timeout passes.
  bool WaitForRegistrations(uint64_t n, absl::Duration timeout) const;

 private:
  void Loop();
  // Sleeps up to d; false when stopping.
  bool Sleep(absl::Duration d);
  absl::Duration NextBackoff();

  std::shared_ptr<crest::v1::Controller::StubInterface> stub_;
  const RegistrarOptions options_;
  std::function<crest::v1::DaemonState()> daemon_state_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration backoff_;
  uint64_t jitter_state_;
};

}  // namespace crest::agent
