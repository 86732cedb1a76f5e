#include "agent/config_json_editor.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include "common/file_util.h"
#include "common/status.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  const char* src = std::getenv("CREST_SOURCE_DIR");
  std::string root = src != nullptr ? src : ".";
  auto text = ReadFileToString(root + "/tests/agent/testdata/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// CREST_UPDATE_GOLDEN=1 rewrites the expected files (then review the diff).
void ExpectGolden(const std::string& actual, const std::string& name) {
  if (std::getenv("CREST_UPDATE_GOLDEN") != nullptr) {
    CREST_ASSERT_OK(WriteFileAtomically(
        std::string(std::getenv("CREST_SOURCE_DIR")) + "/tests/agent/testdata/" + name, actual));
    return;
  }
  EXPECT_EQ(actual, TestData(name));
}

std::vector<JsonEdit> TrialEdits() {
  return {{{"BackendConfig", "ScheduleConfig", "maxBatchSize"}, "400"},
          {{"BackendConfig", "ScheduleConfig", "supportSelectBatch"}, "true"},
          {{"BackendConfig", "ScheduleConfig", "prefillTimeMsPerReq"}, "600"},
          // Absent in the file: appended like its neighbours.
          {{"BackendConfig", "ScheduleConfig", "decodeTimeMsPerReq"}, "50"}};
}

TEST(ApplyJsonEditsTest, GoldenMindieStyleFile) {
  auto out = ApplyJsonEdits(TestData("config_in.json"), TrialEdits());
  CREST_ASSERT_OK(out);
  ExpectGolden(*out, "config_expected.json");
}

TEST(ApplyJsonEditsTest, GoldenCompactFile) {
  auto out = ApplyJsonEdits(TestData("compact_in.json"), TrialEdits());
  CREST_ASSERT_OK(out);
  ExpectGolden(*out, "compact_expected.json");
}

TEST(ApplyJsonEditsTest, NoEditsKeepsTheTextExactly) {
  std::string in = TestData("config_in.json");
  auto out = ApplyJsonEdits(in, {});
  CREST_ASSERT_OK(out);
  EXPECT_EQ(*out, in);
}

TEST(ApplyJsonEditsTest, ArrayIndexAndStringValues) {
  auto out = ApplyJsonEdits(
      TestData("config_in.json"),
      {{{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "modelName"}, "\"LLaMa3-8B\""},
       {{"ServerConfig", "port"}, "31025"}});
  CREST_ASSERT_OK(out);
  auto view = ParseMindieConfig(*out);
  CREST_ASSERT_OK(view);
  EXPECT_EQ(view->model_name, "LLaMa3-8B");
  EXPECT_EQ(view->port, 31025);
  EXPECT_EQ(view->BusinessUrl(), "http://127.0.0.1:31025");
  EXPECT_EQ(view->ManagementUrl(), "http://127.0.0.2:1026");
  // A key that only looks like the target inside a string is not touched.
  EXPECT_THAT(*out, HasSubstr("\"x\\\"y\""));
}

TEST(ApplyJsonEditsTest, Errors) {
  EXPECT_THAT(ApplyJsonEdits("{\"a\": ", {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(ApplyJsonEdits("{}", {{{"BackendConfig", "ScheduleConfig", "maxBatchSize"}, "1"}}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("BackendConfig.ScheduleConfig")));
  EXPECT_THAT(ApplyJsonEdits("{\"a\": 1}", {{{"a"}, "not json"}}),
              StatusIs(absl::StatusCode::kInternal));
}

TEST(ApplyJsonEditsTest, AKeyTwiceInOneObjectIsRefusedNamingItAndWhere) {
  // The fuzzer's find: a parser keeps the second ScheduleConfig, the scanner
  // would have edited the first, and maxBatchSize would not have changed.
  const std::string twice = R"({"BackendConfig": {
    "ScheduleConfig": {"maxPrefillBatchSize": 50},
    "ScheduleConfig": {"maxBatchSize": 200}}})";
  const std::vector<JsonEdit> edit = {{{"BackendConfig", "ScheduleConfig", "maxBatchSize"}, "435"}};
  EXPECT_THAT(ApplyJsonEdits(twice, edit),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key \"ScheduleConfig\" appears twice in the object at "
                                 "/BackendConfig")));
  EXPECT_THAT(
      MindieConfig::Parse(R"({"ServerConfig": {"port": 1, "port": 2}, "BackendConfig": {}})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("key \"port\" appears twice in the object at /ServerConfig")));
  EXPECT_THAT(ApplyJsonEdits(R"({"a": [{"b": 1}, {"c": 1, "c": 2}]})", {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"c\" appears twice in the object at /a/1")));
  // The same key in different objects is no duplicate.
  CREST_EXPECT_OK(ApplyJsonEdits(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [ {"k": 3} ]})", {}));
}

