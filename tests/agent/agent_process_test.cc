// Real crest-agent processes: host tuning restored after SIGTERM and at the
// next start after a crash (SIGKILL), TLS refusals, validation errors over
// RPC (nothing changes), a benchmark through the RPC against crest-bench
// alone, and the `crest node` CLI end to end.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <csignal>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/tls.h"
#include "crest/v1/agent.grpc.pb.h"
#include "tests/agent/agent_test_util.h"

namespace crest::agent {
namespace {

TlsOptions Insecure() {
  TlsOptions t;
  t.insecure = true;
  return t;
}

TlsOptions Tls(const std::string& cert, const std::string& key, const std::string& ca) {
  TlsOptions t;
  t.cert_file = cert;
  t.key_file = key;
  t.ca_file = ca;
  return t;
}

using testing::AgentProcess;
using ::testing::HasSubstr;
using testing::ReadFakeFile;

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeSysfs(sysfs_, {});
    auto path = testing::WriteSimConfigJson(dir_.path() + "/mindie", sim_ports_);
    ASSERT_TRUE(path.ok()) << path.status();
    config_json_ = *path;
    original_ = *ReadFileToString(config_json_);
    std::ofstream(dir_.File("agent.yaml"))
        << "daemon:\n  binary: " << testing::BinDir()
        << "/mindie-sim\n  install_dir: " << dir_.path() << "/mindie\n  args: [\"--config\", \""
        << config_json_
        << "\", \"--time-scale\", \"50\", \"--seed\", \"5\"]\n  start_timeout_s: 20\n"
        << "  stop_grace_s: 5\nlimits:\n  maxBatchSize: {min: 1, max: 1000}\n"
        << "labels: {npu: 910B3}\n";
  }

  std::vector<std::string> Args(bool insecure = true) {
    std::vector<std::string> a = {
        "--listen", "127.0.0.1:0", "--state-dir",           state_,        "--sysfs-root",
        sysfs_,     "--config",    dir_.File("agent.yaml"), "--node-name", "n1"};
    if (insecure) a.emplace_back("--insecure");
    return a;
  }

  std::unique_ptr<crest::v1::NodeAgent::Stub> Stub(const std::string& address,
                                                   const TlsOptions& tls = Insecure()) {
    auto channel = MakeChannel(address, tls);
    EXPECT_TRUE(channel.ok());
    return crest::v1::NodeAgent::NewStub(*channel);
  }

  static void Deadline(grpc::ClientContext& ctx, int seconds = 30) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  // Starts the daemon over RPC and returns the last event.
  static crest::v1::DaemonEvent StartDaemon(crest::v1::NodeAgent::Stub& stub,
                                            const crest::v1::StartDaemonRequest& req,
                                            grpc::Status* status) {
    grpc::ClientContext ctx;
    Deadline(ctx, 60);
    auto reader = stub.StartDaemon(&ctx, req);
    crest::v1::DaemonEvent e;
    crest::v1::DaemonEvent last;
    while (reader->Read(&e)) last = e;
    *status = reader->Finish();
    return last;
  }

  std::string Gov(int cpu) {
    return ReadFakeFile(
        absl::StrCat(sysfs_, "/devices/system/cpu/cpu", cpu, "/cpufreq/scaling_governor"));
  }
  std::string Thp() {
    return ParseThp(ReadFakeFile(sysfs_ + "/kernel/mm/transparent_hugepage/enabled"));
  }
  static std::string ParseThp(const std::string& s) {
    size_t a = s.find('[');
    return a == std::string::npos ? s : s.substr(a + 1, s.find(']') - a - 1);
  }

  crest::testing::TempDir dir_;
  std::vector<PortReservation> sim_ports_;  // config.json's, held for the test
  std::string sysfs_ = dir_.path() + "/sys";
  std::string state_ = dir_.path() + "/state";
  std::string config_json_;
  std::string original_;
};

