// crest-agent: the Crest node agent. Serves NodeAgent over gRPC (mutual TLS
// unless --insecure on loopback), optionally registers with a controller and
// exposes /metrics. SIGTERM/SIGINT stop the daemon and restore the host.
#include <csignal>
#include <iostream>

#include "agent/agent_server.h"
#include "common/command_line.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  CLI::App app("crest-agent: the Crest node agent", "crest-agent");
  crest::agent::AgentServerOptions options;
  std::string labels;
  crest::LogOptions log;
  app.add_option("--listen", options.listen, "gRPC address to serve NodeAgent on (host:port)")
      ->required();
  app.add_option("--config", options.config_path, "Agent config (YAML); default: run mindie-sim");
  app.add_option("--state-dir", options.state_dir,
                 "Directory for recorded host state, config.json backup and daemon logs")
      ->required();
  app.add_option("--sysfs-root", options.sysfs_root, "Root of sysfs (tests use a fake tree)")
      ->capture_default_str();
  crest::AddTlsFlags(app, options.tls);
  crest::AddAuthzFlags(app, options.authz, /*controller_identity_flag=*/true);
  app.add_option("--controller", options.controller, "Controller address to register with");
  app.add_option("--node-name", options.node_name, "Name of this node (default: hostname)");
  app.add_option("--advertise", options.advertise,
                 "host:port the controller dials to reach this agent (default: --listen)");
  app.add_option("--metrics-listen", options.metrics_listen, "Serve /metrics on host:port");
  app.add_option("--log-level", log.level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--labels", labels, "Node labels, k=v,k=v (e.g. npu=910B3)");
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;

  if (absl::Status s = crest::agent::ValidateAgentServerOptions(options); !s.ok()) {
    return crest::FailWithMessage(app, std::string(s.message()));
  }
  auto parsed_labels = crest::agent::ParseLabels(labels);
  if (!parsed_labels.ok()) {
    return crest::FailWithMessage(app, std::string(parsed_labels.status().message()));
  }
  options.labels = *parsed_labels;
  if (absl::Status s = crest::InitLogging("crest-agent", log); !s.ok()) {
    return crest::FailWithMessage(app, std::string(s.message()));
  }

  // SIGTERM/SIGINT are taken by sigwait below; block them before any thread
  // starts so every thread inherits the mask (children get it reset).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto server = crest::agent::AgentServer::Start(options);
  if (!server.ok()) return crest::FailWithMessage(app, std::string(server.status().message()));
  // Tests and scripts read these lines to find the ports the OS picked.
  std::cout << "crest-agent: listening on " << (*server)->bound_address() << std::endl;
  if (!(*server)->metrics_address().empty()) {
    std::cout << "crest-agent: metrics on " << (*server)->metrics_address() << std::endl;
  }

  int signo = 0;
  sigwait(&signals, &signo);
  spdlog::info("received signal {}; stopping the daemon and restoring the host", signo);
  (*server)->Shutdown();
  spdlog::info("crest-agent stopped");
  return 0;
}
