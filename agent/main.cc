// crest-agent: the Crest node agent. Serves NodeAgent over gRPC (mutual TLS
// unless --insecure on loopback), optionally registers with a controller and
// exposes /metrics. SIGTERM/SIGINT stop the daemon and restore the host.
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "prometheus/exposer.h"
#include "spdlog/spdlog.h"

#include "agent/agent_config.h"
#include "agent/agent_service.h"
#include "agent/node_agent.h"
#include "agent/registrar.h"
#include "common/command_line.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/paths.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "common/tls.h"
#include "loadgen/runner.h"

namespace {

struct Flags {
  std::string listen;
  std::string config;
  std::string state_dir;
  std::string sysfs_root = "/sys";
  crest::TlsOptions tls;
  std::string controller;
  std::string node_name;
  std::string advertise;
  std::string metrics_listen;
  std::string log_level = "info";
  std::string labels;
};

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "node";
  return buf;
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.first.empty() || part.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: \"", part, "\" is not key=value"));
    }
    out[kv.first] = kv.second;
  }
  return out;
}

int Run(CLI::App& app, Flags& flags) {
  if (flags.tls.insecure && !crest::IsLoopbackAddress(flags.listen)) {
    return crest::FailWithMessage(
        app, absl::StrCat("--insecure is only allowed with a loopback --listen address, not ",
                          flags.listen, " (use --tls-cert/--tls-key/--tls-ca)"));
  }
  if (absl::Status s = crest::ValidateTlsOptions(flags.tls); !s.ok()) {
    return crest::FailWithMessage(app, std::string(s.message()));
  }
  auto labels = ParseLabels(flags.labels);
  if (!labels.ok()) return crest::FailWithMessage(app, std::string(labels.status().message()));
  if (!flags.controller.empty() && flags.advertise.empty()) {
    if (absl::StartsWith(flags.listen, "0.0.0.0") || absl::StartsWith(flags.listen, "[::]")) {
      return crest::FailWithMessage(
          app, "--advertise: required with --controller when --listen is a wildcard address");
    }
  }
  crest::LogOptions log_options;
  log_options.level = flags.log_level;
  if (absl::Status s = crest::InitLogging("crest-agent", log_options); !s.ok()) {
    return crest::FailWithMessage(app, std::string(s.message()));
  }
  if (absl::Status s = crest::MakeDirectories(flags.state_dir); !s.ok()) {
    return crest::FailWithMessage(app, absl::StrCat("--state-dir: ", s.message()));
  }
  auto exe_dir = crest::ExecutableDir();
  auto share_dir = crest::ShareDir();
  if (!exe_dir.ok() || !share_dir.ok()) {
    return crest::FailWithMessage(app, "cannot locate the agent's own directory");
  }
  auto config = crest::agent::LoadAgentConfig(flags.config, flags.state_dir, *exe_dir);
  if (!config.ok()) return crest::FailWithMessage(app, std::string(config.status().message()));
  for (const auto& [k, v] : config->labels) labels->emplace(k, v);
  labels->emplace("backend", config->backend);

  if (flags.tls.insecure) {
    spdlog::warn(
        "*** --insecure: NodeAgent RPCs on {} are PLAINTEXT and UNAUTHENTICATED; "
        "loopback and testing only ***",
        flags.listen);
  }

  // SIGTERM/SIGINT are taken by sigwait below; block them before any thread
  // starts so every thread inherits the mask (children get it reset).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  crest::agent::NodeAgentOptions options;
  options.node_name = flags.node_name.empty() ? Hostname() : flags.node_name;
  options.state_dir = flags.state_dir;
  options.sysfs_root = flags.sysfs_root;
  options.datasets_dir = *share_dir + "/datasets";
  options.labels = *labels;
  options.npu_smi = crest::FindOnPath("npu-smi");
  crest::SystemClock clock;
  auto agent = std::make_unique<crest::agent::NodeAgent>(options, *config, &clock,
                                                         crest::agent::HostTuner::SystemCpupower(),
                                                         &crest::loadgen::RunBenchmark);
  if (absl::Status s = agent->Recover(); !s.ok()) {
    return crest::FailWithMessage(app, absl::StrCat("crash recovery: ", s.message()));
  }
  if (config->use_builtin_sim) {
    absl::Status s = crest::agent::PrepareSimConfigJson(*config, *share_dir + "/conf/config.json");
    if (!s.ok()) return crest::FailWithMessage(app, std::string(s.message()));
  }

  auto credentials = crest::MakeServerCredentials(flags.tls);
  if (!credentials.ok())
    return crest::FailWithMessage(app, std::string(credentials.status().message()));
  crest::agent::AgentService service(agent.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(flags.listen, *credentials, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return crest::FailWithMessage(app, absl::StrCat("--listen: cannot listen on ", flags.listen));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  std::string host = flags.listen.substr(0, flags.listen.rfind(':'));
  std::string bound = absl::StrCat(host, ":", port);
  // Tests and scripts read this line to find a port the OS picked.
  std::cout << "crest-agent: listening on " << bound << std::endl;
  spdlog::info("serving NodeAgent on {} as node {} (backend {}, config.json {})", bound,
               options.node_name, config->backend, config->config_json);

  std::unique_ptr<prometheus::Exposer> exposer;
  if (!flags.metrics_listen.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(flags.metrics_listen);
      exposer->RegisterCollectable(agent->metrics().registry());
      auto ports = exposer->GetListeningPorts();
      std::cout << "crest-agent: metrics on "
                << flags.metrics_listen.substr(0, flags.metrics_listen.rfind(':')) << ":"
                << (ports.empty() ? 0 : ports[0]) << std::endl;
    } catch (const std::exception& e) {
      server->Shutdown();
      return crest::FailWithMessage(
          app, absl::StrCat("--metrics-listen ", flags.metrics_listen, ": ", e.what()));
    }
  }

  std::unique_ptr<crest::agent::Registrar> registrar;
  if (!flags.controller.empty()) {
    auto channel = crest::MakeChannel(flags.controller, flags.tls);
    if (!channel.ok()) return crest::FailWithMessage(app, std::string(channel.status().message()));
    crest::agent::RegistrarOptions reg;
    reg.node_name = options.node_name;
    reg.advertise_address = flags.advertise.empty() ? bound : flags.advertise;
    reg.labels = *labels;
    reg.capabilities = {"host-tuning", "pinning", "benchmark", config->backend};
    crest::agent::NodeAgent* raw = agent.get();
    registrar =
        std::make_unique<crest::agent::Registrar>(crest::v1::Controller::NewStub(*channel), reg,
                                                  [raw] { return raw->GetDaemonStatus().state(); });
    registrar->Start();
  }

  int signo = 0;
  sigwait(&signals, &signo);
  spdlog::info("received signal {}; stopping the daemon and restoring the host", signo);
  if (registrar) registrar->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  agent->Shutdown();
  server->Wait();
  spdlog::info("crest-agent stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("crest-agent: the Crest node agent", "crest-agent");
  Flags flags;
  app.add_option("--listen", flags.listen, "gRPC address to serve NodeAgent on (host:port)")
      ->required();
  app.add_option("--config", flags.config, "Agent config (YAML); default: run mindie-sim");
  app.add_option("--state-dir", flags.state_dir,
                 "Directory for recorded host state, config.json backup and daemon logs")
      ->required();
  app.add_option("--sysfs-root", flags.sysfs_root, "Root of sysfs (tests use a fake tree)")
      ->capture_default_str();
  crest::AddTlsFlags(app, flags.tls);
  app.add_option("--controller", flags.controller, "Controller address to register with");
  app.add_option("--node-name", flags.node_name, "Name of this node (default: hostname)");
  app.add_option("--advertise", flags.advertise,
                 "host:port the controller dials to reach this agent (default: --listen)");
  app.add_option("--metrics-listen", flags.metrics_listen, "Serve /metrics on host:port");
  app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error")
      ->capture_default_str();
  app.add_option("--labels", flags.labels, "Node labels, k=v,k=v (e.g. npu=910B3)");
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  return Run(app, flags);
}
