#include "controller/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "common/status.h"

namespace crest::controller {

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseAgentList(
    const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> problems;
  std::set<std::string> names;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      problems.push_back(absl::StrCat("'", item, "' is not NAME=HOST:PORT"));
      continue;
    }
    auto colon = kv[1].rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(kv[1].substr(colon + 1), &port) ||
        port <= 0 || port > 65535) {
      problems.push_back(
          absl::StrCat("'", item, "': address must be HOST:PORT with a port in [1, 65535]"));
      continue;
    }
    if (!names.insert(kv[0]).second) {
      problems.push_back(absl::StrCat("agent '", kv[0], "' is named twice"));
      continue;
    }
    out.emplace_back(kv[0], kv[1]);
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--agents: ", absl::StrJoin(problems, "; ")));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    const ServerOptions& options) {
  CREST_RETURN_IF_ERROR(ValidateTlsOptions(options.tls));
  CREST_RETURN_IF_ERROR(ValidateAuthzOptions(options.authz));
  if (options.tls.insecure && !IsLoopbackAddress(options.listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--insecure is allowed only on loopback; --listen ", options.listen,
                     " is not (use --tls-cert/--tls-key/--tls-ca)"));
  }
  std::unique_ptr<ControllerServer> s(new ControllerServer());
  CREST_ASSIGN_OR_RETURN(s->store_, Store::Open(options.state_dir));
  s->metrics_ = std::make_unique<Metrics>(&s->clock_);
  if (!options.metrics_listen.empty()) {
    CREST_ASSIGN_OR_RETURN(s->metrics_server_,
                           MetricsServer::Start(options.metrics_listen, *s->metrics_));
    spdlog::info("metrics on http://{}/metrics (port {})", options.metrics_listen,
                 s->metrics_server_->port());
  }
  s->registry_ = std::make_unique<AgentRegistry>(&s->clock_, options.registry, s->store_.get());
  for (const auto& [name, address] : options.static_agents) s->registry_->AddStatic(name, address);
  s->connector_ = std::make_unique<GrpcAgentConnector>(options.tls);
  s->manager_ =
      std::make_unique<CampaignManager>(s->store_.get(), s->registry_.get(), s->connector_.get(),
                                        &s->clock_, s->metrics_.get(), options.manager);
  CampaignManager* manager = s->manager_.get();
  s->registry_->SetOnChange([manager] { manager->Poke(); });
  Metrics* metrics = s->metrics_.get();
  s->registry_->SetOnLost([metrics](const std::string& node) { metrics->RecordAgentLost(node); });
  AuthzOptions authz = options.authz;
  authz.enforce = !options.tls.insecure;
  if (authz.enforce) {
    spdlog::info("campaign calls from {} {}; agents register under their own {}",
                 IdentitySourceName(authz.source), absl::StrJoin(authz.operator_identities, ","),
                 IdentitySourceName(authz.source));
  } else {
    spdlog::warn(
        "*** --insecure: Controller RPCs on {} are PLAINTEXT and AUTHORIZATION IS OFF: any local "
        "process may register as any node and create or cancel campaigns; loopback and testing "
        "only ***",
        options.listen);
  }
  s->authz_ = std::make_unique<Authorizer>("crest.v1.Controller", ControllerMethodRoles(), authz);
  s->service_ = std::make_unique<ControllerService>(s->registry_.get(), manager, s->authz_.get());
  CREST_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(options.tls));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen, ": cannot listen there (in use or invalid)"));
  }
  grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService();
  // A controller that can no longer record state is not serving: the CLI and
  // orchestrators see it, and a restart (which reloads the store) is the cure.
  manager->SetOnPersistenceError(
      [health](const absl::Status&) { health->SetServingStatus(false); });
  CREST_RETURN_IF_ERROR(
      Annotate(manager->Start(), absl::StrCat("resuming from ", s->store_->path())));
  health->SetServingStatus(manager->persistence_error().ok());
  if (options.tls.insecure) {
    spdlog::warn("INSECURE: plaintext gRPC without authentication (--insecure, loopback only)");
  }
  return s;
}

int ControllerServer::metrics_port() const {
  return metrics_server_ == nullptr ? 0 : metrics_server_->port();
}

void ControllerServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    // Streams (watchers) are cancelled after the deadline.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  if (manager_ != nullptr) manager_->Shutdown();
}

ControllerServer::~ControllerServer() { Shutdown(); }

}  // namespace crest::controller