TEST_F(AgentProcessTest, SigtermRestoresHostAndStopsDaemon) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  grpc::ClientContext ctx;
  Deadline(ctx);
  crest::v1::ApplyHostTuningRequest req;
  req.set_governor("performance");
  req.set_thp("always");
  crest::v1::HostTuningReply reply;
  ASSERT_TRUE(stub->ApplyHostTuning(&ctx, req, &reply).ok());
  EXPECT_EQ(Gov(0), "performance");
  EXPECT_EQ(Thp(), "always");
  crest::v1::StartDaemonRequest start;
  start.add_overrides()->set_key("maxBatchSize");
  start.mutable_overrides(0)->set_int_value(400);
  grpc::Status status;
  crest::v1::DaemonEvent last = StartDaemon(*stub, start, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(last.has_ready());
  pid_t daemon = last.ready().pid();

  EXPECT_EQ((*agent)->Terminate(), 0);
  EXPECT_EQ(Gov(0), "powersave");
  EXPECT_EQ(Gov(1), "powersave");
  EXPECT_EQ(Thp(), "madvise");
  EXPECT_FALSE(ProcessGroupExists(daemon));
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
}

TEST_F(AgentProcessTest, CrashIsRecoveredAtTheNextStart) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    crest::v1::ApplyHostTuningRequest req;
    req.set_governor("performance");
    req.set_thp("never");
    crest::v1::HostTuningReply reply;
    ASSERT_TRUE(stub->ApplyHostTuning(&ctx, req, &reply).ok());
  }
  crest::v1::StartDaemonRequest start;
  start.add_overrides()->set_key("maxBatchSize");
  start.mutable_overrides(0)->set_int_value(123);
  grpc::Status status;
  crest::v1::DaemonEvent last = StartDaemon(*stub, start, &status);
  ASSERT_TRUE(last.has_ready());
  pid_t daemon = last.ready().pid();
  // The pid record was written before the daemon ran.
  auto record = ReadFileToString(state_ + "/daemon-pid.json");
  ASSERT_TRUE(record.ok());
  EXPECT_THAT(*record, ::testing::HasSubstr(absl::StrCat("\"pid\":", daemon)));
  (*agent)->Crash();
  // The crash left the host settings as they were; the kernel stopped the
  // daemon (the agent's parent-death signal), not anyone's call.
  EXPECT_EQ(Gov(0), "performance");
  EXPECT_NE(*ReadFileToString(config_json_), original_);
  EXPECT_TRUE(testing::WaitFor([&] { return !ProcessGroupExists(daemon); }, absl::Seconds(10)));

  auto next = AgentProcess::Start(Args());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Gov(0), "powersave");
  EXPECT_EQ(Thp(), "madvise");
  EXPECT_EQ(*ReadFileToString(config_json_), original_);
  EXPECT_TRUE(testing::WaitFor([&] { return !ProcessGroupExists(daemon); }, absl::Seconds(10)));
  EXPECT_EQ((*next)->Terminate(), 0);
}

TEST_F(AgentProcessTest, UnsupportedSettingsOverRpc) {
  testing::FakeSysfsSpec spec;
  spec.cpufreq = false;
  spec.thp = false;
  std::filesystem::remove_all(sysfs_);
  testing::WriteFakeSysfs(sysfs_, spec);
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  grpc::ClientContext ctx;
  Deadline(ctx);
  crest::v1::ApplyHostTuningRequest req;
  req.set_governor("performance");
  req.set_thp("always");
  crest::v1::HostTuningReply reply;
  ASSERT_TRUE(stub->ApplyHostTuning(&ctx, req, &reply).ok());
  ASSERT_EQ(reply.results_size(), 2);
  EXPECT_EQ(reply.results(0).support(), crest::v1::SETTING_UNSUPPORTED);
  EXPECT_EQ(reply.results(1).support(), crest::v1::SETTING_UNSUPPORTED);
}

