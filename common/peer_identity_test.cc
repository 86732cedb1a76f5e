// The authorisation rules without a network: identities in, statuses out.
#include "common/peer_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "common/testing/status_matchers.h"
#include "crest/v1/agent.grpc.pb.h"
#include "crest/v1/controller.grpc.pb.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

PeerIdentity Cert(std::vector<std::string> names) { return {true, std::move(names)}; }

Authorizer Agent(AuthzOptions options = {}) {
  return Authorizer("crest.v1.NodeAgent", NodeAgentMethodRoles(), std::move(options));
}
Authorizer Controller(AuthzOptions options = {}) {
  return Authorizer("crest.v1.Controller", ControllerMethodRoles(), std::move(options));
}

// A table that forgot a method would deny it to everyone (safe, but broken):
// every method of both services has an entry, and no entry names a method
// that does not exist.
TEST(MethodRolesTest, CoverExactlyTheMethodsOfEachService) {
  for (const auto& [descriptor, roles] :
       {std::pair{
            crest::v1::GetNodeInfoRequest::descriptor()->file()->FindServiceByName("NodeAgent"),
            NodeAgentMethodRoles()},
        std::pair{
            crest::v1::RegisterAgentRequest::descriptor()->file()->FindServiceByName("Controller"),
            ControllerMethodRoles()}}) {
    ASSERT_NE(descriptor, nullptr);
    std::set<std::string> methods;
    for (int i = 0; i < descriptor->method_count(); ++i) {
      methods.insert(descriptor->method(i)->name());
      EXPECT_EQ(roles.count(descriptor->method(i)->name()), 1u) << descriptor->method(i)->name();
    }
    for (const auto& [method, allowed] : roles) {
      EXPECT_EQ(methods.count(method), 1u) << method;
      EXPECT_FALSE(allowed.empty()) << method;
    }
  }
}

TEST(AuthorizerTest, AgentNodeCallsOnlyFromTheController) {
  Authorizer authz = Agent();
  for (const char* method :
       {"ApplyHostTuning", "RestoreHostTuning", "StartDaemon", "StopDaemon", "RunBenchmark"}) {
    CREST_EXPECT_OK(authz.Check(method, Cert({"crest-controller"})));
    EXPECT_THAT(authz.Check(method, Cert({"crest-cli"})),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         absl::StrCat("crest.v1.NodeAgent/", method,
                                      ": caller CN \"crest-cli\" is not allowed; expected "
                                      "controller CN \"crest-controller\"")));
    EXPECT_THAT(authz.Check(method, Cert({"node-1"})),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
}

TEST(AuthorizerTest, AgentReadsAlsoFromAnOperator) {
  Authorizer authz = Agent();
  for (const char* method : {"GetNodeInfo", "GetDaemonStatus"}) {
    CREST_EXPECT_OK(authz.Check(method, Cert({"crest-controller"})));
    CREST_EXPECT_OK(authz.Check(method, Cert({"crest-cli"})));
    EXPECT_THAT(authz.Check(method, Cert({"node-2"})),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("expected controller CN \"crest-controller\" or operator CN "
                                   "\"crest-cli\"")));
  }
}

TEST(AuthorizerTest, ListsOfIdentities) {
  AuthzOptions options;
  options.controller_identities = {"ctl-a", "ctl-b"};
  options.operator_identities = {"alice", "bob"};
  Authorizer authz = Agent(options);
  CREST_EXPECT_OK(authz.Check("StartDaemon", Cert({"ctl-b"})));
  EXPECT_THAT(authz.Check("StartDaemon", Cert({"crest-controller"})),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("expected controller CN \"ctl-a\", \"ctl-b\"")));
  CREST_EXPECT_OK(authz.Check("GetNodeInfo", Cert({"bob"})));
  EXPECT_THAT(authz.Check("StopDaemon", Cert({"bob"})),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST(AuthorizerTest, RegistrationOnlyUnderTheNodesOwnName) {
  Authorizer authz = Controller();
  for (const char* method : {"RegisterAgent", "Heartbeat"}) {
    CREST_EXPECT_OK(authz.Check(method, Cert({"node-1"}), "node-1"));
    EXPECT_THAT(authz.Check(method, Cert({"node-1"}), "node-2"),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         absl::StrCat("crest.v1.Controller/", method,
                                      ": caller CN \"node-1\" is not allowed; expected the agent "
                                      "certificate of the node it names (CN \"node-2\")")));
    EXPECT_THAT(authz.Check(method, Cert({"node-1"}), ""),
                StatusIs(absl::StatusCode::kPermissionDenied));
    // The operator's and the controller's own certificates cannot pose as nodes.
    for (const char* reserved : {"crest-cli", "crest-controller"}) {
      EXPECT_THAT(authz.Check(method, Cert({reserved}), reserved),
                  StatusIs(absl::StatusCode::kPermissionDenied,
                           HasSubstr("is the identity of an operator or the controller")));
    }
  }
}

