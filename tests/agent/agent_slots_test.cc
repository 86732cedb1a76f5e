// One crest-agent with four daemon slots of the embedded mindie-sim: four
// daemons at once on their own cards, ports and working copies of
// config.json, a benchmark in one slot, every slot stopped and restored, and
// after a crash of the agent, every slot put back at its next start.
#include <grpcpp/grpcpp.h>
#include <sched.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/pinning.h"
#include "agent/slot_setup.h"
#include "agent/testing/fake_sysfs.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"
#include "common/tls.h"
#include "crest/v1/agent.grpc.pb.h"
#include "tests/agent/agent_test_util.h"

namespace crest::agent {
namespace {

using testing::AgentProcess;
using ::testing::HasSubstr;

constexpr int kSlots = 4;

class AgentSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two NUMA nodes of four CPUs. One odd node is too few for four slots, so
    // the cards' own nodes decide: the simulated host hangs cards 0-3 off
    // node 0, whose CPUs the four daemons share; node 1 runs the clients.
    testing::FakeSysfsSpec spec;
    spec.numa_nodes = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    testing::WriteFakeSysfs(sysfs_, spec);
    std::ofstream(dir_.File("agent.yaml"))
        << "sim: {time_scale: 50, seed: 5, args: [\"--startup-seconds\", \"0\"]}\n"
        << "slots: " << kSlots << "\n";
  }

  absl::StatusOr<std::unique_ptr<AgentProcess>> StartAgent() {
    return AgentProcess::Start({"--listen", "127.0.0.1:0", "--state-dir", state_, "--sysfs-root",
                                sysfs_, "--config", dir_.File("agent.yaml"), "--node-name", "n1",
                                "--insecure"});
  }

  static std::unique_ptr<crest::v1::NodeAgent::Stub> Stub(const std::string& address) {
    TlsOptions insecure;
    insecure.insecure = true;
    auto channel = MakeChannel(address, insecure);
    EXPECT_TRUE(channel.ok());
    return crest::v1::NodeAgent::NewStub(*channel);
  }

  static void Deadline(grpc::ClientContext& ctx, int seconds = 30) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  static crest::v1::NodeInfo Info(crest::v1::NodeAgent::Stub& stub) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    crest::v1::NodeInfo info;
    grpc::Status s = stub.GetNodeInfo(&ctx, {}, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }

  // Runs `req` to its end: the call's status and the READY event, if any.
  static std::pair<grpc::Status, std::optional<crest::v1::DaemonReady>> Start(
      crest::v1::NodeAgent::Stub& stub, const crest::v1::StartDaemonRequest& req) {
    grpc::ClientContext ctx;
    Deadline(ctx, 60);
    auto reader = stub.StartDaemon(&ctx, req);
    crest::v1::DaemonEvent e;
    std::optional<crest::v1::DaemonReady> ready;
    while (reader->Read(&e)) {
      if (e.has_ready()) ready = e.ready();
    }
    return {reader->Finish(), ready};
  }

  // Starts slot `slot`'s daemon (maxBatchSize 100 + slot) and returns the
  // call's status.
  static grpc::Status StartSlot(crest::v1::NodeAgent::Stub& stub, uint32_t slot) {
    crest::v1::StartDaemonRequest req;
    req.set_slot(slot);
    req.add_overrides()->set_key("maxBatchSize");
    req.mutable_overrides(0)->set_int_value(100 + static_cast<int64_t>(slot));
    auto [status, ready] = Start(stub, req);
    if (status.ok() && !ready) return {grpc::StatusCode::INTERNAL, "no READY event"};
    return status;
  }

