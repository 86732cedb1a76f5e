// Who may call the node agent, over real mutual TLS on loopback: an
// in-process AgentServer with certificates from throwaway CAs. Then every
// NodeAgent method with hostile requests: each gets a clear status, and
// nothing changes on the (fake) host.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"

#include "agent/agent_server.h"
#include "agent/testing/fake_sysfs.h"
#include "common/grpc_status.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/tls_callers.h"
#include "crest/v1/agent.grpc.pb.h"
#include "tests/agent/agent_test_util.h"

namespace crest::agent {
namespace {

using crest::testing::CertFiles;
using crest::testing::LeafOptions;
using crest::testing::SetTestDeadline;
using crest::testing::TestCa;
using crest::testing::TlsCallers;
using ::testing::HasSubstr;
using Stub = crest::v1::NodeAgent::Stub;

constexpr const char* kNodeCalls[] = {"ApplyHostTuning", "RestoreHostTuning", "StartDaemon",
                                      "StopDaemon", "RunBenchmark"};
constexpr const char* kReadCalls[] = {"GetNodeInfo", "GetDaemonStatus"};

template <typename Event>
grpc::Status Drain(grpc::ClientReader<Event>* reader) {
  Event e;
  while (reader->Read(&e)) {
  }
  return reader->Finish();
}

// One call of each NodeAgent method with a request that changes nothing even
// when allowed (a governor the host lacks, an unknown override key, an API
// value out of range), so a test can call them all as anyone.
std::map<std::string, grpc::Status> CallEach(Stub& stub) {
  std::map<std::string, grpc::Status> out;
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::NodeInfo reply;
    out["GetNodeInfo"] = stub.GetNodeInfo(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::DaemonStatus reply;
    out["GetDaemonStatus"] = stub.GetDaemonStatus(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::ApplyHostTuningRequest request;
    request.set_governor("ondemand-nonexistent");
    crest::v1::HostTuningReply reply;
    out["ApplyHostTuning"] = stub.ApplyHostTuning(&ctx, request, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::HostTuningReply reply;
    out["RestoreHostTuning"] = stub.RestoreHostTuning(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::StartDaemonRequest request;
    request.add_overrides()->set_key("notAScheduleKey");
    out["StartDaemon"] = Drain(stub.StartDaemon(&ctx, request).get());
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::StopDaemonReply reply;
    out["StopDaemon"] = stub.StopDaemon(&ctx, {}, &reply);
  }
  {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::RunBenchmarkRequest request;
    request.mutable_spec()->set_api(static_cast<crest::v1::BenchmarkApi>(99));
    out["RunBenchmark"] = Drain(stub.RunBenchmark(&ctx, request).get());
  }
  return out;
}

class AgentAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeSysfs(dir_.path() + "/sys", {});
    CREST_ASSERT_OK(testing::WriteSimConfigJson(dir_.path() + "/mindie", sim_ports_));
    std::ofstream(dir_.File("agent.yaml"))
        << "daemon: {binary: /nonexistent/daemon, install_dir: " << dir_.path() << "/mindie}\n";
    auto ca = TestCa::Create(dir_.path(), "crest");
    auto other = TestCa::Create(dir_.path(), "other");
    CREST_ASSERT_OK(ca);
    CREST_ASSERT_OK(other);
    ca_ = std::make_unique<TestCa>(*ca);
    other_ = std::make_unique<TestCa>(*other);
  }

  void StartAgent(AuthzOptions authz = {}) {
    auto cert = ca_->Issue("node-1");
    CREST_ASSERT_OK(cert);
    AgentServerOptions options;
    options.listen = "127.0.0.1:0";
    options.tls = {false, cert->cert, cert->key, ca_->ca_file(), ""};
    options.authz = std::move(authz);
    options.state_dir = dir_.path() + "/state";
    options.sysfs_root = dir_.path() + "/sys";
    options.config_path = dir_.File("agent.yaml");
    options.node_name = "node-1";
    auto server = AgentServer::Start(options);
    CREST_ASSERT_OK(server);
    server_ = std::move(*server);
  }

  TlsCallers Callers() const { return TlsCallers(ca_.get(), server_->bound_address()); }
  std::unique_ptr<Stub> As(const CertFiles& cert) {
    return crest::v1::NodeAgent::NewStub(Callers().With(cert));
  }
  std::unique_ptr<Stub> As(const std::string& identity) {
    return crest::v1::NodeAgent::NewStub(Callers().As(identity));
  }
  std::unique_ptr<Stub> WithoutCertificate() {
    return crest::v1::NodeAgent::NewStub(Callers().WithoutCertificate());
  }

  std::string Governor() {
    return testing::ReadFakeFile(dir_.path() +
                                 "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  }

  crest::testing::TempDir dir_;
  std::vector<PortReservation> sim_ports_;  // config.json's, held for the test
  std::unique_ptr<TestCa> ca_;
  std::unique_ptr<TestCa> other_;
  std::unique_ptr<AgentServer> server_;
};

TEST_F(AgentAuthzTest, TheControllerIdentityMayCallEverything) {
  StartAgent();
  auto stub = As("crest-controller");
  for (const auto& [method, status] : CallEach(*stub)) {
    EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << method << ": " << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE) << method;
  }
  EXPECT_EQ(Governor(), "powersave");
}

TEST_F(AgentAuthzTest, AnOperatorMayOnlyRead) {
  StartAgent();
  auto stub = As("crest-cli");
  std::map<std::string, grpc::Status> got = CallEach(*stub);
  for (const char* method : kReadCalls) EXPECT_TRUE(got[method].ok()) << method;
  for (const char* method : kNodeCalls) {
    EXPECT_EQ(got[method].error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
    EXPECT_EQ(got[method].error_message(),
              absl::StrCat("crest.v1.NodeAgent/", method,
                           ": caller CN \"crest-cli\" is not allowed; expected controller CN "
                           "\"crest-controller\""));
  }
}

TEST_F(AgentAuthzTest, TheRightCaButAnotherRoleIsRefused) {
  StartAgent();
  // Another node's certificate, and this node's own: neither is the controller.
  for (const char* identity : {"node-2", "node-1"}) {
    auto stub = As(identity);
    for (const auto& [method, status] : CallEach(*stub)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
      EXPECT_THAT(status.error_message(),
                  HasSubstr(absl::StrCat("caller CN \"", identity, "\" is not allowed")));
    }
  }
  EXPECT_EQ(Governor(), "powersave");
}

TEST_F(AgentAuthzTest, NoCertificateAnExpiredOneOrAnotherCasAreRefusedAtTheHandshake) {
  StartAgent();
  auto expired = ca_->Issue("crest-controller", LeafOptions{true, ""}, "expired");
  auto foreign = other_->Issue("crest-controller");
  CREST_ASSERT_OK(expired);
  CREST_ASSERT_OK(foreign);
  std::vector<std::pair<std::string, std::unique_ptr<Stub>>> callers;
  callers.emplace_back("no certificate", WithoutCertificate());
  callers.emplace_back("expired", As(*expired));
  callers.emplace_back("another CA", As(*foreign));
  for (auto& [who, stub] : callers) {
    for (const auto& [method, status] : CallEach(*stub)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
          << who << " " << method << ": " << status.error_message();
    }
  }
  EXPECT_EQ(Governor(), "powersave");
}

TEST_F(AgentAuthzTest, HealthStaysOpenToEveryCertificateOfTheCa) {
  StartAgent();
  for (const char* identity : {"node-2", "crest-cli", "crest-controller"}) {
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

TEST_F(AgentAuthzTest, IdentitiesAreConfigurableAndReadFromTheSanOnRequest) {
  AuthzOptions authz;
  authz.source = IdentitySource::kDnsSan;
  authz.controller_identities = {"ctl-a", "ctl-b"};
  StartAgent(authz);
  // CN says one thing, the DNS SAN another: only the SAN counts.
  auto by_san = ca_->Issue("someone", LeafOptions{false, "ctl-b"}, "by-san");
  auto by_cn = ca_->Issue("ctl-a", LeafOptions{false, "someone-else"}, "by-cn");
  CREST_ASSERT_OK(by_san);
  CREST_ASSERT_OK(by_cn);
  for (const auto& [method, status] : CallEach(*As(*by_san))) {
    EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
  }
  std::map<std::string, grpc::Status> denied = CallEach(*As(*by_cn));
  EXPECT_EQ(denied["StartDaemon"].error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied["StartDaemon"].error_message(),
              HasSubstr("caller SAN [\"localhost\", \"someone-else\"] is not allowed; expected "
                        "controller SAN \"ctl-a\", \"ctl-b\""));
}

// ---- Hostile input, method by method (as the controller) ----

class AgentHostileInputTest : public AgentAuthzTest {
 protected:
  void SetUp() override {
    AgentAuthzTest::SetUp();
    StartAgent();
    stub_ = As("crest-controller");
  }

  // A refusal as the contract wants it: the code, a message naming `field`,
  // short enough to read, and nothing changed.
  void ExpectRefused(const grpc::Status& status, grpc::StatusCode code, const std::string& field,
                     const std::string& what) {
    EXPECT_EQ(status.error_code(), code) << what << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(field)) << what;
    EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 40) << what;
    EXPECT_EQ(Governor(), "powersave") << what;
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::DaemonStatus daemon;
    ASSERT_TRUE(stub_->GetDaemonStatus(&ctx, {}, &daemon).ok());
    EXPECT_EQ(daemon.state(), crest::v1::DAEMON_STOPPED) << what;
  }

  grpc::Status Start(const crest::v1::StartDaemonRequest& request) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    return Drain(stub_->StartDaemon(&ctx, request).get());
  }
  grpc::Status Bench(const crest::v1::BenchmarkSpec& spec) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::RunBenchmarkRequest request;
    *request.mutable_spec() = spec;
    return Drain(stub_->RunBenchmark(&ctx, request).get());
  }
  grpc::Status Tune(const crest::v1::ApplyHostTuningRequest& request) {
    grpc::ClientContext ctx;
    SetTestDeadline(&ctx);
    crest::v1::HostTuningReply reply;
    return stub_->ApplyHostTuning(&ctx, request, &reply);
  }

  std::unique_ptr<Stub> stub_;
};

TEST_F(AgentHostileInputTest, ApplyHostTuning) {
  crest::v1::ApplyHostTuningRequest r;
  r.set_governor(std::string(2 << 20, 'g'));
  ExpectRefused(Tune(r), grpc::StatusCode::INVALID_ARGUMENT, "governor", "a 2 MiB governor");
  r.set_governor("../../../../etc/passwd");
  ExpectRefused(Tune(r), grpc::StatusCode::INVALID_ARGUMENT, "governor", "a path as governor");
  r.clear_governor();
  r.set_thp("sometimes");
  ExpectRefused(Tune(r), grpc::StatusCode::INVALID_ARGUMENT, "thp", "an unknown THP mode");
}

TEST_F(AgentHostileInputTest, StartDaemon) {
  using crest::v1::StartDaemonRequest;
  std::vector<std::tuple<std::string, std::string, std::function<void(StartDaemonRequest*)>>>
      cases = {
          {"an unknown key", "overrides[0].key",
           [](auto* r) { r->add_overrides()->set_key("rootPath"); }},
          {"a 2 MiB key", "overrides[0].key",
           [](auto* r) { r->add_overrides()->set_key(std::string(2 << 20, 'k')); }},
          {"a fraction for an integer", "maxBatchSize",
           [](auto* r) {
             auto* o = r->add_overrides();
             o->set_key("maxBatchSize");
             o->set_double_value(1.5);
           }},
          {"a negative batch", "maxBatchSize",
           [](auto* r) {
             auto* o = r->add_overrides();
             o->set_key("maxBatchSize");
             o->set_int_value(-1);
           }},
          {"a batch beyond MindIE's range", "maxBatchSize",
           [](auto* r) {
             auto* o = r->add_overrides();
             o->set_key("maxBatchSize");
             o->set_int_value(int64_t{1} << 40);
           }},
          {"100k overrides", "given more than once",
           [](auto* r) {
             for (int i = 0; i < 100000; ++i) {
               auto* o = r->add_overrides();
               o->set_key("maxBatchSize");
               o->set_int_value(100);
             }
           }},
          {"a pinning mode out of range", "pinning.mode",
           [](auto* r) {
             r->mutable_pinning()->set_mode(static_cast<crest::v1::PinningMode>(99));
           }},
          // (A list naming online CPUs among others pins to those online.)
          {"400 KB of CPU ranges no CPU of the host is in", "pinning.cpu_list",
           [](auto* r) {
             r->mutable_pinning()->set_mode(crest::v1::PINNING_CPU_LIST);
             std::string list;
             for (int i = 0; i < 40000; ++i) list += "60000-65535,";
             r->mutable_pinning()->set_cpu_list(list + "65535");
           }},
          {"a CPU beyond any host", "pinning.cpu_list",
           [](auto* r) {
             r->mutable_pinning()->set_mode(crest::v1::PINNING_CPU_LIST);
             r->mutable_pinning()->set_cpu_list("0-4294967295");
           }},
          {"a CPU list without the mode", "pinning.cpu_list",
           [](auto* r) { r->mutable_pinning()->set_cpu_list("0"); }},
          {"a negative start timeout", "start_timeout",
           [](auto* r) { r->mutable_start_timeout()->set_seconds(-5); }},
      };
  for (const auto& [what, field, make] : cases) {
    StartDaemonRequest r;
    make(&r);
    ExpectRefused(Start(r), grpc::StatusCode::INVALID_ARGUMENT, field, what);
  }
  // Beyond the 4 MiB a gRPC server reads: refused before any handler runs.
  StartDaemonRequest huge;
  huge.add_overrides()->set_key(std::string(5 << 20, 'k'));
  ExpectRefused(Start(huge), grpc::StatusCode::RESOURCE_EXHAUSTED, "", "a 5 MiB request");
}

TEST_F(AgentHostileInputTest, StopDaemon) {
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  crest::v1::StopDaemonRequest r;
  r.mutable_grace()->set_seconds(-1);
  crest::v1::StopDaemonReply reply;
  ExpectRefused(stub_->StopDaemon(&ctx, r, &reply), grpc::StatusCode::INVALID_ARGUMENT, "grace",
                "a negative grace");
}

TEST_F(AgentHostileInputTest, RunBenchmark) {
  using crest::v1::BenchmarkSpec;
  std::vector<std::tuple<std::string, std::string, std::function<void(BenchmarkSpec*)>>> cases = {
      {"an API out of range", "spec.api",
       [](auto* s) { s->set_api(static_cast<crest::v1::BenchmarkApi>(99)); }},
      {"a negative task kind", "spec.task_kind",
       [](auto* s) { s->set_task_kind(static_cast<crest::v1::TaskKind>(-5)); }},
      {"a dataset path", "spec.dataset",
       [](auto* s) {
         s->mutable_dataset()->set_type(crest::v1::DATASET_TYPE_JSONL);
         s->mutable_dataset()->set_name("../../../etc/shadow");
       }},
      {"a 2 MiB model name", "spec.model_name",
       [](auto* s) { s->set_model_name(std::string(2 << 20, 'm')); }},
      {"a concurrency of 4 billion", "spec.concurrency",
       [](auto* s) { s->set_concurrency(4000000000u); }},
  };
  for (const auto& [what, field, make] : cases) {
    BenchmarkSpec s;
    s.set_model_name("LLaMa3-8B");
    s.set_concurrency(1);
    s.set_request_count(1);
    s.set_max_output_len(8);
    make(&s);
    ExpectRefused(Bench(s), grpc::StatusCode::INVALID_ARGUMENT, field, what);
  }
}

TEST_F(AgentHostileInputTest, RequestsWithoutFieldsIgnoreUnknownOnes) {
  // GetNodeInfo, GetDaemonStatus and RestoreHostTuning take no fields: a
  // request carrying 1 MiB of fields they do not know is read as empty.
  crest::v1::StartDaemonRequest junk;
  junk.add_overrides()->set_key(std::string(1 << 20, 'j'));
  crest::v1::GetNodeInfoRequest info_request;
  ASSERT_TRUE(info_request.ParseFromString(junk.SerializeAsString()));
  grpc::ClientContext ctx;
  SetTestDeadline(&ctx);
  crest::v1::NodeInfo info;
  grpc::Status status = stub_->GetNodeInfo(&ctx, info_request, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.node_name(), "node-1");
  crest::v1::RestoreHostTuningRequest restore;
  ASSERT_TRUE(restore.ParseFromString(junk.SerializeAsString()));
  grpc::ClientContext ctx2;
  SetTestDeadline(&ctx2);
  crest::v1::HostTuningReply reply;
  EXPECT_TRUE(stub_->RestoreHostTuning(&ctx2, restore, &reply).ok());
  EXPECT_EQ(Governor(), "powersave");
}

}  // namespace
}  // namespace crest::agent
