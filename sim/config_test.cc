#include "sim/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/testing/status_matchers.h"
#include "sim/test_util.h"

namespace crest::sim {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

json Template() { return json::parse(testing::TemplateConfigText()); }

absl::StatusOr<SimConfig> Parse(const json& j) { return ParseConfig(j.dump(), "/opt/mindie"); }

// Applies `edit` to the template and returns the parse error message.
template <typename Edit>
std::string ErrorAfter(Edit edit) {
  json j = Template();
  edit(j);
  absl::StatusOr<SimConfig> c = Parse(j);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument));
  return c.ok() ? "" : std::string(c.status().message());
}

json& Schedule(json& j) { return j["BackendConfig"]["ScheduleConfig"]; }
json& Model(json& j) { return j["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]; }

TEST(ConfigTest, ParsesShippedTemplate) {
  absl::StatusOr<SimConfig> c = Parse(Template());
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->server.ip_address, "127.0.0.1");
  EXPECT_EQ(c->server.management_ip_address, "127.0.0.2");
  EXPECT_EQ(c->server.port, 1025);
  EXPECT_EQ(c->server.management_port, 1026);
  EXPECT_EQ(c->server.metrics_port, 1027);
  EXPECT_FALSE(c->server.https_enabled);
  EXPECT_EQ(c->model_name, "LLaMa3-8B");
  EXPECT_EQ(c->npu_mem_size_gb, 17);
  EXPECT_EQ(c->world_size, 1);
  EXPECT_EQ(c->cache_block_size, 128);
  EXPECT_EQ(c->max_iter_times, 512);
  EXPECT_EQ(c->max_batch_size, 200);
  EXPECT_EQ(c->max_prefill_batch_size, 50);
  EXPECT_EQ(c->max_prefill_tokens, 8192);
  EXPECT_EQ(c->max_seq_len, 2560);
  EXPECT_EQ(c->max_input_token_len, 2048);
  EXPECT_FALSE(c->support_select_batch);
  EXPECT_EQ(c->prefill_time_ms_per_req, 150);
  EXPECT_EQ(c->decode_time_ms_per_req, 50);
  // Relative TLS paths resolve against the install directory.
  EXPECT_EQ(c->server.tls_cert, "/opt/mindie/security/certs/server.pem");
  EXPECT_EQ(c->server.tls_key, "/opt/mindie/security/keys/server.key.pem");
  EXPECT_THAT(c->server.tls_ca_files, ::testing::ElementsAre("/opt/mindie/security/ca/ca.pem"));
}

TEST(ConfigTest, IgnoresUnknownKeysAndAcceptsPortZero) {
  json j = Template();
  j["Unknown"] = {{"x", 1}};
  Schedule(j)["someFutureKey"] = "value";
  j["ServerConfig"]["port"] = 0;
  j["ServerConfig"]["managementPort"] = 0;
  j["ServerConfig"]["metricsPort"] = 0;
  ASSERT_THAT(Parse(j), IsOk());
}

TEST(ConfigTest, MaxInputTokenLenIsCappedBySeqLen) {
  json j = Template();
  j["BackendConfig"]["ModelDeployConfig"]["maxSeqLen"] = 1024;
  Schedule(j)["maxPrefillTokens"] = 8192;
  absl::StatusOr<SimConfig> c = Parse(j);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->max_input_token_len, 1023);
}

TEST(ConfigTest, WrongTypeNamesFullKeyPath) {
  EXPECT_EQ(ErrorAfter([](json& j) { Schedule(j)["maxBatchSize"] = "500"; }),
            "BackendConfig.ScheduleConfig.maxBatchSize: expected integer, got string");
  EXPECT_EQ(ErrorAfter([](json& j) { Schedule(j)["supportSelectBatch"] = 1; }),
            "BackendConfig.ScheduleConfig.supportSelectBatch: expected boolean, got integer");
  EXPECT_EQ(ErrorAfter([](json& j) { Model(j)["npuMemSize"] = 17.5; }),
            "BackendConfig.ModelDeployConfig.ModelConfig[0].npuMemSize: expected integer, got "
            "number");
  EXPECT_EQ(ErrorAfter([](json& j) { j["ServerConfig"]["ipAddress"] = 127; }),
            "ServerConfig.ipAddress: expected string, got integer");
  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"]["ScheduleConfig"] = json::array(); }),
            "BackendConfig.ScheduleConfig: expected object, got array");
  EXPECT_EQ(ErrorAfter([](json& j) {
              j["ServerConfig"]["tlsCaFile"] = {"a.pem", 3};
            }),
            "ServerConfig.tlsCaFile[1]: expected string, got integer");
}