  static crest::v1::DaemonStatus Status(crest::v1::NodeAgent::Stub& stub, uint32_t slot) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    crest::v1::GetDaemonStatusRequest req;
    req.set_slot(slot);
    crest::v1::DaemonStatus status;
    EXPECT_TRUE(stub.GetDaemonStatus(&ctx, req, &status).ok());
    return status;
  }

  // Starts every slot at once; returns the slots' daemon pids.
  std::vector<int32_t> StartAll(crest::v1::NodeAgent::Stub& stub) {
    std::vector<std::future<grpc::Status>> starts;
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      starts.push_back(
          std::async(std::launch::async, [&stub, slot] { return StartSlot(stub, slot); }));
    }
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      grpc::Status s = starts[slot].get();
      EXPECT_TRUE(s.ok()) << "slot " << slot << ": " << s.error_message();
    }
    std::vector<int32_t> pids;
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      crest::v1::DaemonStatus status = Status(stub, slot);
      EXPECT_EQ(status.state(), crest::v1::DAEMON_READY) << slot;
      EXPECT_EQ(status.slot(), slot);
      pids.push_back(status.pid());
    }
    return pids;
  }

  crest::testing::TempDir dir_;
  std::string sysfs_ = dir_.path() + "/sys";
  std::string state_ = dir_.path() + "/state";
};

TEST_F(AgentSlotsTest, FourDaemonsRunAtOnceOnTheirOwnCardsPortsAndCpus) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());

  crest::v1::NodeInfo info = Info(*stub);
  ASSERT_EQ(info.slots_size(), kSlots);
  EXPECT_EQ(info.slot_cpu_rule(), "npu-affinity");
  std::set<uint32_t> ports;
  std::set<uint32_t> cpus;
  std::map<uint32_t, std::string> originals;  // slot -> its working copy before any start
  for (const crest::v1::Slot& slot : info.slots()) {
    ASSERT_EQ(slot.npus_size(), 1);
    EXPECT_EQ(slot.npus(0), slot.index()) << "slot " << slot.index() << " on the next card";
    for (uint32_t p : {slot.port(), slot.management_port(), slot.metrics_port()}) {
      EXPECT_TRUE(ports.insert(p).second) << "port " << p << " given twice";
    }
    auto list = ParseCpuList(slot.cpu_list());
    ASSERT_TRUE(list.ok()) << slot.cpu_list();
    EXPECT_THAT(*list, ::testing::ElementsAre(slot.index())) << "node 0's CPUs, one each";
    for (uint32_t c : *list) EXPECT_TRUE(cpus.insert(c).second) << "CPU " << c << " given twice";
    auto text = ReadFileToString(slot.config_json());
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("\"port\" : ", slot.port())));
    originals[slot.index()] = *text;
  }
  auto clients = ParseCpuList(info.benchmark_client_cpu_list());
  ASSERT_TRUE(clients.ok());
  EXPECT_THAT(*clients, ::testing::ElementsAre(4, 5, 6, 7));
  for (uint32_t c : *clients)
    EXPECT_EQ(cpus.count(c), 0u) << "client CPU " << c << " is a daemon's";

  std::vector<int32_t> pids = StartAll(*stub);
  EXPECT_EQ(std::set<int32_t>(pids.begin(), pids.end()).size(), size_t{kSlots});
  // The simulated host shows each card held by its slot's daemon.
  const crest::v1::NodeInfo running = Info(*stub);
  ASSERT_GE(running.npus_size(), kSlots);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    EXPECT_GT(running.npus(static_cast<int>(slot)).hbm_used_mib(), 0u) << "NPU " << slot;
    EXPECT_EQ(running.slots(static_cast<int>(slot)).daemon().pid(), pids[slot]);
  }
  // Each daemon runs its own overrides.
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    auto text = ReadFileToString(info.slots(static_cast<int>(slot)).config_json());
    ASSERT_TRUE(text.ok());
    EXPECT_THAT(*text, HasSubstr(absl::StrCat("\"maxBatchSize\" : ", 100 + slot)));
  }

  {  // A benchmark in slot 2 measures slot 2's daemon.
    crest::v1::RunBenchmarkRequest req;
    req.set_slot(2);
    req.mutable_spec()->set_concurrency(8);
    req.mutable_spec()->set_request_count(16);
    req.mutable_spec()->set_max_output_len(32);
    grpc::ClientContext ctx;
    Deadline(ctx, 60);
    auto reader = stub->RunBenchmark(&ctx, req);
    crest::v1::BenchmarkEvent e;
    crest::v1::BenchmarkResult result;
    while (reader->Read(&e)) {
      if (e.has_result()) result = e.result();
    }
    grpc::Status s = reader->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(result.succeeded(), 16u);
    EXPECT_EQ(result.daemon_pid(), pids[2]);
  }

  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    crest::v1::StopDaemonRequest req;
    req.set_slot(slot);
    crest::v1::StopDaemonReply reply;
    ASSERT_TRUE(stub->StopDaemon(&ctx, req, &reply).ok());
    EXPECT_TRUE(reply.was_running()) << slot;
  }
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    EXPECT_EQ(Status(*stub, slot).state(), crest::v1::DAEMON_STOPPED) << slot;
    EXPECT_EQ(*ReadFileToString(info.slots(static_cast<int>(slot)).config_json()), originals[slot])
        << "slot " << slot << "'s config.json was not restored";
  }
  const crest::v1::NodeInfo stopped = Info(*stub);
  for (const crest::v1::NpuDevice& npu : stopped.npus()) {
    EXPECT_EQ(npu.hbm_used_mib(), 0u) << npu.id();
  }
  EXPECT_EQ((*agent)->Terminate(), 0);
}

