// Who may call the controller, over real mutual TLS on loopback: an
// in-process ControllerServer with certificates from throwaway CAs. Agents
// register and heartbeat only under their own certificate's name, never over
// a static agent; campaign calls come only from operators. Then every
// Controller method with hostile requests: a clear status, nothing stored.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"

#include "common/grpc_status.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/tls_callers.h"
#include "controller/server.h"
#include "crest/v1/controller.grpc.pb.h"

namespace crest::controller {
namespace {

using crest::testing::CertFiles;
using crest::testing::LeafOptions;
using crest::testing::SetTestDeadline;
using crest::testing::TestCa;
using crest::testing::TlsCallers;
using ::testing::HasSubstr;
using Stub = crest::v1::Controller::Stub;

constexpr const char* kOperatorCalls[] = {"ListAgents",       "CreateCampaign", "GetCampaign",
                                          "ListCampaigns",    "WatchCampaign",  "CancelCampaign",
                                          "GetCampaignReport"};

crest::v1::RegisterAgentRequest Registration(const std::string& node, const std::string& address) {
  crest::v1::RegisterAgentRequest r;
  r.set_node_name(node);
  r.set_advertise_address(address);
  return r;
}

grpc::Status Register(Stub& stub, const crest::v1::RegisterAgentRequest& r) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  crest::v1::RegisterAgentReply reply;
  return stub.RegisterAgent(&ctx, r, &reply);
}

grpc::Status Heartbeat(Stub& stub, const std::string& node, bool* known = nullptr,
                       int daemon_state = 0) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  crest::v1::HeartbeatRequest r;
  r.set_node_name(node);
  r.set_daemon_state(static_cast<crest::v1::DaemonState>(daemon_state));
  crest::v1::HeartbeatReply reply;
  grpc::Status s = stub.Heartbeat(&ctx, r, &reply);
  if (known != nullptr) *known = reply.known();
  return s;
}

// One call of each operator method; CreateCampaign with an invalid spec and
// the others on an unknown id, so nothing changes even when allowed.
std::map<std::string, grpc::Status> CallEachOperatorMethod(Stub& stub) {
  std::map<std::string, grpc::Status> out;
  crest::v1::Campaign campaign;
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::ListAgentsReply reply;
    out["ListAgents"] = stub.ListAgents(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    out["CreateCampaign"] = stub.CreateCampaign(&ctx, {}, &campaign);
  }
  crest::v1::GetCampaignRequest get;
  get.set_id("c404");
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    out["GetCampaign"] = stub.GetCampaign(&ctx, get, &campaign);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::ListCampaignsReply reply;
    out["ListCampaigns"] = stub.ListCampaigns(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::WatchCampaignRequest watch;
    watch.set_id("c404");
    auto reader = stub.WatchCampaign(&ctx, watch);
    while (reader->Read(&campaign)) {
    }
    out["WatchCampaign"] = reader->Finish();
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::CancelCampaignRequest cancel;
    cancel.set_id("c404");
    out["CancelCampaign"] = stub.CancelCampaign(&ctx, cancel, &campaign);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::GetCampaignReportRequest report;
    report.set_id("c404");
    crest::v1::CampaignReport reply;
    out["GetCampaignReport"] = stub.GetCampaignReport(&ctx, report, &reply);
  }
  return out;
}

class ControllerAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = TestCa::Create(dir_.path(), "crest");
    auto other = TestCa::Create(dir_.path(), "other");
    CREST_ASSERT_OK(ca);
    CREST_ASSERT_OK(other);
    ca_ = std::make_unique<TestCa>(*ca);
    other_ = std::make_unique<TestCa>(*other);
    auto cert = ca_->Issue("crest-controller");
    CREST_ASSERT_OK(cert);
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.state_dir = dir_.path() + "/state";
    options.tls = {false, cert->cert, cert->key, ca_->ca_file(), ""};
    // Never dialled in these tests: a static agent's entry is what is at stake.
    options.static_agents = {{"static-1", "127.0.0.1:9"}};
    auto server = ControllerServer::Start(options);
    CREST_ASSERT_OK(server);
    server_ = std::move(*server);
    operator_ = As("crest-cli");
  }

  TlsCallers Callers() const {
    return TlsCallers(ca_.get(), absl::StrCat("127.0.0.1:", server_->port()));
  }
  std::unique_ptr<Stub> As(const CertFiles& cert) {
    return crest::v1::Controller::NewStub(Callers().With(cert));
  }
  std::unique_ptr<Stub> As(const std::string& identity) {
    return crest::v1::Controller::NewStub(Callers().As(identity));
  }
  std::unique_ptr<Stub> WithoutCertificate() {
    return crest::v1::Controller::NewStub(Callers().WithoutCertificate());
  }

  // node -> address, as the operator sees the registry.
  std::map<std::string, std::string> Agents() {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::ListAgentsReply reply;
    grpc::Status s = operator_->ListAgents(&ctx, {}, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<std::string, std::string> out;
    for (const auto& a : reply.agents()) out[a.node_name()] = a.address();
    return out;
  }
  int Campaigns() {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::ListCampaignsReply reply;
    EXPECT_TRUE(operator_->ListCampaigns(&ctx, {}, &reply).ok());
    return reply.campaigns_size();
  }

  crest::testing::TempDir dir_;
  std::unique_ptr<TestCa> ca_;
  std::unique_ptr<TestCa> other_;
  std::unique_ptr<ControllerServer> server_;
  std::unique_ptr<Stub> operator_;
};