// The overrides of TrialEdits, typed.
std::vector<ScheduleValue> TrialValues() {
  return {{"maxBatchSize", int64_t{400}},
          {"supportSelectBatch", true},
          {"prefillTimeMsPerReq", int64_t{600}},
          {"decodeTimeMsPerReq", int64_t{50}}};
}

TEST(ToJsonLiteralTest, EveryType) {
  EXPECT_EQ(ToJsonLiteral(int64_t{-400}), "-400");
  EXPECT_EQ(ToJsonLiteral(2.5), "2.5");
  EXPECT_EQ(ToJsonLiteral(true), "true");
  EXPECT_EQ(ToJsonLiteral(false), "false");
  EXPECT_EQ(ToJsonLiteral(std::string("a\"b")), "\"a\\\"b\"");
}

// The text edited from typed values is the editor's, byte for byte, and the
// view kept in step with it is what parsing that text would give.
TEST(MindieConfigTest, SetScheduleKeepsTextAndViewInStep) {
  auto config = MindieConfig::Parse(TestData("config_in.json"));
  CREST_ASSERT_OK(config);
  for (const ScheduleValue& value : TrialValues()) CREST_ASSERT_OK(config->SetSchedule(value));
  EXPECT_EQ(config->text(), TestData("config_expected.json"));
  EXPECT_EQ(config->original(), TestData("config_in.json"));
  auto reparsed = ParseMindieConfig(config->text());
  CREST_ASSERT_OK(reparsed);
  EXPECT_EQ(config->view().schedule, reparsed->schedule);
  EXPECT_EQ(config->view().BusinessUrl(), reparsed->BusinessUrl());
  EXPECT_EQ(config->view().max_input_token_len, reparsed->max_input_token_len);
}

TEST(MindieConfigTest, TypedScheduleValues) {
  auto config = MindieConfig::Parse(TestData("config_in.json"));
  CREST_ASSERT_OK(config);
  const MindieConfigView& view = config->view();
  ASSERT_NE(view.FindSchedule("maxBatchSize"), nullptr);
  EXPECT_EQ(*view.FindSchedule("maxBatchSize"), ConfigValue(int64_t{200}));
  EXPECT_EQ(*view.FindSchedule("supportSelectBatch"), ConfigValue(false));
  EXPECT_EQ(*view.FindSchedule("templateType"), ConfigValue(std::string("Standard")));
  EXPECT_EQ(view.FindSchedule("decodeTimeMsPerReq"), nullptr);
  auto fractional = ParseMindieConfig(
      R"({"ServerConfig": {}, "BackendConfig": {"ScheduleConfig": {"a": 1.5, "b": [1], "c": 18446744073709551615}}})");
  CREST_ASSERT_OK(fractional);
  EXPECT_EQ(*fractional->FindSchedule("a"), ConfigValue(1.5));
  EXPECT_EQ(fractional->FindSchedule("b"), nullptr);
  EXPECT_EQ(*fractional->FindSchedule("c"), ConfigValue(18446744073709551615.0));
}

TEST(MindieConfigTest, Errors) {
  EXPECT_THAT(MindieConfig::Parse("{\"a\": "), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MindieConfig::Parse("{\"a\": 1}"), StatusIs(absl::StatusCode::kInvalidArgument));
  auto config = MindieConfig::Parse(R"({"ServerConfig": {}, "BackendConfig": {}})");
  CREST_ASSERT_OK(config);
  EXPECT_THAT(config->SetSchedule({"maxBatchSize", int64_t{1}}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("BackendConfig.ScheduleConfig")));
  EXPECT_EQ(config->text(), config->original());
  EXPECT_TRUE(config->view().schedule.empty());
}

