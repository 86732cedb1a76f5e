#include "cli/node_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace crest::cli {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;

TEST(ProtoJson, SixtyFourBitCountersAreNumbersAndDefaultsArePrinted) {
  crest::v1::DaemonReady ready;
  ready.set_pid(4242);
  ready.set_npu_block_num(2176);
  ready.set_pinned_cpu_list("1");
  std::string text = ProtoJson(ready);
  EXPECT_THAT(text, EndsWith("}\n"));
  nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_TRUE(j["npuBlockNum"].is_number_integer()) << text;
  EXPECT_EQ(j["npuBlockNum"].get<int64_t>(), 2176);
  EXPECT_EQ(j["pid"], 4242);
  EXPECT_EQ(j["pinnedCpuList"], "1");
  EXPECT_EQ(j["businessUrl"], "");  // unset fields are there too

  crest::v1::DaemonStatus status;
  status.set_restarts(3);
  nlohmann::json s = nlohmann::json::parse(ProtoJson(status));
  ASSERT_TRUE(s["restarts"].is_number_integer()) << s.dump();
  EXPECT_EQ(s["restarts"].get<int64_t>(), 3);
}

TEST(NodeText, ReadySaysWhereNpuBlockNumCameFromOrWhyItIsUnknown) {
  crest::v1::DaemonReady ready;
  ready.set_npu_block_num(2176);
  ready.set_npu_block_source("executor KV cache overview");
  EXPECT_THAT(DaemonReadyText(ready),
              AllOf(HasSubstr("npuBlockNum 2176,"),
                    HasSubstr("npuBlockNum from: executor KV cache overview\n")));
  crest::v1::DaemonReady unknown;
  unknown.set_npu_block_num_unknown("npuBlockNum unknown: only warm-up caches were logged");
  EXPECT_THAT(DaemonReadyText(unknown),
              AllOf(HasSubstr("npuBlockNum unknown,"),
                    HasSubstr("npuBlockNum: npuBlockNum unknown: only warm-up caches")));
}

TEST(NodeText, ReadyListsTheEffectiveValuesTyped) {
  crest::v1::DaemonReady ready;
  ready.set_pid(7);
  ready.set_npu_block_num(1000);
  auto* mbs = ready.add_effective();
  mbs->set_key("maxBatchSize");
  mbs->set_int_value(77);
  auto* select = ready.add_effective();
  select->set_key("supportSelectBatch");
  select->set_bool_value(true);
  auto* prefill = ready.add_effective();
  prefill->set_key("prefillTimeMsPerReq");
  prefill->set_double_value(150.5);
  std::string text = DaemonReadyText(ready);
  EXPECT_THAT(text, HasSubstr("ready: pid 7, npuBlockNum 1000, pinned to nothing, after "));
  EXPECT_THAT(text, HasSubstr("  maxBatchSize = 77\n"));
  EXPECT_THAT(text, HasSubstr("  supportSelectBatch = true\n"));
  EXPECT_THAT(text, HasSubstr("  prefillTimeMsPerReq = 150.5\n"));
}

TEST(NodeText, InfoListsSlotsWithTheirDaemons) {
  crest::v1::NodeInfo info;
  info.set_node_name("n1");
  auto* slot = info.add_slots();
  slot->set_index(2);
  slot->add_npus(2);
  slot->set_port(1030);
  slot->mutable_daemon()->set_state(crest::v1::DAEMON_READY);
  info.set_slot_cpu_rule("request");
  std::string text = NodeInfoText(info);
  EXPECT_THAT(text,
              HasSubstr("slot 2:   npus 2, cpus not pinned, port 1030, daemon DAEMON_READY\n"));
  EXPECT_THAT(text, HasSubstr("slot cpu: request\n"));
  EXPECT_THAT(text, HasSubstr("npus:     none ("));
}

TEST(NodeText, InfoShowsEachNpusOwnMemoryKindAndIds) {
  crest::v1::NodeInfo info;
  crest::v1::NpuDevice* duo = info.add_npus();
  duo->set_id(3);
  duo->set_name("310P3");
  duo->set_health("OK");
  duo->set_card_id(2);
  duo->set_chip_id(1);
  duo->set_memory_kind(crest::v1::NPU_MEMORY_DDR);
  duo->set_memory_used_mib(35204);
  duo->set_memory_total_mib(43693);
  crest::v1::NpuDevice* a2 = info.add_npus();
  a2->set_id(0);
  a2->set_name("910B3");
  a2->set_health("OK");
  a2->set_memory_kind(crest::v1::NPU_MEMORY_HBM);
  a2->set_memory_used_mib(3314);
  a2->set_memory_total_mib(65536);
  std::string text = NodeInfoText(info);
  EXPECT_THAT(text, HasSubstr("npu 3:    310P3 OK DDR 35204/43693 MiB (card 2 chip 1)\n"));
  EXPECT_THAT(text, HasSubstr("npu 0:    910B3 OK HBM 3314/65536 MiB (card 0 chip 0)\n"));
}

TEST(NodeText, StopSaysWhetherADaemonRanAndHowItEnded) {
  crest::v1::StopDaemonReply reply;
  EXPECT_EQ(DaemonStopText(reply), "no daemon was running\n");
  reply.set_was_running(true);
  reply.set_exit_code(0);
  EXPECT_EQ(DaemonStopText(reply), "stopped (exit code 0)\n");
  reply.set_killed(true);
  reply.set_exit_code(137);
  EXPECT_EQ(DaemonStopText(reply), "stopped (exit code 137, SIGKILL)\n");
}

TEST(NodeText, TuningWithNothingRecorded) {
  EXPECT_EQ(HostTuningText(crest::v1::HostTuningReply()), "nothing recorded; nothing to restore\n");
}

}  // namespace
}  // namespace crest::cli
