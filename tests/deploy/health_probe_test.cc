// The probes of deploy/k8s run `crest health` with the pod's own certificate
// against a mutual-TLS port (decision 0012). Here the real binaries, with
// certificates from scripts/make-certs, show that this check passes for a
// controller and an agent checked with their own identities, and fails —
// exit 1 with the reason — for a peer without a certificate, with one from
// another CA, or when nothing listens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/e2e_harness.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kStartup = absl::Seconds(20);

class HealthProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    pki_ = dir_.File("pki");
    CommandResult made = RunArgv({SourceDir() + "/scripts/make-certs", pki_, "--agent", "node-1"});
    ASSERT_EQ(made.code, 0) << made.output;
    made = RunArgv({SourceDir() + "/scripts/make-certs", dir_.File("other"), "--no-controller"});
    ASSERT_EQ(made.code, 0) << made.output;
  }
  void TearDown() override {
    processes_.clear();
    KillAllChildren();
  }

  // --tls-* of identity `id` in the CA directory `pki`.
  static std::vector<std::string> Tls(const std::string& pki, const std::string& id) {
    return {"--tls-cert=" + pki + "/" + id + "/tls.crt", "--tls-key=" + pki + "/" + id + "/tls.key",
            "--tls-ca=" + pki + "/" + id + "/ca.crt"};
  }

  // What the manifests' probes run: crest health with the pod's own certificate.
  CommandResult Health(const std::string& address, const std::string& server_name,
                       const std::vector<std::string>& tls) {
    std::vector<std::string> args = {"health", "--address=" + address, "--timeout=5"};
    if (!server_name.empty()) args.push_back("--tls-server-name=" + server_name);
    args.insert(args.end(), tls.begin(), tls.end());
    return RunBinary("crest", args);
  }

  crest::testing::TempDir dir_;
  std::string pki_;
  std::vector<std::unique_ptr<Process>> processes_;
};

TEST_F(HealthProbe, ControllerAndAgentAnswerTheirOwnCertificates) {
  std::vector<std::string> args = {"--listen=127.0.0.1:0", "--state-dir=" + dir_.File("ctl")};
  for (auto& a : Tls(pki_, "crest-controller")) args.push_back(a);
  auto controller = Process::Start("crest-controller", args, "controller");
  ASSERT_TRUE(controller.ok()) << controller.status();
  auto port = (*controller)->WaitForNumberAfter("listening on port ", kStartup);
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  processes_.push_back(std::move(*controller));

  CommandResult r = Health(address, "crest-controller", Tls(pki_, "crest-controller"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(": SERVING"));
  // The name it is dialled by must be in its certificate.
  r = Health(address, "crest-controler", Tls(pki_, "crest-controller"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unreachable or refused"));
  // A certificate from another CA, or none, is refused.
  r = Health(address, "crest-controller", Tls(dir_.File("other"), "crest-cli"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("health of " + address + ": unreachable or refused"));
  r = RunBinary("crest", {"health", "--address=" + address, "--insecure", "--timeout=5"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unreachable or refused"));

  // An agent with its node's certificate (CN and SAN node-1), as the DaemonSet's probe.
  std::string root = dir_.File("node-1");
  ASSERT_TRUE(WriteFileAtomically(root + ".yaml", "sim: {model: LLaMa3-8B}\n").ok());
  args = {"--listen=127.0.0.1:0", "--state-dir=" + root, "--node-name=node-1",
          "--config=" + root + ".yaml"};
  for (auto& a : Tls(pki_, "node-1")) args.push_back(a);
  auto agent = Process::Start("crest-agent", args, "node-1");
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto agent_port = (*agent)->WaitForNumberAfter("crest-agent: listening on 127.0.0.1:", kStartup);
  ASSERT_TRUE(agent_port.ok()) << agent_port.status();
  processes_.push_back(std::move(*agent));
  r = Health(absl::StrCat("127.0.0.1:", *agent_port), "node-1", Tls(pki_, "node-1"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(": SERVING"));

  // Nothing there: a clear failure within the deadline, not a hang.
  processes_.clear();
  r = Health(address, "crest-controller", Tls(pki_, "crest-controller"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unreachable or refused"));
}

TEST_F(HealthProbe, BadFlagsAreRefused) {
  CommandResult r = RunBinary("crest", {"health"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--address is required"));
  r = RunBinary("crest", {"health", "--address=127.0.0.1:1", "--tls-cert=" + pki_ + "/nope"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("TLS needs all of --tls-cert, --tls-key and --tls-ca"));
}

}  // namespace
}  // namespace crest::e2e