TEST(ParseMindieConfigTest, ReadsServerAndSchedule) {
  auto view = ParseMindieConfig(TestData("config_in.json"));
  CREST_ASSERT_OK(view);
  EXPECT_FALSE(view->https_enabled);
  EXPECT_EQ(view->metrics_port, 1027);
  EXPECT_EQ(view->max_input_token_len, 2048);
  EXPECT_EQ(view->model_name, "llama_65b");
  ASSERT_FALSE(view->schedule.empty());
  EXPECT_EQ(view->schedule[0].first, "templateType");
}

// Found by tests/fuzz/config_json_fuzzer: a port of 10e27 was converted to
// int with undefined behaviour; 80.5 or -1 would have been truncated or kept.
TEST(ParseMindieConfigTest, APortOrLengthThatIsNotAWholeNumberInRangeIsRefusedNamingIt) {
  for (
      const auto& [field, expected] : std::vector<std::pair<std::string, std::string>>{
          {R"("ServerConfig": {"port": 10e27}, "BackendConfig": {})",
           "ServerConfig.port is 1e+28; expected a whole number in [1, 65535]"},
          {R"("ServerConfig": {"managementPort": 80.5}, "BackendConfig": {})",
           "ServerConfig.managementPort is 80.5; expected"},
          {R"("ServerConfig": {"metricsPort": 70000}, "BackendConfig": {})",
           "ServerConfig.metricsPort is 70000; expected"},
          {R"("ServerConfig": {"port": 18446744073709551615}, "BackendConfig": {})",
           "ServerConfig.port is 18446744073709551615; expected"},
          {R"("ServerConfig": {}, "BackendConfig": {"ModelDeployConfig": {"maxInputTokenLen": -1}})",
           "BackendConfig.ModelDeployConfig.maxInputTokenLen is -1; expected a whole number in "
           "[0, "}}) {
    EXPECT_THAT(ParseMindieConfig("{" + field + "}"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(expected)))
        << field;
  }
  auto view = ParseMindieConfig(R"({"ServerConfig": {"port": 65535}, "BackendConfig": {}})");
  CREST_ASSERT_OK(view);
  EXPECT_EQ(view->port, 65535);
}

class ConfigJsonFileTest : public ::testing::Test {
 protected:
  // What a daemon start does: the original, one value set, written.
  static absl::Status Apply(ConfigJsonFile& file, const ScheduleValue& value) {
    CREST_ASSIGN_OR_RETURN(MindieConfig config, file.Load());
    CREST_RETURN_IF_ERROR(config.SetSchedule(value));
    return file.Write(config);
  }

  crest::testing::TempDir dir_;
  std::string path_ = dir_.File("config.json");
  std::string state_ = dir_.File("state");
};

TEST_F(ConfigJsonFileTest, EveryApplyStartsFromTheOriginalAndRestorePutsItBack) {
  std::string original = TestData("config_in.json");
  CREST_ASSERT_OK(WriteFileAtomically(path_, original, 0640));
  ConfigJsonFile file(path_, state_);
  CREST_ASSERT_OK(Apply(file, {"maxBatchSize", int64_t{300}}));
  EXPECT_TRUE(file.HasBackup());
  CREST_ASSERT_OK(Apply(file, {"maxPrefillTokens", int64_t{9000}}));
  auto view = ParseMindieConfig(*ReadFileToString(path_));
  CREST_ASSERT_OK(view);
  // The second apply edited the original, not the first apply's result.
  EXPECT_THAT(view->schedule, ::testing::Contains(std::make_pair(std::string("maxBatchSize"),
                                                                 ConfigValue(int64_t{200}))));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // A new instance (after a crash) finds the backup and restores.
  ConfigJsonFile after_crash(path_, state_);
  CREST_ASSERT_OK(after_crash.Restore());
  EXPECT_EQ(*ReadFileToString(path_), original);
  EXPECT_FALSE(after_crash.HasBackup());
  CREST_EXPECT_OK(after_crash.Restore());  // nothing to do
}

TEST_F(ConfigJsonFileTest, FailedEditWritesNothing) {
  std::string original = R"({"ServerConfig": {}, "BackendConfig": {}})";
  CREST_ASSERT_OK(WriteFileAtomically(path_, original));
  ConfigJsonFile file(path_, state_);
  EXPECT_FALSE(Apply(file, {"maxBatchSize", int64_t{1}}).ok());
  EXPECT_EQ(*ReadFileToString(path_), original);
  EXPECT_FALSE(file.HasBackup());
}

