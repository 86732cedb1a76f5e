// Who may call which RPC: the identity read from the caller's verified
// certificate (its CN or its DNS SANs) and the table method -> roles that
// each server checks at the top of every handler (docs/decisions/0013).
#pragma once

#include <grpcpp/server_context.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own namespace
class App;
}  // namespace CLI

namespace crest {

// Where a certificate's identity is read from (--identity-from cn|san).
enum class IdentitySource { kCommonName, kDnsSan };
absl::StatusOr<IdentitySource> ParseIdentitySource(absl::string_view text);
const char* IdentitySourceName(IdentitySource source);  // "CN" or "SAN"

// The caller as its certificate names it: one name (CN) or several (DNS
// SANs); none when the peer presented no verified certificate.
struct PeerIdentity {
  bool authenticated = false;
  std::vector<std::string> names;

  bool Is(absl::string_view identity) const;
  // "CN \"crest-cli\"", "SAN [\"a\", \"b\"]", or "no verified certificate".
  std::string Describe(IdentitySource source) const;
};

// Reads the identity from a server call's auth context.
PeerIdentity PeerIdentityOf(const grpc::ServerContextBase& ctx, IdentitySource source);

// kNode: the caller's identity must equal the node name the request claims.
enum class Role { kController, kOperator, kNode };

// Method name (as in the .proto, "RegisterAgent") -> the roles allowed.
using MethodRoles = std::map<std::string, std::vector<Role>, std::less<>>;

// The tables of docs/reliability.md, "Only the right identity may call each RPC".
MethodRoles NodeAgentMethodRoles();
MethodRoles ControllerMethodRoles();

struct AuthzOptions {
  // Off only with --insecure: there is no certificate to read.
  bool enforce = true;
  IdentitySource source = IdentitySource::kCommonName;
  std::vector<std::string> controller_identities = {"crest-controller"};
  std::vector<std::string> operator_identities = {"crest-cli"};
};

// --identity-from, --operator-identity, and (agent) --controller-identity.
void AddAuthzFlags(CLI::App& app, AuthzOptions& options, bool controller_identity_flag);
// Every list non-empty, no empty name.
absl::Status ValidateAuthzOptions(const AuthzOptions& options);

class Authorizer {
 public:
  // `service` names the service in messages ("crest.v1.NodeAgent").
  Authorizer(std::string service, MethodRoles roles, AuthzOptions options);

  // OK when `peer` holds a role `method` allows; otherwise UNAUTHENTICATED
  // (no verified certificate) or PERMISSION_DENIED naming the method, the
  // identity seen and the identities expected. `claimed_node` is the node
  // name the request claims, for kNode. Methods not in the table are denied.
  absl::Status Check(absl::string_view method, const PeerIdentity& peer,
                     absl::string_view claimed_node = "") const;
  // The same for a server call; logs a denial with the caller's address.
  absl::Status Check(absl::string_view method, const grpc::ServerContextBase& ctx,
                     absl::string_view claimed_node = "") const;

  const AuthzOptions& options() const { return options_; }

 private:
  std::string service_;
  MethodRoles roles_;
  AuthzOptions options_;
};

}  // namespace crest