TEST_F(ControllerAuthzTest, AnAgentRegistersAndHeartbeatsUnderItsOwnNameOnly) {
  auto node1 = As("node-1");
  ASSERT_TRUE(Register(*node1, Registration("node-1", "127.0.0.1:7001")).ok());
  bool known = false;
  ASSERT_TRUE(Heartbeat(*node1, "node-1", &known).ok());
  EXPECT_TRUE(known);

  // node-1's certificate claiming node-2: refused, naming what was expected.
  grpc::Status as_other = Register(*node1, Registration("node-2", "127.0.0.1:6666"));
  EXPECT_EQ(as_other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(as_other.error_message(),
            "crest.v1.Controller/RegisterAgent: caller CN \"node-1\" is not allowed; expected the "
            "agent certificate of the node it names (CN \"node-2\")");
  EXPECT_EQ(Heartbeat(*node1, "node-2").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // node-2's certificate cannot re-point node-1 either.
  auto node2 = As("node-2");
  EXPECT_EQ(Register(*node2, Registration("node-1", "127.0.0.1:6666")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Heartbeat(*node2, "node-1").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Neither may the operator's or the controller's own certificate pose as a node.
  for (const char* identity : {"crest-cli", "crest-controller"}) {
    EXPECT_EQ(Register(*As(identity), Registration(identity, "127.0.0.1:6666")).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << identity;
  }
  EXPECT_EQ(Agents(), (std::map<std::string, std::string>{{"node-1", "127.0.0.1:7001"},
                                                          {"static-1", "127.0.0.1:9"}}));

  // The same node after a restart, on a new port: its own entry is replaced.
  auto node1_again = As("node-1");
  ASSERT_TRUE(Register(*node1_again, Registration("node-1", "127.0.0.1:7002")).ok());
  EXPECT_EQ(Agents().at("node-1"), "127.0.0.1:7002");
}

TEST_F(ControllerAuthzTest, ARegistrationNeverReplacesAStaticAgent) {
  // Even with the static node's own certificate.
  grpc::Status s = Register(*As("static-1"), Registration("static-1", "127.0.0.1:6666"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("static-1 is a static agent of this controller"));
  EXPECT_EQ(Agents().at("static-1"), "127.0.0.1:9");
}

TEST_F(ControllerAuthzTest, CampaignCallsOnlyFromAnOperator) {
  for (const auto& [method, status] : CallEachOperatorMethod(*operator_)) {
    EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << method << ": " << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE) << method;
  }
  for (const char* identity : {"node-1", "crest-controller"}) {
    std::map<std::string, grpc::Status> got = CallEachOperatorMethod(*As(identity));
    for (const char* method : kOperatorCalls) {
      EXPECT_EQ(got[method].error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
      EXPECT_EQ(got[method].error_message(),
                absl::StrCat("crest.v1.Controller/", method, ": caller CN \"", identity,
                             "\" is not allowed; expected operator CN \"crest-cli\""));
    }
  }
  EXPECT_EQ(Campaigns(), 0);
}

TEST_F(ControllerAuthzTest, NoCertificateAnExpiredOneOrAnotherCasAreRefusedAtTheHandshake) {
  auto expired = ca_->Issue("crest-cli", LeafOptions{true, ""}, "expired-cli");
  auto expired_node = ca_->Issue("node-1", LeafOptions{true, ""}, "expired-node");
  auto foreign = other_->Issue("crest-cli");
  auto foreign_node = other_->Issue("node-1");
  CREST_ASSERT_OK(expired);
  CREST_ASSERT_OK(expired_node);
  CREST_ASSERT_OK(foreign);
  CREST_ASSERT_OK(foreign_node);
  std::vector<std::pair<std::string, std::unique_ptr<Stub>>> callers;
  callers.emplace_back("no certificate", WithoutCertificate());
  callers.emplace_back("expired operator", As(*expired));
  callers.emplace_back("expired node", As(*expired_node));
  callers.emplace_back("operator of another CA", As(*foreign));
  callers.emplace_back("node of another CA", As(*foreign_node));
  for (auto& [who, stub] : callers) {
    for (const auto& [method, status] : CallEachOperatorMethod(*stub)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << who << " " << method;
    }
    EXPECT_EQ(Register(*stub, Registration("node-1", "127.0.0.1:6666")).error_code(),
              grpc::StatusCode::UNAVAILABLE)
        << who;
    EXPECT_EQ(Heartbeat(*stub, "node-1").error_code(), grpc::StatusCode::UNAVAILABLE) << who;
  }
  EXPECT_EQ(Agents(), (std::map<std::string, std::string>{{"static-1", "127.0.0.1:9"}}));
}

TEST_F(ControllerAuthzTest, HealthStaysOpenToEveryCertificateOfTheCa) {
  for (const char* identity : {"node-7", "crest-cli", "crest-controller"}) {
    auto cert = ca_->Issue(identity);
    CREST_ASSERT_OK(cert);
    auto health = grpc::health::v1::Health::NewStub(Callers().With(*cert));
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    grpc::health::v1::HealthCheckResponse reply;
    grpc::Status status = health->Check(&ctx, {}, &reply);
    ASSERT_TRUE(status.ok()) << identity << ": " << status.error_message();
    EXPECT_EQ(reply.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

// ---- Hostile input, method by method ----

void ExpectRefused(const grpc::Status& status, grpc::StatusCode code, const std::string& field,
                   const std::string& what) {
  EXPECT_EQ(status.error_code(), code) << what << ": " << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(field)) << what;
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 40) << what;
}

TEST_F(ControllerAuthzTest, HostileRegistrationsAndHeartbeats) {
  auto node1 = As("node-1");
  std::vector<
      std::tuple<std::string, std::string, std::function<void(crest::v1::RegisterAgentRequest*)>>>
      cases = {
          {"no address", "advertise_address", [](auto* r) { r->clear_advertise_address(); }},
          {"a port out of range", "advertise_address",
           [](auto* r) { r->set_advertise_address("127.0.0.1:99999"); }},
          {"1 MiB of address", "advertise_address",
           [](auto* r) { r->set_advertise_address(std::string(1 << 20, 'a') + ":1"); }},
          {"100k labels", "labels",
           [](auto* r) {
             for (int i = 0; i < 100000; ++i) (*r->mutable_labels())[absl::StrCat("k", i)] = "v";
           }},
          {"a 2 MiB label", "labels",
           [](auto* r) { (*r->mutable_labels())["model"] = std::string(2 << 20, 'v'); }},
          {"50k parameter limits", "parameter_limits",
           [](auto* r) {
             for (int i = 0; i < 50000; ++i) r->add_parameter_limits()->set_key("maxBatchSize");
           }},
          {"an inverted limit", "benchmark_limits",
           [](auto* r) {
             auto* l = r->add_benchmark_limits();
             l->set_key("concurrency");
             l->set_min(5);
             l->set_max(-5);
           }},
      };
  for (const auto& [what, field, make] : cases) {
    crest::v1::RegisterAgentRequest r = Registration("node-1", "127.0.0.1:7001");
    make(&r);
    ExpectRefused(Register(*node1, r), grpc::StatusCode::INVALID_ARGUMENT, field, what);
  }
  // A 3 MiB node name is nobody's certificate.
  ExpectRefused(Register(*node1, Registration(std::string(3 << 20, 'n'), "127.0.0.1:7001")),
                grpc::StatusCode::PERMISSION_DENIED, "bytes)", "a 3 MiB node name");
  ExpectRefused(Heartbeat(*node1, ""), grpc::StatusCode::PERMISSION_DENIED, "Heartbeat",
                "a heartbeat without a name");
  EXPECT_EQ(Agents(), (std::map<std::string, std::string>{{"static-1", "127.0.0.1:9"}}));
  // Heard from before registering (with a daemon state out of its enum):
  // unknown, so it must register; nothing is created.
  bool known = true;
  ASSERT_TRUE(Heartbeat(*node1, "node-1", &known, 99).ok());
  EXPECT_FALSE(known);
  EXPECT_EQ(Agents().size(), 1u);
}

TEST_F(ControllerAuthzTest, HostileCampaignRequests) {
  using crest::v1::CampaignSpec;
  std::vector<std::tuple<std::string, std::string, std::function<void(CampaignSpec*)>>> cases = {
      {"no spec", "name", [](auto*) {}},
      {"a 2 MiB name", "name", [](auto* s) { s->set_name(std::string(2 << 20, 'n')); }},
      {"10k models", "models",
       [](auto* s) {
         s->set_name("x");
         for (int i = 0; i < 10000; ++i) s->add_models()->set_name(absl::StrCat("m", i));
       }},
      {"100k nodes", "models[0].nodes",
       [](auto* s) {
         s->set_name("x");
         auto* m = s->add_models();
         m->set_name("LLaMa3-8B");
         for (int i = 0; i < 100000; ++i) m->add_nodes(absl::StrCat("n", i));
       }},
      {"an unknown strategy of 1 MiB", "search.strategy",
       [](auto* s) {
         s->set_name("x");
         s->add_models()->set_name("LLaMa3-8B");
         s->mutable_search()->set_strategy(std::string(1 << 20, 's'));
       }},
      {"an out-of-range batch", "search.range",
       [](auto* s) {
         s->set_name("x");
         s->add_models()->set_name("LLaMa3-8B");
         s->mutable_search()->set_range_lo(0);
         s->mutable_search()->set_range_hi(1u << 31);
       }},
      {"an enum out of range", "client",
       [](auto* s) {
         s->set_name("x");
         s->add_models()->set_name("LLaMa3-8B");
         s->mutable_client()->set_api(static_cast<crest::v1::BenchmarkApi>(77));
       }},
  };
  for (const auto& [what, field, make] : cases) {
    crest::v1::CreateCampaignRequest request;
    make(request.mutable_spec());
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::Campaign reply;
    ExpectRefused(operator_->CreateCampaign(&ctx, request, &reply),
                  grpc::StatusCode::INVALID_ARGUMENT, field, what);
  }
  // Ids that name nothing: missing, 2 MiB, made of path characters.
  for (const std::string& id : {std::string(), std::string(2 << 20, 'c'), std::string("../c1")}) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::CancelCampaignRequest cancel;
    cancel.set_id(id);
    crest::v1::Campaign reply;
    grpc::Status s = operator_->CancelCampaign(&ctx, cancel, &reply);
    grpc::ClientContext get_ctx;
    SetTestDeadline(&get_ctx);
    crest::v1::GetCampaignRequest get;
    get.set_id(id);
    grpc::Status g = operator_->GetCampaign(&get_ctx, get, &reply);
    EXPECT_TRUE(g.error_code() == grpc::StatusCode::NOT_FOUND ||
                g.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << g.error_code();
    EXPECT_LE(g.error_message().size(), kMaxStatusMessageBytes + 40);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::NOT_FOUND ||
                s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_code() << " " << s.error_message().substr(0, 200);
    EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes + 40);
    grpc::ClientContext watch_ctx;
    SetTestDeadline(&watch_ctx);
    crest::v1::WatchCampaignRequest watch;
    watch.set_id(id);
    auto reader = operator_->WatchCampaign(&watch_ctx, watch);
    EXPECT_FALSE(reader->Read(&reply));
    grpc::Status w = reader->Finish();
    EXPECT_TRUE(w.error_code() == grpc::StatusCode::NOT_FOUND ||
                w.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << w.error_code();
    grpc::ClientContext report_ctx;
    SetTestDeadline(&report_ctx);
    crest::v1::GetCampaignReportRequest report;
    report.set_id(id);
    crest::v1::CampaignReport report_reply;
    grpc::Status r = operator_->GetCampaignReport(&report_ctx, report, &report_reply);
    EXPECT_TRUE(r.error_code() == grpc::StatusCode::NOT_FOUND ||
                r.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << r.error_code();
  }
  EXPECT_EQ(Campaigns(), 0);
}

}  // namespace
}  // namespace crest::controller