TEST_F(ConfigJsonFileTest, BackupOfAnotherFileIsRefused) {
  const std::string text = R"({"ServerConfig": {}, "BackendConfig": {"ScheduleConfig": {"a": 1}}})";
  CREST_ASSERT_OK(WriteFileAtomically(path_, text));
  ConfigJsonFile file(path_, state_);
  CREST_ASSERT_OK(Apply(file, {"a", int64_t{2}}));
  std::string other = dir_.File("other.json");
  CREST_ASSERT_OK(WriteFileAtomically(other, text));
  ConfigJsonFile wrong(other, state_);
  EXPECT_THAT(Apply(wrong, {"a", int64_t{3}}), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// ------------------------------------------- real config.json files (corpus)

std::string RealConfigDir() {
  const char* src = std::getenv("CREST_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/tests/data/real/config";
}

// What the agent reads of each daemon config.json of tests/data/real/config.
struct RealConfig {
  std::string file;
  ConfigFormat format;
  std::string business_url;
  std::string model;
  int world_size;
  int64_t max_batch_size;
};

const std::vector<RealConfig>& RealConfigs() {
  static const auto* cases = new std::vector<RealConfig>{
      {"1.0.RC1-qwen1.5-7b-8npu-OtherParam-ScheduleParam.json", ConfigFormat::kOtherParam,
       "http://127.0.0.1:1025", "qwen", 8, 200},
      {"1.0.0-deepseekr1-w8a8-2node-8npu-LogConfig.json", ConfigFormat::kServerBackend,
       "http://10.197.61.1:1025", "deepseekr1", 8, 8},
      {"2.0.RC1-deepseek-r1-distill-qwen-7b-4npu-noLogConfig.json", ConfigFormat::kServerBackend,
       "http://127.0.0.1:1025", "deepseek-r1", 4, 200},
      // 2.x defaults ship with https on.
      {"2.x-MindIE-LLM-653bca6-shipped-default-config.json", ConfigFormat::kServerBackend,
       "https://127.0.0.1:1025", "llama_65b", 4, 200},
      {"2.x-MindIE-LLM-master-shipped-default-config.json", ConfigFormat::kServerBackend,
       "https://127.0.0.1:1025", "llama_65b", 4, 200},
      {"2.x-MindIE-LLM-ut-config_manager-2x8npu-config.json", ConfigFormat::kServerBackend,
       "http://127.0.0.1:1025", "llama_65b", 8, 200},
  };
  return *cases;
}

class RealConfigTest : public ::testing::TestWithParam<RealConfig> {};

// Read, a trial's overrides applied to a copy and put back byte for byte.
TEST_P(RealConfigTest, ReadsAppliesAndRestoresTheFile) {
  const RealConfig& c = GetParam();
  absl::StatusOr<std::string> original = ReadFileToString(RealConfigDir() + "/" + c.file);
  CREST_ASSERT_OK(original);
  auto view = ParseMindieConfig(*original);
  CREST_ASSERT_OK(view);
  EXPECT_EQ(view->format, c.format);
  EXPECT_EQ(view->BusinessUrl(), c.business_url);
  EXPECT_EQ(view->model_name, c.model);
  EXPECT_EQ(view->world_size, c.world_size);
  ASSERT_NE(view->FindSchedule("maxBatchSize"), nullptr);
  EXPECT_EQ(std::get<int64_t>(*view->FindSchedule("maxBatchSize")), c.max_batch_size);

  crest::testing::TempDir dir;
  const std::string path = dir.File("config.json");
  CREST_ASSERT_OK(WriteFileAtomically(path, *original, 0640));
  ConfigJsonFile file(path, dir.File("state"));
  auto config = file.Load();
  CREST_ASSERT_OK(config);
  CREST_ASSERT_OK(config->SetSchedule({"maxBatchSize", int64_t{500}}));
  CREST_ASSERT_OK(config->SetSchedule({"maxPrefillBatchSize", int64_t{250}}));
  CREST_ASSERT_OK(config->SetSchedule({"supportSelectBatch", true}));
  CREST_ASSERT_OK(file.Write(*config));
  auto applied = ParseMindieConfig(*ReadFileToString(path));
  CREST_ASSERT_OK(applied);
  EXPECT_EQ(std::get<int64_t>(*applied->FindSchedule("maxBatchSize")), 500);
  EXPECT_EQ(std::get<int64_t>(*applied->FindSchedule("maxPrefillBatchSize")), 250);
  EXPECT_EQ(std::get<bool>(*applied->FindSchedule("supportSelectBatch")), true);
  EXPECT_EQ(applied->model_name, c.model);
  // Only the lines of the three values changed.
  std::vector<std::string> before = absl::StrSplit(*original, '\n');
  std::vector<std::string> after = absl::StrSplit(*ReadFileToString(path), '\n');
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    EXPECT_THAT(after[i], ::testing::AnyOf(HasSubstr("\"maxBatchSize\""),
                                           HasSubstr("\"maxPrefillBatchSize\""),
                                           HasSubstr("\"supportSelectBatch\"")))
        << "line " << i + 1;
  }
  CREST_ASSERT_OK(file.Restore());
  EXPECT_EQ(*ReadFileToString(path), *original);
}

INSTANTIATE_TEST_SUITE_P(RealConfigs, RealConfigTest, ::testing::ValuesIn(RealConfigs()),
                         [](const ::testing::TestParamInfo<RealConfig>& info) {
                           std::string name = info.param.file;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Files of the corpus that are no daemon config.json are refused by name,
// with what they are; every file has a row here or above.
TEST(RealConfigRefusedTest, OtherFilesAreRefusedSayingWhatTheyAre) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      // MindIE-LLM's runtime options file, not the daemon's.
      {"2.x-MindIE-LLM-master-mindie_llm-runtime-conf-config.json",
       "its top-level keys are: enable_reasoning"},
      // A unit test's fragment: BackendConfig without ServerConfig.
      {"2.x-MindIE-LLM-ut-utils-LogConfig-config.json", "ServerConfig is missing"},
      // MindIE-Motor's deployment file: a prefill and a decode daemon.
      {"A2-MindIE-Motor-user_config-pd.json", "MindIE-Motor"},
      {"A3-MindIE-Motor-user_config_base_A3-dp-tp-moe_ep.json", "MindIE-Motor"},
  };
  std::set<std::string> rows;
  for (const RealConfig& c : RealConfigs()) rows.insert(c.file);
  for (const auto& [file, why] : refused) {
    rows.insert(file);
    absl::StatusOr<std::string> text = ReadFileToString(RealConfigDir() + "/" + file);
    CREST_ASSERT_OK(text);
    EXPECT_THAT(MindieConfig::Parse(*text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)))
        << file;
  }
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(RealConfigDir())) {
    if (entry.path().extension() == ".json") files.insert(entry.path().filename().string());
  }
  EXPECT_EQ(files, rows);
}

