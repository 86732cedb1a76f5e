#include "sim/startup_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct Fixture {
  Profile profile;
  SimConfig config;
  KvCacheLayout kv;
};

// The reference case: LLaMA3-8B, npuMemSize 17, 2176 blocks (2175 usable).
Fixture Reference() {
  Fixture f;
  f.profile = LoadProfileFile(testing::ProfileDir() + "/llama3-8b-910b.json").value();
  f.config.model_name = "LLaMa3-8B";
  f.config.npu_mem_size_gb = 17;
  f.kv = PlanKvCache(f.profile, f.config).value();
  return f;
}

StartupLines Lines(const Fixture& f, StartupStyle style) {
  return StartupLinesFor(style, f.config, f.kv, f.profile, "/srv/conf/config.json", 4242);
}

std::vector<std::string> Texts(const std::vector<SimLogLine>& lines) {
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (const SimLogLine& l : lines) out.push_back(l.text);
  return out;
}

TEST(StartupLinesTest, CurrentStyleWarmsUpOnOneBlockAndLogsTheServingCacheAtTheFirstRequest) {
  const Fixture f = Reference();
  StartupLines lines = Lines(f, {LogStyle::k2x, true});
  std::vector<std::string> before = Texts(lines.before_success);
  EXPECT_THAT(before, Contains(HasSubstr("k_caches[0].shape=torch.Size([1, 128, 8, 128])")));
  EXPECT_THAT(before, Not(Contains(HasSubstr("torch.Size([2176,"))));
  EXPECT_THAT(before, Contains(HasSubstr("Initialized KV cache overview: CPU blocks = 0, NPU "
                                         "blocks = 2175, MaxPosEmb = 2560")));
  const SimLogLine& pid = lines.before_success.back();
  EXPECT_EQ(pid.text, "g_mainPid = 4242");
  EXPECT_TRUE(pid.to_stderr);
  EXPECT_FALSE(pid.logged);
  EXPECT_EQ(lines.success.text, "Daemon start success!");
  EXPECT_THAT(Texts(lines.after_success),
              Contains("ConfigManager: Load Config from /srv/conf/config.json."));
  EXPECT_THAT(lines.first_forward.text,
              HasSubstr("<<<<<<< ori k_caches[0].shape=torch.Size([2176, 128, 8, 128])"));
  EXPECT_EQ(lines.first_forward.level, "INFO");
}

TEST(StartupLinesTest, WithoutTheExecutorLineOnlyTheFirstRequestTellsTheCount) {
  StartupLines lines = Lines(Reference(), {LogStyle::k2x, false});
  EXPECT_THAT(Texts(lines.before_success), Not(Contains(HasSubstr("NPU blocks ="))));
  EXPECT_THAT(lines.first_forward.text, HasSubstr("torch.Size([2176,"));
}

TEST(StartupLinesTest, OlderStyleWarmsUpOnTwentyFourBlocksThenEndWarmUp) {
  StartupLines lines = Lines(Reference(), {LogStyle::k1_0, true});
  std::vector<std::string> before = Texts(lines.before_success);
  ASSERT_GE(before.size(), 4u);
  EXPECT_THAT(before[0], HasSubstr("<<<<<<< ori k_caches[0].shape=torch.Size([24, 128, 8, 128])"));
  EXPECT_THAT(before[1], HasSubstr("<<<<<<<after transdata k_caches[0].shape=torch.Size([24,"));
  EXPECT_THAT(before, Contains(HasSubstr("warmup_memory(GB):  0.19")));
  EXPECT_THAT(before.back(), HasSubstr("---------------end warm_up---------------"));
  EXPECT_THAT(before, Not(Contains(HasSubstr("NPU blocks ="))));
  EXPECT_THAT(Texts(lines.after_success), IsEmpty());
  EXPECT_THAT(lines.first_forward.text, HasSubstr("torch.Size([2176,"));
}

TEST(StartupLinesTest, MemoryWarningsOnlyWhenTheirConditionsHold) {
  Fixture f = Reference();
  auto warnings = [](const StartupLines& lines) {
    std::vector<std::string> out;
    for (const SimLogLine& l : lines.before_success) {
      if (l.level == "WARNING") out.push_back(l.text);
    }
    return out;
  };
  EXPECT_THAT(warnings(Lines(f, {})), IsEmpty());
  f.profile.kv_cache_int8 = true;
  f.profile.multimodal = true;
  f.config.npu_mem_size_gb = 17;  // a fixed size: no multimodal note
  EXPECT_THAT(warnings(Lines(f, {})),
              ElementsAreArray({HasSubstr("AclNN attention backend may result in NPU out of "
                                          "memory.")}));
  f.config.npu_mem_size_gb = -1;
  for (LogStyle style : {LogStyle::k2x, LogStyle::k1_0}) {
    std::vector<std::string> both = warnings(Lines(f, {style, true}));
    EXPECT_THAT(both, Contains(HasSubstr("AclNN attention backend")));
    EXPECT_THAT(both, Contains(AllOf(HasSubstr("When `npuMemSize` set to -1, the multimodal"),
                                     HasSubstr("out of memory during inference"))));
  }
}

TEST(StartupLinesTest, StylesAreNamedAndOthersRefused) {
  EXPECT_EQ(*ParseLogStyle("2.x"), LogStyle::k2x);
  EXPECT_EQ(*ParseLogStyle("1.0"), LogStyle::k1_0);
  EXPECT_THAT(ParseLogStyle("2.0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"2.0\" is not a style"), HasSubstr("2.x or 1.0"))));
}

}  // namespace
}  // namespace crest::sim
