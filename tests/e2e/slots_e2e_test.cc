// End to end with daemon slots: one crest-agent running four slots of
// mindie-sim (four cards of its simulated host) and a campaign with
// `parallel: 4` that measures four points at once on that one node; and the
// same campaign with the agent killed while its four daemons run; and eight
// slots, whose first round is the default search's wide one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

#include "agent/slot_setup.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

constexpr int kSlots = 4;
constexpr char kModel[] = "LLaMa2-13B";

class SlotsE2e : public CampaignFixture {
 protected:
  // One node of four slots, registered with the controller. Its fake host:
  // two NUMA nodes of four CPUs, so each daemon's share is one CPU and the
  // clients get the other node (the shares are planned, not applied: the
  // campaign does not pin, as this machine has fewer CPUs than the plan).
  // With `slots` 8, two NUMA nodes of eight CPUs.
  std::string StartSlotsAgent(const std::string& controller, int slots = kSlots) {
    AgentOptions options;
    options.controller = controller;
    options.extra_yaml = absl::StrCat("slots: ", slots, "\n");
    options.sysfs.numa_nodes = {{}, {}};
    for (uint32_t cpu = 0; cpu < 2U * static_cast<uint32_t>(slots); ++cpu) {
      options.sysfs.numa_nodes[cpu < static_cast<uint32_t>(slots) ? 0 : 1].push_back(cpu);
    }
    return StartAgentWith("node-1", kModel, options);
  }

  std::string SlotConfig(uint32_t slot) const {
    return agent::SlotStateDir(dir_.File("node-1") + "/state", slot) + "/conf/config.json";
  }

  nlohmann::json NodeInfo(const std::string& agent) {
    std::vector<std::string> args = {"node", "info", "--agent", agent, "--output", "json"};
    for (auto& a : Tls(cli_cert_)) args.push_back(a);
    CommandResult r = RunBinary("crest", args, absl::Seconds(30));
    EXPECT_EQ(r.code, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
  }

  static std::string Spec(const std::string& name, int parallel = kSlots) {
    return absl::StrCat("name: ", name, "\nmodels: [{name: ", kModel, ", parallel: ", parallel,
                        "}]\nclient: {request_count: 400, max_output_len: 64, task_kind: text}\n");
  }

  // The model's report once campaign `id` has ended: it succeeded, and no
  // run was lost or counted twice.
  nlohmann::json SucceededModel(const std::string& id) {
    CommandResult watch = Watch(id);
    EXPECT_EQ(watch.code, 0) << watch.output << controller_->output();
    nlohmann::json report = Report(id);
    EXPECT_EQ(report["state"], "succeeded") << report.dump(2);
    nlohmann::json m = Model(report, kModel);
    ExpectNothingLostOrCountedTwice(m);
    return m;
  }

  // The most trials whose [started, finished) intervals overlap at once, and
  // the slots they ran in.
  static std::pair<int, std::set<int>> MostAtOnce(const nlohmann::json& trials) {
    std::vector<std::pair<absl::Time, absl::Time>> spans;
    std::vector<int> slots;
    for (const auto& t : trials) {
      absl::Time from;
      absl::Time to;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, t["started"].get<std::string>(), &from, &err) ||
          !absl::ParseTime(absl::RFC3339_full, t["finished"].get<std::string>(), &to, &err)) {
        continue;
      }
      spans.emplace_back(from, to);
      slots.push_back(t["slot"].get<int>());
    }
    int most = 0;
    std::set<int> where;
    for (size_t i = 0; i < spans.size(); ++i) {
      std::set<int> at;
      for (size_t j = 0; j < spans.size(); ++j) {
        if (spans[j].first <= spans[i].first && spans[i].first < spans[j].second) {
          at.insert(slots[j]);
        }
      }
      if (static_cast<int>(at.size()) > most) {
        most = static_cast<int>(at.size());
        where = at;
      }
    }
    return {most, where};
  }
};