TEST_F(AgentSlotsTest, ASlotThatDoesNotExistIsRefusedNamingTheSlots) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  grpc::Status s = StartSlot(*stub, kSlots);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("slot 4: this node has 4 slots (0..3)"));
  grpc::ClientContext ctx;
  Deadline(ctx);
  crest::v1::GetDaemonStatusRequest req;
  req.set_slot(9);
  crest::v1::DaemonStatus status;
  grpc::Status refused = stub->GetDaemonStatus(&ctx, req, &status);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("slot 9: this node has 4 slots (0..3)"));
}

TEST_F(AgentSlotsTest, EverySlotIsPutBackAfterACrashOfTheAgent) {
  std::vector<int32_t> pids;
  std::vector<std::string> copies;
  {
    auto agent = StartAgent();
    ASSERT_TRUE(agent.ok()) << agent.status();
    auto stub = Stub((*agent)->address());
    pids = StartAll(*stub);
    const crest::v1::NodeInfo info = Info(*stub);
    for (const crest::v1::Slot& slot : info.slots()) copies.push_back(slot.config_json());
    (*agent)->Crash();
  }
  // The next agent kills what is left and restores every slot's config.json
  // before serving.
  auto again = StartAgent();
  ASSERT_TRUE(again.ok()) << again.status();
  for (int32_t pid : pids) {
    EXPECT_TRUE(testing::WaitFor([pid] { return ::kill(pid, 0) != 0; }, absl::Seconds(10)))
        << "daemon " << pid << " outlived the crash and the restart";
  }
  for (size_t slot = 0; slot < copies.size(); ++slot) {
    auto text = ReadFileToString(copies[slot]);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, HasSubstr("\"maxBatchSize\" : 200")) << "slot " << slot;
    EXPECT_FALSE(std::filesystem::exists(SlotStateDir(state_, static_cast<uint32_t>(slot)) +
                                         "/config-json-backup.json"));
  }
  auto stub = Stub((*again)->address());
  crest::v1::NodeInfo info = Info(*stub);
  for (const crest::v1::NpuDevice& npu : info.npus()) EXPECT_EQ(npu.hbm_used_mib(), 0u) << npu.id();
  // And the slots serve again.
  std::vector<int32_t> fresh = StartAll(*stub);
  EXPECT_EQ(fresh.size(), size_t{kSlots});
  EXPECT_EQ((*again)->Terminate(), 0);
}