TEST_F(AgentProcessTest, ValidationErrorsChangeNothing) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  auto tune = [&](const std::string& g, const std::string& t) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    crest::v1::ApplyHostTuningRequest req;
    req.set_governor(g);
    req.set_thp(t);
    crest::v1::HostTuningReply reply;
    return stub->ApplyHostTuning(&ctx, req, &reply);
  };
  grpc::Status s = tune("ludicrous", "always");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("governor"));
  s = tune("", "sometimes");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("thp"));
  EXPECT_EQ(Gov(0), "powersave");
  EXPECT_EQ(Thp(), "madvise");

  auto start_error = [&](const crest::v1::StartDaemonRequest& req) {
    grpc::Status status;
    StartDaemon(*stub, req, &status);
    return status;
  };
  crest::v1::StartDaemonRequest bad_key;
  bad_key.add_overrides()->set_key("modelWeightPath");
  bad_key.mutable_overrides(0)->set_int_value(1);
  s = start_error(bad_key);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("modelWeightPath"));
  crest::v1::StartDaemonRequest out_of_range;
  out_of_range.add_overrides()->set_key("maxBatchSize");
  out_of_range.mutable_overrides(0)->set_int_value(5000);  // limits: max 1000
  s = start_error(out_of_range);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("[1, 1000]"));
  crest::v1::StartDaemonRequest wrong_type;
  wrong_type.add_overrides()->set_key("supportSelectBatch");
  wrong_type.mutable_overrides(0)->set_int_value(1);
  s = start_error(wrong_type);
  EXPECT_THAT(s.error_message(), HasSubstr("boolean"));
  crest::v1::StartDaemonRequest bad_pin;
  bad_pin.mutable_pinning()->set_mode(crest::v1::PINNING_CPU_LIST);
  bad_pin.mutable_pinning()->set_cpu_list("0-;rm");
  s = start_error(bad_pin);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("pinning.cpu_list"));
  EXPECT_EQ(*ReadFileToString(config_json_), original_);

  // A benchmark needs a ready daemon, and a sane spec.
  grpc::ClientContext ctx;
  Deadline(ctx);
  crest::v1::RunBenchmarkRequest bench;
  bench.mutable_spec()->set_concurrency(1);
  bench.mutable_spec()->set_max_output_len(8);
  bench.mutable_spec()->mutable_dataset()->set_name("../../etc/passwd");
  auto reader = stub->RunBenchmark(&ctx, bench);
  crest::v1::BenchmarkEvent e;
  while (reader->Read(&e)) {
  }
  s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.dataset.name"));
}

TEST_F(AgentProcessTest, BenchmarkThroughRpcMatchesCrestBenchAlone) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  grpc::Status status;
  crest::v1::DaemonEvent ready = StartDaemon(*stub, {}, &status);
  ASSERT_TRUE(ready.has_ready()) << ready.DebugString();

  crest::v1::RunBenchmarkRequest req;
  crest::v1::BenchmarkSpec* spec = req.mutable_spec();
  spec->set_concurrency(8);
  spec->set_request_count(48);
  spec->set_max_output_len(24);
  spec->set_seed(11);
  grpc::ClientContext ctx;
  Deadline(ctx, 60);
  auto reader = stub->RunBenchmark(&ctx, req);
  crest::v1::BenchmarkEvent e;
  std::optional<crest::v1::BenchmarkResult> via_agent;
  while (reader->Read(&e)) {
    if (e.has_result()) via_agent = e.result();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(via_agent.has_value());

  SpawnOptions bench;
  bench.argv = {testing::BinDir() + "/crest-bench",
                "--Http",
                ready.ready().business_url(),
                "--Concurrency",
                "8",
                "--RequestCount",
                "48",
                "--MaxOutputLen",
                "24",
                "--seed",
                "11",
                "--json",
                dir_.File("alone.json")};
  auto out = RunCommand(bench, absl::Seconds(60));
  CREST_ASSERT_OK(out);
  ASSERT_EQ(out->exit.code, 0) << out->output;
  nlohmann::json alone = nlohmann::json::parse(*ReadFileToString(dir_.File("alone.json")));
  // Same prompts, same caps: the same work, exactly.
  EXPECT_EQ(via_agent->succeeded(), alone["succeeded"].get<uint64_t>());
  EXPECT_EQ(via_agent->output_tokens(), alone["OutputTokens"].get<uint64_t>());
  EXPECT_EQ(via_agent->input_tokens(), alone["InputTokens"].get<uint64_t>());
  // Speed is a measurement: equal within noise.
  double speed = alone["GenerateSpeed"].get<double>();
  EXPECT_NEAR(via_agent->generate_speed(), speed, 0.35 * speed);
  EXPECT_EQ((*agent)->Terminate(), 0);
}