TEST(ConfigTest, MissingKeyNamesFullKeyPath) {
  const std::map<std::string, std::vector<std::string>> keys = {
      {"ServerConfig",
       {"ipAddress", "managementIpAddress", "port", "managementPort", "metricsPort",
        "httpsEnabled"}},
      {"BackendConfig.ModelDeployConfig", {"maxSeqLen", "maxInputTokenLen", "ModelConfig"}},
      {"BackendConfig.ModelDeployConfig.ModelConfig[0]", {"modelName", "worldSize", "npuMemSize"}},
      {"BackendConfig.ScheduleConfig",
       {"maxBatchSize", "maxPrefillBatchSize", "maxPrefillTokens", "maxIterTimes", "cacheBlockSize",
        "supportSelectBatch", "prefillTimeMsPerReq", "decodeTimeMsPerReq"}},
  };
  for (const auto& [section, names] : keys) {
    const std::string& sec = section;  // structured bindings cannot be captured
    for (const std::string& key : names) {
      std::string msg = ErrorAfter([&sec, &key](json& j) {
        json* node = &j;
        if (sec == "ServerConfig") node = &j["ServerConfig"];
        if (sec == "BackendConfig.ModelDeployConfig") {
          node = &j["BackendConfig"]["ModelDeployConfig"];
        }
        if (sec == "BackendConfig.ModelDeployConfig.ModelConfig[0]") node = &Model(j);
        if (sec == "BackendConfig.ScheduleConfig") node = &Schedule(j);
        node->erase(key);
      });
      EXPECT_EQ(msg, absl::StrCat(sec, ".", key, ": missing"));
    }
  }
  EXPECT_EQ(ErrorAfter([](json& j) { j.erase("BackendConfig"); }), "BackendConfig: missing");
}

TEST(ConfigTest, RangeChecks) {
  EXPECT_THAT(ErrorAfter([](json& j) { j["ServerConfig"]["port"] = 80; }),
              HasSubstr("ServerConfig.port: 80 is out of range"));
  EXPECT_THAT(ErrorAfter([](json& j) { j["ServerConfig"]["metricsPort"] = 70000; }),
              HasSubstr("ServerConfig.metricsPort: 70000 is out of range"));
  EXPECT_THAT(ErrorAfter([](json& j) {
                j["ServerConfig"]["managementIpAddress"] = "127.0.0.1";
                j["ServerConfig"]["managementPort"] = 1025;
              }),
              HasSubstr("ServerConfig.managementPort: must differ"));
  EXPECT_THAT(ErrorAfter([](json& j) { Schedule(j)["maxBatchSize"] = 0; }),
              HasSubstr("BackendConfig.ScheduleConfig.maxBatchSize: 0 is out of range, expected "
                        "[1, 819200]"));
  EXPECT_THAT(ErrorAfter([](json& j) { Schedule(j)["maxPrefillBatchSize"] = 201; }),
              HasSubstr("BackendConfig.ScheduleConfig.maxPrefillBatchSize: 201 is out of range, "
                        "expected [1, 200]"));
  EXPECT_THAT(ErrorAfter([](json& j) { Schedule(j)["maxPrefillTokens"] = 1000; }),
              HasSubstr("maxPrefillTokens: 1000 is below maxInputTokenLen (2048)"));
  EXPECT_THAT(ErrorAfter([](json& j) { Schedule(j)["cacheBlockSize"] = 100; }),
              HasSubstr("cacheBlockSize: 100 is not a power of two"));
  EXPECT_THAT(ErrorAfter([](json& j) { Schedule(j)["maxIterTimes"] = 0; }),
              HasSubstr("BackendConfig.ScheduleConfig.maxIterTimes: 0 is out of range"));
  EXPECT_THAT(ErrorAfter([](json& j) { Model(j)["npuMemSize"] = 0; }),
              HasSubstr("ModelConfig[0].npuMemSize: 0 is out of range"));
  EXPECT_THAT(ErrorAfter([](json& j) { Model(j)["worldSize"] = 0; }),
              HasSubstr("ModelConfig[0].worldSize: 0 is out of range"));
  EXPECT_THAT(ErrorAfter([](json& j) { Model(j)["modelName"] = ""; }),
              HasSubstr("ModelConfig[0].modelName: must not be empty"));
  EXPECT_THAT(ErrorAfter([](json& j) {
                j["BackendConfig"]["ModelDeployConfig"]["ModelConfig"] = json::array();
              }),
              HasSubstr("ModelDeployConfig.ModelConfig: expected at least one element"));
  EXPECT_THAT(ErrorAfter([](json& j) {
                j["ServerConfig"]["httpsEnabled"] = true;
                j["ServerConfig"].erase("tlsCert");
              }),
              HasSubstr("ServerConfig.tlsCert: required when httpsEnabled is true"));
}