// MindIE-Motor writes each role's section as that daemon's config.json: A3's
// dp, tp, moe_ep, plugin_params and nested models are read past, and the
// overrides land in its ScheduleConfig.
TEST(RealConfigRefusedTest, EachRoleOfAMotorFileIsADaemonConfig) {
  for (const char* file : {"A2-MindIE-Motor-user_config-pd.json",
                           "A3-MindIE-Motor-user_config_base_A3-dp-tp-moe_ep.json"}) {
    absl::StatusOr<std::string> text = ReadFileToString(RealConfigDir() + "/" + file);
    CREST_ASSERT_OK(text);
    nlohmann::ordered_json motor = nlohmann::ordered_json::parse(*text);
    for (const char* role : {"mindie_server_prefill_config", "mindie_server_decode_config"}) {
      SCOPED_TRACE(absl::StrCat(file, " ", role));
      auto config = MindieConfig::Parse(motor[role].dump(4));
      CREST_ASSERT_OK(config);
      EXPECT_EQ(config->view().format, ConfigFormat::kServerBackend);
      EXPECT_GE(config->view().world_size, 1);
      CREST_ASSERT_OK(config->SetSchedule({"maxBatchSize", int64_t{64}}));
      EXPECT_EQ(std::get<int64_t>(*config->view().FindSchedule("maxBatchSize")), 64);
    }
  }
}

TEST(RealConfigRefusedTest, The10Rc1FormatNamesItselfInAMissingPart) {
  EXPECT_THAT(ParseMindieConfig(R"({"ScheduleParam": {"maxBatchSize": 1}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("OtherParam.ServeParam is missing"),
                             HasSubstr("MindIE 1.0.RC1 (OtherParam, ModelDeployParam, "
                                       "ScheduleParam)"))));
}

}  // namespace
}  // namespace crest::agent