// The rate search's premise: runs that change only client parameters go to
// the running daemon, which is not restarted between them.
TEST_F(AgentProcessTest, BenchmarksWithNewClientParametersReuseTheRunningDaemon) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  grpc::Status status;
  crest::v1::DaemonEvent ready = StartDaemon(*stub, {}, &status);
  ASSERT_TRUE(ready.has_ready()) << ready.DebugString();
  const int32_t pid = ready.ready().pid();
  ASSERT_GT(pid, 0);
  auto run = [&](uint32_t concurrency, double rate) {
    crest::v1::RunBenchmarkRequest req;
    req.mutable_spec()->set_concurrency(concurrency);
    req.mutable_spec()->set_request_rate(rate);
    req.mutable_spec()->set_request_count(16);
    req.mutable_spec()->set_max_output_len(8);
    grpc::ClientContext ctx;
    Deadline(ctx, 60);
    auto reader = stub->RunBenchmark(&ctx, req);
    crest::v1::BenchmarkEvent e;
    crest::v1::BenchmarkResult result;
    while (reader->Read(&e)) {
      if (e.has_result()) result = e.result();
    }
    EXPECT_TRUE(reader->Finish().ok());
    return result;
  };
  crest::v1::BenchmarkResult first = run(4, 0);
  crest::v1::BenchmarkResult second = run(1000, 200);
  crest::v1::BenchmarkResult third = run(1000, 400);
  EXPECT_EQ(first.succeeded(), 16u);
  EXPECT_EQ(third.succeeded(), 16u);
  EXPECT_EQ(first.daemon_pid(), pid);
  EXPECT_EQ(second.daemon_pid(), pid);
  EXPECT_EQ(third.daemon_pid(), pid);
  grpc::ClientContext ctx;
  Deadline(ctx);
  crest::v1::DaemonStatus daemon;
  ASSERT_TRUE(stub->GetDaemonStatus(&ctx, {}, &daemon).ok());
  EXPECT_EQ(daemon.state(), crest::v1::DAEMON_READY);
  EXPECT_EQ(daemon.pid(), pid);
  EXPECT_EQ(daemon.restarts(), 1u);  // started once, for all three runs
  EXPECT_EQ((*agent)->Terminate(), 0);
}

