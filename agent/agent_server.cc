#include "agent/agent_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

#include "agent/agent_config.h"
#include "agent/benchmark_options.h"
#include "agent/host_tuner.h"
#include "agent/request_validation.h"
#include "common/file_util.h"
#include "common/paths.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "loadgen/runner.h"

namespace crest::agent {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "node";
  return buf;
}

// "host" of "host:port".
std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

}  // namespace

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

absl::Status ValidateAgentServerOptions(const AgentServerOptions& options) {
  if (options.tls.insecure && !IsLoopbackAddress(options.listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--insecure is only allowed with a loopback --listen address, not ",
                     options.listen, " (use --tls-cert/--tls-key/--tls-ca)"));
  }
  CREST_RETURN_IF_ERROR(ValidateTlsOptions(options.tls));
  CREST_RETURN_IF_ERROR(ValidateAuthzOptions(options.authz));
  if (!options.controller.empty() && options.advertise.empty() &&
      (absl::StartsWith(options.listen, "0.0.0.0") || absl::StartsWith(options.listen, "[::]"))) {
    return absl::InvalidArgumentError(
        "--advertise: required with --controller when --listen is a wildcard address");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AgentServer>> AgentServer::Start(const AgentServerOptions& options) {
  CREST_RETURN_IF_ERROR(ValidateAgentServerOptions(options));
  CREST_RETURN_IF_ERROR(Annotate(MakeDirectories(options.state_dir), "--state-dir"));
  absl::StatusOr<std::string> exe_dir = ExecutableDir();
  absl::StatusOr<std::string> share_dir = ShareDir();
  if (!exe_dir.ok() || !share_dir.ok()) {
    return absl::InternalError("cannot locate the agent's own directory");
  }
  CREST_ASSIGN_OR_RETURN(AgentConfig config,
                         LoadAgentConfig(options.config_path, options.state_dir, *exe_dir));
  std::map<std::string, std::string> labels = options.labels;
  for (const auto& [k, v] : config.labels) labels.emplace(k, v);
  labels.emplace("backend", config.backend);

  if (options.tls.insecure) {
    spdlog::warn(
        "*** --insecure: NodeAgent RPCs on {} are PLAINTEXT and UNAUTHENTICATED, and "
        "AUTHORIZATION IS OFF: any local process may tune the host, start the daemon and run "
        "benchmarks; loopback and testing only ***",
        options.listen);
  }

  NodeAgentOptions agent_options;
  agent_options.node_name = options.node_name.empty() ? Hostname() : options.node_name;
  agent_options.state_dir = options.state_dir;
  agent_options.sysfs_root = options.sysfs_root;
  agent_options.datasets_dir = *share_dir + "/datasets";
  agent_options.labels = labels;
  agent_options.npu_smi = FindOnPath("npu-smi");
  if (config.use_builtin_sim) {
    // The simulator's host: its NPUs as npu-smi shows them (sim/npu_host.h).
    agent_options.npu_smi = *exe_dir + "/npu-smi-sim";
    agent_options.npu_smi_env = {{"MIES_INSTALL_PATH", config.install_dir},
                                 {"MINDIE_SIM_SYSFS_ROOT", options.sysfs_root}};
  }
  std::unique_ptr<AgentServer> s(new AgentServer());
  if (config.use_builtin_sim) {
    CREST_ASSIGN_OR_RETURN(s->sim_ports_,
                           PrepareSimConfigJson(config, *share_dir + "/conf/config.json"));
  }
  s->agent_ =
      std::make_unique<NodeAgent>(agent_options, config, &s->clock_, HostTuner::SystemCpupower(),
                                  BenchmarkClientFor(config.benchmark_tool));
  CREST_RETURN_IF_ERROR(Annotate(s->agent_->Recover(), "crash recovery and slots"));

  CREST_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                         MakeServerCredentials(options.tls));
  AuthzOptions authz = options.authz;
  authz.enforce = !options.tls.insecure;
  s->authz_ = std::make_unique<Authorizer>("crest.v1.NodeAgent", NodeAgentMethodRoles(), authz);
  s->service_ = std::make_unique<AgentService>(s->agent_.get(), s->authz_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, credentials, &port);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options.listen));
  }
  s->server_->GetHealthCheckService()->SetServingStatus(true);
  s->bound_address_ = absl::StrCat(HostOf(options.listen), ":", port);
  spdlog::info("serving NodeAgent on {} as node {} (backend {}, config.json {})", s->bound_address_,
               agent_options.node_name, config.backend, config.config_json);
  if (authz.enforce) {
    spdlog::info("node calls from {} {}; read-only calls also from {} {}",
                 IdentitySourceName(authz.source), absl::StrJoin(authz.controller_identities, ","),
                 IdentitySourceName(authz.source), absl::StrJoin(authz.operator_identities, ","));
  }

  if (!options.metrics_listen.empty()) {
    try {
      s->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen);
      s->exposer_->RegisterCollectable(s->agent_->metrics().registry());
      std::vector<int> ports = s->exposer_->GetListeningPorts();
      s->metrics_address_ =
          absl::StrCat(HostOf(options.metrics_listen), ":", ports.empty() ? 0 : ports[0]);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("--metrics-listen ", options.metrics_listen, ": ", e.what()));
    }
  }

  if (!options.controller.empty()) {
    CREST_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                           MakeChannel(options.controller, options.tls));
    RegistrarOptions registration;
    registration.node_name = agent_options.node_name;
    registration.advertise_address =
        options.advertise.empty() ? s->bound_address_ : options.advertise;
    registration.labels = labels;
    registration.capabilities = {"host-tuning", "pinning", "benchmark", config.backend};
    registration.parameter_limits = PublishedParameterLimits(config);
    registration.benchmark_limits = PublishedBenchmarkLimits();
    registration.slots = static_cast<uint32_t>(s->agent_->slot_count());
    NodeAgent* agent = s->agent_.get();
    s->registrar_ =
        std::make_unique<Registrar>(crest::v1::Controller::NewStub(channel), registration,
                                    [agent] { return agent->GetDaemonStatus().state(); });
    s->registrar_->Start();
  }
  return s;
}

void AgentServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (registrar_ != nullptr) registrar_->Stop();
  // Until the server is up nothing but crash recovery touched the host.
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  agent_->Shutdown();
  server_->Wait();
}

AgentServer::~AgentServer() { Shutdown(); }

}  // namespace crest::agent
