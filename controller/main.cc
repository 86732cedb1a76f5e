// crest-controller: the Crest campaign controller (agent registry, campaign
// scheduling, persistence, the Controller gRPC API and /metrics).
#include <csignal>
#include <iostream>

#include "common/command_line.h"
#include "common/logging.h"
#include "controller/server.h"

int main(int argc, char** argv) {
  CLI::App app("crest-controller: the Crest campaign controller", "crest-controller");
  crest::controller::ServerOptions options;
  std::string agents;
  crest::LogOptions log;
  double heartbeat_s = 2;
  app.add_option("--listen", options.listen, "gRPC address, host:port (port 0 picks one)")
      ->required();
  app.add_option("--state-dir", options.state_dir, "Directory of the SQLite state (controller.db)")
      ->required();
  app.add_option("--agents", agents, "Static agents: NAME=HOST:PORT,...");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus /metrics address, host:port");
  app.add_option("--heartbeat-interval", heartbeat_s,
                 "Seconds between agent heartbeats; 3 missed mark an agent lost")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--log-level", log.level, "trace|debug|info|warn|error");
  app.add_option("--log-file", log.file, "Also log to this file");
  std::string time_scales;
  app.add_option("--sim-time-scale", time_scales,
                 "Simulated nodes' time scale, by which results are divided: K (every node) "
                 "and/or NAME=K,...");
  crest::AddTlsFlags(app, options.tls);
  crest::AddAuthzFlags(app, options.authz, /*controller_identity_flag=*/false);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  if (auto s = crest::InitLogging("crest-controller", log); !s.ok()) {
    return crest::FailWithMessage(app, std::string(s.message()));
  }
  auto parsed = crest::controller::ParseAgentList(agents);
  if (!parsed.ok()) return crest::FailWithMessage(app, std::string(parsed.status().message()));
  options.static_agents = *parsed;
  auto scales = crest::controller::ParseTimeScales(time_scales);
  if (!scales.ok()) return crest::FailWithMessage(app, std::string(scales.status().message()));
  options.registry.time_scales = *scales;
  options.registry.heartbeat_interval = absl::Seconds(heartbeat_s);
  options.manager.probe_interval = absl::Seconds(heartbeat_s);

  // Signals are taken by sigwait below, never by a handler in another thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = crest::controller::ControllerServer::Start(options);
  if (!server.ok()) return crest::FailWithMessage(app, std::string(server.status().message()));
  spdlog::info("crest-controller listening on {} (port {})", options.listen, (*server)->port());
  std::cout << "listening on port " << (*server)->port() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down (running trials are re-run at the next start)", sig);
  (*server)->Shutdown();
  return 0;
}