TEST(ConfigTest, DeviceIdsAreTheFirstInstancesCardsOnePerCardOfWorldSize) {
  json j = Template();
  j["BackendConfig"]["npuDeviceIds"] = json::parse("[[4,5]]");
  Model(j)["worldSize"] = 2;
  absl::StatusOr<SimConfig> c = Parse(j);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->npu_device_ids, (std::vector<int>{4, 5}));

  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"].erase("npuDeviceIds"); }),
            "BackendConfig.npuDeviceIds: missing");
  EXPECT_EQ(
      ErrorAfter([](json& j) { j["BackendConfig"]["npuDeviceIds"] = json::parse("[[0,1]]"); }),
      "BackendConfig.npuDeviceIds[0]: 2 devices, but "
      "BackendConfig.ModelDeployConfig.ModelConfig[0].worldSize is 1: expected one device "
      "per card of worldSize");
  EXPECT_EQ(ErrorAfter([](json& j) {
              j["BackendConfig"]["npuDeviceIds"] = json::parse("[[3,3]]");
              Model(j)["worldSize"] = 2;
            }),
            "BackendConfig.npuDeviceIds[0]: device 3 is listed twice");
  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"]["npuDeviceIds"] = json::parse("[[64]]"); }),
            "BackendConfig.npuDeviceIds[0][0]: 64 is out of range, expected [0, 63]");
  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"]["npuDeviceIds"] = json::parse("[0]"); }),
            "BackendConfig.npuDeviceIds[0]: expected array of integers, got integer");
  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"]["npuDeviceIds"] = json::parse("[]"); }),
            "BackendConfig.npuDeviceIds: expected at least one list of device ids, got an empty "
            "array");
  EXPECT_EQ(ErrorAfter([](json& j) { j["BackendConfig"]["npuDeviceIds"] = json::parse("[[]]"); }),
            "BackendConfig.npuDeviceIds[0]: expected at least one device id, got an empty array");
}

TEST(ConfigTest, RejectsNonJson) {
  EXPECT_THAT(ParseConfig("{not json", "/"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseConfig("[1,2]", "/").status().message(), HasSubstr("top level"));
}

TEST(ConfigTest, LoadConfigNamesTheFile) {
  absl::StatusOr<SimConfig> c = LoadConfig("/nonexistent/conf/config.json");
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/conf/config.json"));
}

TEST(ConfigTest, FindConfigPathFollowsTheDaemonsOrder) {
  std::map<std::string, std::string> env;
  auto get = [&env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(FindConfigPath("", get), "conf/config.json");
  env["MIES_INSTALL_PATH"] = "/opt/mindie";
  EXPECT_EQ(FindConfigPath("", get), "/opt/mindie/conf/config.json");
  env["MIES_CONFIG_JSON_PATH"] = "/etc/c.json";
  EXPECT_EQ(FindConfigPath("", get), "/etc/c.json");
  EXPECT_EQ(FindConfigPath("/flag.json", get), "/flag.json");
}

}  // namespace
}  // namespace crest::sim