TEST(AuthorizerTest, CampaignCallsOnlyFromOperators) {
  Authorizer authz = Controller();
  for (const char* method : {"CreateCampaign", "CancelCampaign", "GetCampaign", "ListCampaigns",
                             "WatchCampaign", "GetCampaignReport", "ListAgents"}) {
    CREST_EXPECT_OK(authz.Check(method, Cert({"crest-cli"})));
    EXPECT_THAT(authz.Check(method, Cert({"node-1"})),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("expected operator CN \"crest-cli\"")));
    EXPECT_THAT(authz.Check(method, Cert({"crest-controller"})),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
}

TEST(AuthorizerTest, NoCertificateIsUnauthenticated) {
  EXPECT_THAT(Agent().Check("GetNodeInfo", PeerIdentity{}),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       "crest.v1.NodeAgent/GetNodeInfo: the caller presented no verified "
                       "certificate"));
}

TEST(AuthorizerTest, UnknownMethodsAreDenied) {
  EXPECT_THAT(Agent().Check("Reboot", Cert({"crest-controller"})),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "crest.v1.NodeAgent/Reboot: no identity may call it"));
}

TEST(AuthorizerTest, SanModeMatchesAnyDnsName) {
  AuthzOptions options;
  options.source = IdentitySource::kDnsSan;
  Authorizer authz = Controller(options);
  CREST_EXPECT_OK(authz.Check("RegisterAgent", Cert({"localhost", "node-1"}), "node-1"));
  EXPECT_THAT(authz.Check("RegisterAgent", Cert({"localhost", "node-1"}), "node-2"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("caller SAN [\"localhost\", \"node-1\"] is not allowed")));
}

TEST(AuthorizerTest, HugeClaimedNamesAreCutInMessages) {
  std::string huge(1 << 20, 'n');
  absl::Status s = Controller().Check("RegisterAgent", Cert({"node-1"}), huge);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_LT(s.message().size(), 400u);
  EXPECT_THAT(s.message(), HasSubstr("(1048576 bytes)"));
}

TEST(AuthorizerTest, NotEnforcedWithoutTls) {
  AuthzOptions options;
  options.enforce = false;
  CREST_EXPECT_OK(Agent(options).Check("StartDaemon", PeerIdentity{}));
}

TEST(AuthzFlagsTest, ListsAndSource) {
  CLI::App app;
  AuthzOptions options;
  AddAuthzFlags(app, options, true);
  // CLI11 takes the arguments last first.
  app.parse(std::vector<std::string>{"san", "--identity-from", "ctl-a,ctl-b",
                                     "--controller-identity", "op", "--operator-identity"});
  EXPECT_EQ(options.source, IdentitySource::kDnsSan);
  EXPECT_EQ(options.controller_identities, (std::vector<std::string>{"ctl-a", "ctl-b"}));
  EXPECT_EQ(options.operator_identities, (std::vector<std::string>{"op"}));
  CREST_EXPECT_OK(ValidateAuthzOptions(options));

  CLI::App bad;
  AuthzOptions defaults;
  AddAuthzFlags(bad, defaults, false);
  EXPECT_THROW(bad.parse(std::vector<std::string>{"ou", "--identity-from"}), CLI::ParseError);
  EXPECT_EQ(defaults.controller_identities, (std::vector<std::string>{"crest-controller"}));
  EXPECT_EQ(defaults.operator_identities, (std::vector<std::string>{"crest-cli"}));
  defaults.operator_identities = {""};
  EXPECT_THAT(ValidateAuthzOptions(defaults), StatusIs(absl::StatusCode::kInvalidArgument,
                                                       "--operator-identity: an empty identity"));
}

}  // namespace
}  // namespace crest