// On this machine's own CPUs (0 and 1, as nodes 0 and 1), one slot: the
// practice's rule gives its daemon the odd node, CPU 1, and the clients CPU 0;
// an odd-NUMA start pins the daemon there for real.
TEST_F(AgentSlotsTest, OddNumaPinningPinsASlotsDaemonToItsShare) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) GTEST_SKIP() << "needs CPUs 0 and 1";
  testing::WriteFakeSysfs(sysfs_, {});
  std::ofstream(dir_.File("agent.yaml"))
      << "sim: {time_scale: 50, seed: 5, args: [\"--startup-seconds\", \"0\"]}\nslots: 1\n";
  auto agent = StartAgent();
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto stub = Stub((*agent)->address());
  crest::v1::NodeInfo info = Info(*stub);
  EXPECT_EQ(info.slot_cpu_rule(), "odd-numa");
  ASSERT_EQ(info.slots_size(), 1);
  EXPECT_EQ(info.slots(0).cpu_list(), "1");
  EXPECT_EQ(info.benchmark_client_cpu_list(), "0");

  crest::v1::StartDaemonRequest req;
  req.mutable_pinning()->set_mode(crest::v1::PINNING_ODD_NUMA);
  auto [status, ready] = Start(*stub, req);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(ready.has_value());
  auto allowed = ReadAllowedCpus(ready->pid());
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_THAT(*allowed, ::testing::ElementsAre(1));
  EXPECT_EQ((*agent)->Terminate(), 0);
}

// The operator's CLI addresses a slot with --slot on the four commands that
// act on one daemon, and `crest node info` lists the slots.
TEST_F(AgentSlotsTest, TheCliAddressesASlot) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto crest = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {::crest::testing::BinDir() + "/crest", "node"});
    args.insert(args.begin() + 3, {"--agent", (*agent)->address(), "--insecure"});
    SpawnOptions options;
    options.argv = std::move(args);
    auto out = RunCommand(options, absl::Seconds(60));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::make_pair(out->exit.code, out->output) : std::make_pair(-1, "");
  };
  auto [started, start_out] = crest({"start", "--slot", "2", "--set", "maxBatchSize=77"});
  ASSERT_EQ(started, 0) << start_out;
  EXPECT_THAT(start_out, HasSubstr("maxBatchSize = 77"));
  auto stub = Stub((*agent)->address());
  const crest::v1::DaemonStatus two = Status(*stub, 2);
  EXPECT_EQ(two.state(), crest::v1::DAEMON_READY);
  EXPECT_NE(Status(*stub, 0).state(), crest::v1::DAEMON_READY);

  auto [status_code, status_out] = crest({"status", "--slot", "2", "--output", "json"});
  ASSERT_EQ(status_code, 0) << status_out;
  EXPECT_THAT(status_out, HasSubstr(absl::StrCat("\"pid\": ", two.pid())));
  auto [bench_code, bench_out] = crest(
      {"bench", "--slot", "2", "--RequestCount", "8", "--MaxOutputLen", "8", "--output", "json"});
  ASSERT_EQ(bench_code, 0) << bench_out;
  EXPECT_THAT(bench_out, HasSubstr(absl::StrCat("\"daemonPid\": ", two.pid())));
  auto [info_code, info_out] = crest({"info"});
  ASSERT_EQ(info_code, 0) << info_out;
  EXPECT_THAT(info_out, HasSubstr("slot 2:   npus 2, "));
  EXPECT_THAT(info_out, HasSubstr("daemon DAEMON_READY"));

  auto [missing_code, missing_out] = crest({"stop", "--slot", "7"});
  EXPECT_NE(missing_code, 0);
  EXPECT_THAT(missing_out, HasSubstr("slot 7: this node has 4 slots (0..3)"));
  auto [stopped, stop_out] = crest({"stop", "--slot", "2"});
  ASSERT_EQ(stopped, 0) << stop_out;
  EXPECT_THAT(stop_out, HasSubstr("stopped (exit code"));
  EXPECT_NE(Status(*stub, 2).state(), crest::v1::DAEMON_READY);
  EXPECT_EQ((*agent)->Terminate(), 0);
}

}  // namespace
}  // namespace crest::agent