TEST_F(SlotsE2e, FourSlotsOfOneNodeMeasureFourPointsAtOnce) {
  std::string controller = StartController(dir_.File("ctl"));
  const std::string agent = StartSlotsAgent(controller);
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());

  // Four slots on four cards, ports and CPUs of their own.
  nlohmann::json info = NodeInfo(agent);
  ASSERT_EQ(info["slots"].size(), size_t{kSlots}) << info.dump(2);
  std::set<int> cards;
  std::set<int> ports;
  std::set<uint32_t> cpus;
  std::map<int, std::string> before;
  for (const auto& s : info["slots"]) {
    const int index = s.value("index", 0);
    for (const auto& n : s["npus"]) EXPECT_TRUE(cards.insert(n.get<int>()).second) << s.dump();
    for (const char* key : {"port", "managementPort", "metricsPort"}) {
      EXPECT_TRUE(ports.insert(s[key].get<int>()).second) << s.dump();
    }
    auto list = ParseCpuList(s["cpuList"].get<std::string>());
    ASSERT_TRUE(list.ok() && !list->empty()) << s.dump();
    for (uint32_t c : *list) EXPECT_TRUE(cpus.insert(c).second) << s.dump();
    before[index] = ReadFileToString(SlotConfig(static_cast<uint32_t>(index))).value_or("");
  }
  EXPECT_EQ(cards.size(), size_t{kSlots});

  const nlohmann::json m = SucceededModel(Submit(Spec("slots")));
  ASSERT_FALSE(m["trials"].empty());
  // The search used the four slots, four trials at once on four of them.
  std::set<int> used;
  for (const auto& t : m["trials"]) {
    EXPECT_EQ(t["node"], "node-1");
    used.insert(t["slot"].get<int>());
  }
  EXPECT_EQ(used, (std::set<int>{0, 1, 2, 3})) << m["trials"].dump(2);
  auto [most, where] = MostAtOnce(m["trials"]);
  EXPECT_EQ(most, kSlots) << m["trials"].dump(2);
  EXPECT_EQ(where.size(), size_t{kSlots});
  ASSERT_FALSE(m["best"].is_null());

  // Every slot stopped, every working copy as it was before the campaign.
  info = NodeInfo(agent);
  for (const auto& s : info["slots"]) {
    const int index = s.value("index", 0);
    EXPECT_EQ(s["daemon"].value("state", ""), "DAEMON_STOPPED") << s.dump();
    EXPECT_EQ(ReadFileToString(SlotConfig(static_cast<uint32_t>(index))).value_or("?"),
              before[index])
        << "slot " << index;
    EXPECT_FALSE(std::filesystem::exists(
        agent::SlotStateDir(dir_.File("node-1") + "/state", static_cast<uint32_t>(index)) +
        "/config-json-backup.json"));
  }
  for (const auto& npu : info["npus"]) EXPECT_EQ(npu.value("hbmUsedMib", "0"), "0") << npu.dump();
}

// Eight slots make the default search's first round wide (docs/search.md):
// eight points 2% apart over the knee's window, measured at once.
TEST_F(SlotsE2e, EightSlotsMeasureTheKneesWindowInOneRound) {
  std::string controller = StartController(dir_.File("ctl"));
  const std::string agent = StartSlotsAgent(controller, 8);
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());
  const nlohmann::json m = SucceededModel(Submit(Spec("wide", 8)));
  auto [most, where] = MostAtOnce(m["trials"]);
  EXPECT_EQ(most, 8) << m["trials"].dump(2);
  // The first round: eight points over the window, evenly spaced (2% of the
  // guess, to the rounding), each run beside the seven others.
  std::vector<int64_t> first;
  for (const auto& t : m["trials"]) {
    if (first.size() == 8) break;
    first.push_back(t["maxBatchSize"].get<int64_t>());
    EXPECT_EQ(t["neighbours"].get<int>(), 7) << t.dump(2);
  }
  ASSERT_EQ(first.size(), 8u);
  std::sort(first.begin(), first.end());
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < first.size(); ++i) gaps.push_back(first[i] - first[i - 1]);
  const auto [fewest, most_apart] = std::minmax_element(gaps.begin(), gaps.end());
  EXPECT_GE(*fewest, 1) << absl::StrJoin(first, " ");
  EXPECT_LE(*most_apart - *fewest, 1) << absl::StrJoin(first, " ");
  const double span =
      static_cast<double>(first.back() - first.front()) / static_cast<double>(first.front());
  EXPECT_GT(span, 0.12) << absl::StrJoin(first, " ");
  EXPECT_LT(span, 0.17) << absl::StrJoin(first, " ");
}

TEST_F(SlotsE2e, AnAgentKilledWithFourDaemonsPutsBackEverySlotAndTheCampaignEnds) {
  std::string controller = StartController(dir_.File("ctl"));
  const std::string agent = StartSlotsAgent(controller);
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());
  std::string id = Submit(Spec("killed"));
  // The fourth slot's first trial has started: four daemons run.
  ASSERT_TRUE(controller_->WaitForLine("on node-1#3", absl::Seconds(60)).ok())
      << controller_->output();
  RestartAgent("node-1");
  const nlohmann::json m = SucceededModel(id);
  int interrupted = 0;
  for (const auto& t : m["trials"]) interrupted += t["status"] == "interrupted" ? 1 : 0;
  EXPECT_GE(interrupted, 1) << m["trials"].dump(2);
  // Nothing of the killed agent's slots is left.
  nlohmann::json info = NodeInfo(agent);
  for (const auto& s : info["slots"]) {
    EXPECT_EQ(s["daemon"].value("state", ""), "DAEMON_STOPPED") << s.dump();
    const auto text = ReadFileToString(SlotConfig(s.value("index", 0u)));
    ASSERT_TRUE(text.ok());
    EXPECT_THAT(*text, HasSubstr("\"maxBatchSize\" : 200")) << "slot " << s.dump();
  }
  for (const auto& npu : info["npus"]) EXPECT_EQ(npu.value("hbmUsedMib", "0"), "0") << npu.dump();
}

}  // namespace
}  // namespace crest::e2e
