// End to end: an agent whose daemon speaks like current MindIE-LLM
// (mindie-sim run through a `daemon:` section, as a real daemon is): a
// one-block warm-up cache before READY, the serving cache of N blocks only
// at the first request, no executor line, and both WARNING lines that mention
// memory. The campaign's auto range must come from N, never from the warm-up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/listen_port.h"
#include "sim/config.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "tests/agent/agent_test_util.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

using RealLogE2e = CampaignFixture;

TEST_F(RealLogE2e, AutoRangeComesFromTheServingCacheLoggedAtTheFirstRequest) {
  const std::string root = dir_.File("node-1");
  // LLaMA3-8B whose KV cache is int8 (the AclNN note) and taken as
  // multimodal (the npuMemSize -1 note), with npuMemSize -1, on a 32 GiB
  // card: floor((32 - 3 - 14.96) * 0.8) = 11 GiB of cache, about 1400
  // blocks, so a short run fills the range's first batch.
  const std::string profile_path = root + "/profile.json";
  ASSERT_TRUE(MakeDirectories(root).ok());
  ASSERT_TRUE(crest::agent::testing::WriteProfileWithMemoryWarnings(profile_path, 32).ok());
  absl::StatusOr<std::string> profile = ReadFileToString(profile_path);
  ASSERT_TRUE(profile.ok()) << profile.status();
  std::vector<PortReservation> ports;
  absl::StatusOr<std::string> config_json = crest::agent::testing::WriteSimConfigJson(
      root + "/mindie", ports,
      {{{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "npuMemSize"}, "-1"}});
  ASSERT_TRUE(config_json.ok()) << config_json.status();

  // N as the simulated daemon sizes its serving cache.
  absl::StatusOr<sim::Profile> parsed = sim::ParseProfile(*profile);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<sim::SimConfig> sim_config = sim::LoadConfig(*config_json);
  ASSERT_TRUE(sim_config.ok()) << sim_config.status();
  absl::StatusOr<sim::KvCacheLayout> kv = sim::PlanKvCache(*parsed, *sim_config);
  ASSERT_TRUE(kv.ok()) << kv.status();
  const int64_t n = kv->computed_blocks;
  ASSERT_GT(n, 1000);
  ASSERT_LT(n, 2000);

  std::string controller = StartController(dir_.File("ctl"));
  AgentOptions options;
  options.controller = controller;
  options.daemon_section =
      absl::StrCat("daemon:\n  binary: ", BinDir(), "/mindie-sim\n  install_dir: ", root,
                   "/mindie\n  config_json: conf/config.json\n  args: [--config, ", *config_json,
                   ", --profile, ", profile_path, ", --time-scale, ", kTimeScale,
                   ", --seed, 7, --log-style, \"2.x\", --no-executor-line]\n");
  StartAgentWith("node-1", "LLaMa3-8B", options);
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());
  std::string id = Submit(R"(name: real-log
models: [{name: LLaMa3-8B}]
search: {strategy: practice, max_trials: 2, tolerance: 0.5}
client: {request_count: 1100, max_output_len: 64}
)");
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;

  nlohmann::json report = Report(id);
  const auto& llama3 = Model(report, "LLaMa3-8B");
  ASSERT_FALSE(llama3["trials"].empty()) << llama3.dump(2);
  for (const auto& t : llama3["trials"]) EXPECT_EQ(t["npuBlockNum"], n) << t.dump();
  // The auto range's start with MaxOutputLen 64 (one block per sequence for
  // the prompt, one for the output; campaign_e2e_test's rule): N / 3.
  EXPECT_EQ(*MeasuredPoints(llama3).begin(), n / 3) << llama3.dump(2);

  // What the daemon printed: the warm-up cache, both warnings, the serving
  // cache after READY; and what the agent made of it.
  absl::StatusOr<std::string> log = ReadFileToString(root + "/state/daemon.log");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_THAT(*log, HasSubstr("k_caches[0].shape=torch.Size([1, "));
  EXPECT_THAT(*log, HasSubstr("[WARNING] [flash_causal_lm.py-219] : If the model's "
                              "max_positional_embedding is large, AclNN attention backend may "
                              "result in NPU out of memory."));
  EXPECT_THAT(*log, HasSubstr("the multimodal model may exhibit poor performance or may be out "
                              "of memory during inference"));
  const size_t ready = log->find("Daemon start success!");
  ASSERT_NE(ready, std::string::npos);
  EXPECT_NE(log->find(absl::StrCat("k_caches[0].shape=torch.Size([", n, ", "), ready),
            std::string::npos)
      << "the serving cache's line comes after READY";
  EXPECT_THAT(agents_.at("node-1")->output(),
              HasSubstr(absl::StrCat("npuBlockNum ", n,
                                     " (k_caches shape at the first forward "
                                     "pass)")));
}

}  // namespace
}  // namespace crest::e2e
