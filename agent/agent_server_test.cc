#include "agent/agent_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/testing/fake_sysfs.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "crest/v1/agent.grpc.pb.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

AgentServerOptions InsecureOnLoopback() {
  AgentServerOptions options;
  options.listen = "127.0.0.1:0";
  options.tls.insecure = true;
  return options;
}

TEST(ValidateAgentServerOptionsTest, InsecureOnlyOnLoopback) {
  AgentServerOptions options = InsecureOnLoopback();
  CREST_EXPECT_OK(ValidateAgentServerOptions(options));
  options.listen = "0.0.0.0:7000";
  EXPECT_THAT(ValidateAgentServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--insecure is only allowed with a loopback --listen address, not "
                       "0.0.0.0:7000 (use --tls-cert/--tls-key/--tls-ca)"));
}

TEST(ValidateAgentServerOptionsTest, TlsFlagsComplete) {
  AgentServerOptions options;
  options.listen = "0.0.0.0:0";
  EXPECT_THAT(ValidateAgentServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-cert")));
}

TEST(ValidateAgentServerOptionsTest, AdvertiseNeededWithAControllerOnAWildcardAddress) {
  crest::testing::TempDir dir;
  auto ca = crest::testing::TestCa::Create(dir.path(), "ca");
  CREST_ASSERT_OK(ca);
  auto cert = ca->Issue("crest-agent");
  CREST_ASSERT_OK(cert);
  AgentServerOptions options;
  options.tls.cert_file = cert->cert;
  options.tls.key_file = cert->key;
  options.tls.ca_file = ca->ca_file();
  options.controller = "controller:7000";
  for (const char* listen : {"0.0.0.0:7001", "[::]:7001"}) {
    options.listen = listen;
    EXPECT_THAT(ValidateAgentServerOptions(options),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "--advertise: required with --controller when --listen is a wildcard "
                         "address"))
        << listen;
  }
  options.advertise = "node1:7001";
  CREST_EXPECT_OK(ValidateAgentServerOptions(options));
  options.advertise.clear();
  options.listen = "10.0.0.1:7001";
  CREST_EXPECT_OK(ValidateAgentServerOptions(options));
}

TEST(ParseLabelsTest, KeyValuePairs) {
  auto labels = ParseLabels("npu=910B3,rack=a=b");
  CREST_ASSERT_OK(labels);
  EXPECT_EQ(*labels, (std::map<std::string, std::string>{{"npu", "910B3"}, {"rack", "a=b"}}));
  CREST_ASSERT_OK(ParseLabels(""));
  EXPECT_TRUE(ParseLabels("")->empty());
  EXPECT_THAT(ParseLabels("npu"),
              StatusIs(absl::StatusCode::kInvalidArgument, "--labels: \"npu\" is not key=value"));
  EXPECT_THAT(ParseLabels("=x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

class AgentServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeSysfs(dir_.path() + "/sys", {});
    // A daemon that is never started: the server alone is under test.
    std::ofstream(dir_.File("agent.yaml"))
        << "daemon: {binary: /nonexistent/daemon, install_dir: " << dir_.path() << "}\n"
        << "labels: {npu: 910B3, rack: r1}\n";
  }

  AgentServerOptions Options() {
    AgentServerOptions options = InsecureOnLoopback();
    options.state_dir = dir_.path() + "/state";
    options.sysfs_root = dir_.path() + "/sys";
    options.config_path = dir_.File("agent.yaml");
    options.node_name = "n1";
    options.labels = {{"rack", "r7"}};
    return options;
  }

  crest::testing::TempDir dir_;
};

TEST_F(AgentServerTest, ServesNodeAgentOnThePortItBoundAndShutsDownOnce) {
  auto server = AgentServer::Start(Options());
  CREST_ASSERT_OK(server);
  const std::string address = (*server)->bound_address();
  EXPECT_THAT(address, StartsWith("127.0.0.1:"));
  EXPECT_NE(address, "127.0.0.1:0");
  EXPECT_EQ((*server)->metrics_address(), "");

  TlsOptions insecure;
  insecure.insecure = true;
  auto channel = MakeChannel(address, insecure);
  CREST_ASSERT_OK(channel);
  auto stub = crest::v1::NodeAgent::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  crest::v1::NodeInfo info;
  grpc::Status status = stub->GetNodeInfo(&ctx, {}, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.node_name(), "n1");
  // The agent config's labels join the flag's; the flag wins; backend is added.
  EXPECT_EQ(info.labels().at("npu"), "910B3");
  EXPECT_EQ(info.labels().at("rack"), "r7");
  EXPECT_EQ(info.labels().at("backend"), "mindie");

  (*server)->Shutdown();
  (*server)->Shutdown();
}

TEST_F(AgentServerTest, StartErrorsNameTheFlag) {
  AgentServerOptions options = Options();
  options.state_dir = dir_.File("agent.yaml") + "/state";
  EXPECT_THAT(std::string(AgentServer::Start(options).status().message()),
              StartsWith("--state-dir: "));
  options = Options();
  options.listen = "0.0.0.0:0";
  EXPECT_THAT(AgentServer::Start(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--insecure")));
}

}  // namespace
}  // namespace crest::agent
