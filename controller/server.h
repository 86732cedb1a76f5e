// Wires the controller together: store, registry, agent connector, campaign
// manager, the gRPC server (with the standard health service) and the
// metrics exposer. crest-controller's main is a thin shell around it.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "common/clock.h"
#include "common/peer_identity.h"
#include "common/tls.h"
#include "controller/agent_registry.h"
#include "controller/campaign_manager.h"
#include "controller/grpc_agent_client.h"
#include "controller/metrics.h"
#include "controller/service.h"
#include "controller/store.h"

namespace crest::controller {

struct ServerOptions {
  std::string listen;  // host:port (port 0: pick one)
  std::string state_dir;
  std::vector<std::pair<std::string, std::string>> static_agents;  // name, address
  std::string metrics_listen;                                      // empty: no metrics endpoint
  TlsOptions tls;
  // Who may call what (enforce is set from tls: off only with --insecure).
  AuthzOptions authz;
  RegistryOptions registry;
  ManagerOptions manager;
};

// Parses --agents "a=host:port,b=host:port" (every problem named).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseAgentList(
    const std::string& text);

class ControllerServer {
 public:
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(const ServerOptions& options);
  ~ControllerServer();
  ControllerServer(const ControllerServer&) = delete;
  ControllerServer& operator=(const ControllerServer&) = delete;

  int port() const { return port_; }
  int metrics_port() const;
  // Stops accepting calls, stops the manager (running trials become
  // interrupted), closes the store. Idempotent.
  void Shutdown();

 private:
  ControllerServer() = default;

  SystemClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<AgentRegistry> registry_;
  std::unique_ptr<GrpcAgentConnector> connector_;
  std::unique_ptr<CampaignManager> manager_;
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<ControllerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace crest::controller
