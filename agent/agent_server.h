// Wires the node agent together: its config, the NodeAgent (after crash
// recovery), the simulator's config.json, the gRPC server (with the standard
// health service), the metrics exposer and the registration with a
// controller. crest-agent's main is a thin shell around it.
#pragma once

#include <grpcpp/server.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/exposer.h"

#include "agent/agent_service.h"
#include "agent/node_agent.h"
#include "agent/registrar.h"
#include "common/clock.h"
#include "common/listen_port.h"
#include "common/peer_identity.h"
#include "common/tls.h"

namespace crest::agent {

struct AgentServerOptions {
  std::string listen;  // host:port (port 0: pick one)
  TlsOptions tls;
  // Who may call what (enforce is set from tls: off only with --insecure).
  AuthzOptions authz;
  std::string controller;      // empty: no registration
  std::string node_name;       // empty: the hostname
  std::string advertise;       // empty: the bound address
  std::string metrics_listen;  // empty: no /metrics
  std::map<std::string, std::string> labels;
  std::string state_dir;
  std::string sysfs_root = "/sys";
  std::string config_path;  // empty: run mindie-sim
};

// Parses --labels "k=v,k=v".
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text);

// The flag rules that need no file or network: --insecure only on a loopback
// --listen, the TLS flags complete, --advertise given with --controller when
// --listen is a wildcard address. Each error is the line crest-agent prints.
absl::Status ValidateAgentServerOptions(const AgentServerOptions& options);

class AgentServer {
 public:
  // Serving when it returns. SIGTERM/SIGINT must be blocked already when
  // the process waits for them with sigwait: this starts threads.
  static absl::StatusOr<std::unique_ptr<AgentServer>> Start(const AgentServerOptions& options);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // host:port with the port bound (the one picked for port 0).
  const std::string& bound_address() const { return bound_address_; }
  // host:port of /metrics; empty without --metrics-listen.
  const std::string& metrics_address() const { return metrics_address_; }
  // Stops registering, stops accepting calls (streams are cancelled after
  // 2 s), stops the daemon and restores config.json and the host. Idempotent.
  void Shutdown();

 private:
  AgentServer() = default;

  // Declared so that destruction goes from the registrar back to the clock.
  SystemClock clock_;
  std::vector<PortReservation> sim_ports_;  // the built-in simulator's picked ports
  std::unique_ptr<NodeAgent> agent_;
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<Registrar> registrar_;
  std::string bound_address_;
  std::string metrics_address_;
  bool shut_down_ = false;
};

}  // namespace crest::agent