TEST_F(AgentProcessTest, TlsRefusesClientsWithoutTheRightCertificate) {
  auto ca = crest::testing::TestCa::Create(dir_.path(), "good");
  auto other = crest::testing::TestCa::Create(dir_.path(), "other");
  CREST_ASSERT_OK(ca);
  CREST_ASSERT_OK(other);
  auto server = ca->Issue("crest-agent");
  auto client = ca->Issue("crest-controller");
  auto stranger = other->Issue("stranger");
  std::vector<std::string> args = Args(false);
  args.insert(args.end(),
              {"--tls-cert", server->cert, "--tls-key", server->key, "--tls-ca", ca->ca_file()});
  auto agent = AgentProcess::Start(args);
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto call = [&](const TlsOptions& tls) {
    auto stub = Stub((*agent)->address(), tls);
    grpc::ClientContext ctx;
    Deadline(ctx, 5);
    crest::v1::DaemonStatus reply;
    return stub->GetDaemonStatus(&ctx, {}, &reply);
  };
  TlsOptions good = Tls(client->cert, client->key, ca->ca_file());
  EXPECT_TRUE(call(good).ok());
  TlsOptions wrong_ca = Tls(stranger->cert, stranger->key, other->ca_file());
  EXPECT_FALSE(call(wrong_ca).ok());
  TlsOptions foreign_cert = Tls(stranger->cert, stranger->key, ca->ca_file());
  EXPECT_FALSE(call(foreign_cert).ok());
  // Plaintext to a TLS agent fails too.
  EXPECT_FALSE(call(Insecure()).ok());
}

// The flags reach the real binary: --controller-identity replaces the
// default, and an operator certificate may read but not drive the node.
TEST_F(AgentProcessTest, IdentityFlagsDecideWhoDrivesTheNode) {
  auto ca = crest::testing::TestCa::Create(dir_.path(), "ids");
  CREST_ASSERT_OK(ca);
  auto server = ca->Issue("n1");
  auto ops = ca->Issue("ops-controller");
  auto default_controller = ca->Issue("crest-controller");
  auto cli = ca->Issue("crest-cli");
  CREST_ASSERT_OK(server);
  std::vector<std::string> args = Args(false);
  args.insert(args.end(), {"--tls-cert", server->cert, "--tls-key", server->key, "--tls-ca",
                           ca->ca_file(), "--controller-identity", "ops-controller,ctl-2"});
  auto agent = AgentProcess::Start(args);
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stop = [&](const crest::testing::CertFiles& cert) {
    auto stub = Stub((*agent)->address(), Tls(cert.cert, cert.key, ca->ca_file()));
    grpc::ClientContext ctx;
    Deadline(ctx, 5);
    crest::v1::StopDaemonReply reply;
    return stub->StopDaemon(&ctx, {}, &reply);
  };
  EXPECT_TRUE(stop(*ops).ok());
  grpc::Status denied = stop(*default_controller);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(),
            "crest.v1.NodeAgent/StopDaemon: caller CN \"crest-controller\" is not allowed; "
            "expected controller CN \"ops-controller\", \"ctl-2\"");
  EXPECT_EQ(stop(*cli).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto reader = Stub((*agent)->address(), Tls(cli->cert, cli->key, ca->ca_file()));
  grpc::ClientContext ctx;
  Deadline(ctx, 5);
  crest::v1::DaemonStatus status;
  EXPECT_TRUE(reader->GetDaemonStatus(&ctx, {}, &status).ok());
  EXPECT_EQ((*agent)->Terminate(), 0);
}

TEST_F(AgentProcessTest, InsecureOnlyOnLoopback) {
  SpawnOptions options;
  options.argv = {testing::BinDir() + "/crest-agent",
                  "--listen",
                  "0.0.0.0:0",
                  "--insecure",
                  "--state-dir",
                  state_,
                  "--sysfs-root",
                  sysfs_};
  auto out = RunCommand(options, absl::Seconds(10));
  CREST_ASSERT_OK(out);
  EXPECT_EQ(out->exit.code, 1);
  EXPECT_THAT(out->output, HasSubstr("--insecure is only allowed with a loopback"));
}

