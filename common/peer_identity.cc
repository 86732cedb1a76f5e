#include "common/peer_identity.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/status.h"

namespace crest {
namespace {

std::string Quoted(const std::vector<std::string>& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, const std::string& n) {
    absl::StrAppend(out, "\"", n, "\"");
  });
}

}  // namespace

absl::StatusOr<IdentitySource> ParseIdentitySource(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "cn") return IdentitySource::kCommonName;
  if (lower == "san") return IdentitySource::kDnsSan;
  return absl::InvalidArgumentError(
      absl::StrCat("--identity-from: '", text, "' is neither 'cn' nor 'san'"));
}

const char* IdentitySourceName(IdentitySource source) {
  return source == IdentitySource::kCommonName ? "CN" : "SAN";
}

bool PeerIdentity::Is(absl::string_view identity) const {
  return authenticated && std::find(names.begin(), names.end(), identity) != names.end();
}

std::string PeerIdentity::Describe(IdentitySource source) const {
  if (!authenticated) return "no verified certificate";
  if (names.empty()) return absl::StrCat("a certificate without a ", IdentitySourceName(source));
  if (source == IdentitySource::kCommonName) return absl::StrCat("CN ", Quoted(names));
  return absl::StrCat("SAN [", Quoted(names), "]");
}

PeerIdentity PeerIdentityOf(const grpc::ServerContextBase& ctx, IdentitySource source) {
  PeerIdentity peer;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return peer;
  peer.authenticated = true;
  const char* property = source == IdentitySource::kCommonName ? GRPC_X509_CN_PROPERTY_NAME
                                                               : GRPC_PEER_DNS_PROPERTY_NAME;
  for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
    peer.names.emplace_back(value.data(), value.size());
  }
  return peer;
}

MethodRoles NodeAgentMethodRoles() {
  const std::vector<Role> controller = {Role::kController};
  const std::vector<Role> read = {Role::kController, Role::kOperator};
  return {
      {"GetNodeInfo", read},           {"GetDaemonStatus", read},
      {"ApplyHostTuning", controller}, {"RestoreHostTuning", controller},
      {"StartDaemon", controller},     {"StopDaemon", controller},
      {"RunBenchmark", controller},
  };
}

MethodRoles ControllerMethodRoles() {
  const std::vector<Role> node = {Role::kNode};
  const std::vector<Role> operators = {Role::kOperator};
  return {
      {"RegisterAgent", node},          {"Heartbeat", node},
      {"ListAgents", operators},        {"CreateCampaign", operators},
      {"GetCampaign", operators},       {"ListCampaigns", operators},
      {"WatchCampaign", operators},     {"CancelCampaign", operators},
      {"GetCampaignReport", operators},
  };
}

void AddAuthzFlags(CLI::App& app, AuthzOptions& options, bool controller_identity_flag) {
  // NOLINTNEXTLINE(bugprone-unused-return-value): CLI11 returns the option for chaining
  app.add_option_function<std::string>(
         "--identity-from",
         [&options](const std::string& text) {
           auto source = ParseIdentitySource(text);
           if (!source.ok()) throw CLI::ValidationError(std::string(source.status().message()));
           options.source = *source;
         },
         "Read a peer's identity from its certificate's CN or its DNS SANs: cn|san (default cn)")
      ->group("Security");
  if (controller_identity_flag) {
    app.add_option("--controller-identity", options.controller_identities,
                   "Identities allowed to drive this agent (comma-separated)")
        ->delimiter(',')
        ->capture_default_str()
        ->group("Security");
  }
  app.add_option("--operator-identity", options.operator_identities,
                 controller_identity_flag
                     ? "Identities allowed the read-only calls (comma-separated)"
                     : "Identities allowed the campaign and agent-list calls (comma-separated)")
      ->delimiter(',')
      ->capture_default_str()
      ->group("Security");
}

absl::Status ValidateAuthzOptions(const AuthzOptions& options) {
  for (const auto& [flag, list] :
       {std::pair{"--controller-identity", &options.controller_identities},
        std::pair{"--operator-identity", &options.operator_identities}}) {
    if (list->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": empty list"));
    for (const std::string& name : *list) {
      if (absl::StripAsciiWhitespace(name).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": an empty identity"));
      }
    }
  }
  return absl::OkStatus();
}

Authorizer::Authorizer(std::string service, MethodRoles roles, AuthzOptions options)
    : service_(std::move(service)), roles_(std::move(roles)), options_(std::move(options)) {}

absl::Status Authorizer::Check(absl::string_view method, const PeerIdentity& peer,
                               absl::string_view claimed_node) const {
  if (!options_.enforce) return absl::OkStatus();
  const std::string rpc = absl::StrCat(service_, "/", method);
  const char* from = IdentitySourceName(options_.source);
  if (!peer.authenticated) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, ": the caller presented no verified certificate"));
  }
  auto it = roles_.find(method);
  if (it == roles_.end()) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, ": no identity may call it"));
  }
  std::vector<std::string> expected;
  for (Role role : it->second) {
    switch (role) {
      case Role::kController:
      case Role::kOperator: {
        const auto& allowed = role == Role::kController ? options_.controller_identities
                                                        : options_.operator_identities;
        for (const std::string& id : allowed) {
          if (peer.Is(id)) return absl::OkStatus();
        }
        expected.push_back(absl::StrCat(role == Role::kController ? "controller" : "operator", " ",
                                        from, " ", Quoted(allowed)));
        break;
      }
      case Role::kNode: {
        // A node name that is also an operator's or the controller's identity
        // would let that certificate pose as an agent.
        bool reserved = false;
        for (const auto* list : {&options_.controller_identities, &options_.operator_identities}) {
          reserved = reserved || std::find(list->begin(), list->end(), claimed_node) != list->end();
        }
        if (!claimed_node.empty() && !reserved && peer.Is(claimed_node)) {
          return absl::OkStatus();
        }
        expected.push_back(reserved
                               ? absl::StrCat("a node name, and \"", ClipForMessage(claimed_node),
                                              "\" is the identity of an operator or the controller")
                               : absl::StrCat("the agent certificate of the node it names (", from,
                                              " \"", ClipForMessage(claimed_node), "\")"));
        break;
      }
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(rpc, ": caller ", peer.Describe(options_.source),
                                                  " is not allowed; expected ",
                                                  absl::StrJoin(expected, " or ")));
}

absl::Status Authorizer::Check(absl::string_view method, const grpc::ServerContextBase& ctx,
                               absl::string_view claimed_node) const {
  if (!options_.enforce) return absl::OkStatus();
  absl::Status s = Check(method, PeerIdentityOf(ctx, options_.source), claimed_node);
  // Names and addresses only: a certificate's identity is not a secret.
  if (!s.ok()) spdlog::warn("denied a call from {}: {}", ctx.peer(), std::string(s.message()));
  return s;
}

}  // namespace crest