// Runs `crest node ...`; returns exit code and output.
CommandOutput Crest(const std::vector<std::string>& args) {
  SpawnOptions options;
  options.argv = {testing::BinDir() + "/crest", "node"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  auto out = RunCommand(options, absl::Seconds(60));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : CommandOutput{};
}

TEST_F(AgentProcessTest, CliEndToEnd) {
  auto agent = AgentProcess::Start(Args());
  ASSERT_TRUE(agent.ok()) << agent.status();
  std::string a = (*agent)->address();
  CommandOutput info = Crest({"info", "--agent", a, "--insecure", "--output", "json"});
  ASSERT_EQ(info.exit.code, 0) << info.output;
  nlohmann::json j = nlohmann::json::parse(info.output);
  EXPECT_EQ(j["nodeName"], "n1");
  // A configured daemon (mindie-sim by path, not the embedded one) on a
  // host without npu-smi: no NPUs, and one slot, as before slots.
  EXPECT_EQ(j["npuNote"], "npu-smi not found");
  ASSERT_EQ(j["slots"].size(), 1u) << info.output;
  EXPECT_EQ(j["slotCpuRule"], "request");
  EXPECT_EQ(j["numaNodes"][1]["cpuList"], "1");
  EXPECT_EQ(j["labels"]["npu"], "910B3");

  CommandOutput tune =
      Crest({"tune", "--agent", a, "--insecure", "--governor", "performance", "--thp", "always"});
  EXPECT_EQ(tune.exit.code, 0) << tune.output;
  EXPECT_EQ(Gov(1), "performance");

  CommandOutput start =
      Crest({"start", "--agent", a, "--insecure", "--set", "maxBatchSize=300", "--set",
             "supportSelectBatch=true", "--pin", "odd-numa", "--output", "json"});
  ASSERT_EQ(start.exit.code, 0) << start.output;
  nlohmann::json ready = nlohmann::json::parse(start.output);
  EXPECT_GT(ready["pid"].get<int>(), 0);
  EXPECT_EQ(ready["npuBlockNum"], 2176);
  EXPECT_EQ(ready["pinnedCpuList"], "1");

  CommandOutput bench = Crest({"bench", "--agent", a, "--insecure", "--Concurrency", "4",
                               "--RequestCount", "8", "--MaxOutputLen", "8", "--output", "json"});
  ASSERT_EQ(bench.exit.code, 0) << bench.output;
  EXPECT_GT(nlohmann::json::parse(bench.output)["generateSpeed"].get<double>(), 0);

  CommandOutput stop = Crest({"stop", "--agent", a, "--insecure", "--output", "json"});
  EXPECT_EQ(stop.exit.code, 0) << stop.output;
  EXPECT_EQ(nlohmann::json::parse(stop.output)["wasRunning"], true);
  CommandOutput restore = Crest({"restore", "--agent", a, "--insecure"});
  EXPECT_EQ(restore.exit.code, 0);
  EXPECT_EQ(Gov(1), "powersave");

  // Errors: one line naming the parameter, non-zero exit.
  CommandOutput unknown = Crest({"info", "--agent", a, "--insecure", "--bogus"});
  EXPECT_EQ(unknown.exit.code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("--bogus"));
  CommandOutput bad_set = Crest({"start", "--agent", a, "--insecure", "--set", "maxBatchSize"});
  EXPECT_EQ(bad_set.exit.code, 1);
  EXPECT_THAT(bad_set.output, HasSubstr("--set"));
  CommandOutput bad_key = Crest({"start", "--agent", a, "--insecure", "--set", "rm=1"});
  EXPECT_EQ(bad_key.exit.code, 1);
  EXPECT_THAT(bad_key.output, HasSubstr("\"rm\" is not an overridable key"));
  EXPECT_EQ(std::count(bad_key.output.begin(), bad_key.output.end(), '\n'), 1);
  CommandOutput bad_pin = Crest({"start", "--agent", a, "--insecure", "--pin", "evens"});
  EXPECT_EQ(bad_pin.exit.code, 1);
  EXPECT_THAT(bad_pin.output, HasSubstr("--pin"));
  CommandOutput unreachable =
      Crest({"info", "--agent", "127.0.0.1:1", "--insecure", "--timeout", "2"});
  EXPECT_EQ(unreachable.exit.code, 1);
  EXPECT_EQ((*agent)->Terminate(), 0);
}

}  // namespace
}  // namespace crest::agent
