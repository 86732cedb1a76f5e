#include "agent/validation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/agent_config.h"
#include "common/testing/status_matchers.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

AgentConfig Config(const std::string& yaml = "limits: {maxBatchSize: {min: 10, max: 500}}") {
  auto c = ParseAgentConfig(yaml, "/state", "/bin");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

MindieConfigView View() {
  MindieConfigView v;
  v.max_input_token_len = 2048;
  v.schedule = {{"maxBatchSize", "200"}, {"maxPrefillBatchSize", "50"}};
  return v;
}

google::protobuf::RepeatedPtrField<crest::v1::ConfigOverride> Overrides(
    std::vector<crest::v1::ConfigOverride> list) {
  google::protobuf::RepeatedPtrField<crest::v1::ConfigOverride> out;
  for (auto& o : list) *out.Add() = o;
  return out;
}

crest::v1::ConfigOverride Int(const std::string& key, int64_t v) {
  crest::v1::ConfigOverride o;
  o.set_key(key);
  o.set_int_value(v);
  return o;
}

TEST(ValidateOverridesTest, AcceptsAndBuildsEdits) {
  crest::v1::ConfigOverride sel;
  sel.set_key("supportSelectBatch");
  sel.set_bool_value(true);
  auto edits = ValidateOverrides(Overrides({Int("maxBatchSize", 400), sel}), Config(), View());
  CREST_ASSERT_OK(edits);
  ASSERT_EQ(edits->size(), 2u);
  EXPECT_EQ((*edits)[0].path.back(), "maxBatchSize");
  EXPECT_EQ((*edits)[0].literal, "400");
  EXPECT_EQ((*edits)[1].literal, "true");
}

TEST(ValidateOverridesTest, EveryErrorNamesTheField) {
  AgentConfig c = Config();
  EXPECT_THAT(ValidateOverrides(Overrides({Int("npuMemSize", 1)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an overridable key")));
  EXPECT_THAT(ValidateOverrides(Overrides({Int("maxBatchSize", 501)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[10, 500], got 501")));
  EXPECT_THAT(ValidateOverrides(Overrides({Int("maxBatchSize", 9)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("maxBatchSize")));
  EXPECT_THAT(
      ValidateOverrides(Overrides({Int("maxBatchSize", 40), Int("maxBatchSize", 40)}), c, View()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than once")));
  EXPECT_THAT(ValidateOverrides(Overrides({Int("supportSelectBatch", 1)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("boolean")));
  crest::v1::ConfigOverride frac;
  frac.set_key("decodeTimeMsPerReq");
  frac.set_double_value(2.5);
  EXPECT_THAT(ValidateOverrides(Overrides({frac}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("integer")));
  crest::v1::ConfigOverride unset;
  unset.set_key("maxBatchSize");
  EXPECT_THAT(ValidateOverrides(Overrides({unset}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateOverrides(Overrides({Int("prefillTimeMsPerReq", 1001)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 1000]")));
  // Cross-checks against the values in force.
  EXPECT_THAT(ValidateOverrides(Overrides({Int("maxBatchSize", 40)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("maxPrefillBatchSize")));
  EXPECT_THAT(ValidateOverrides(Overrides({Int("maxPrefillTokens", 1000)}), c, View()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("maxInputTokenLen")));
  // A whole number sent as a double is accepted.
  crest::v1::ConfigOverride whole;
  whole.set_key("maxBatchSize");
  whole.set_double_value(300);
  CREST_EXPECT_OK(ValidateOverrides(Overrides({whole}), c, View()));
}

TEST(ValidateHostTuningTest, Cases) {
  crest::v1::ApplyHostTuningRequest r;
  r.set_governor("performance");
  CREST_EXPECT_OK(ValidateHostTuning(r, {"performance", "powersave"}, true));
  EXPECT_THAT(ValidateHostTuning(r, {"powersave"}, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("available: powersave")));
  // Unsupported on this host: reported per setting by the tuner, not refused.
  CREST_EXPECT_OK(ValidateHostTuning(r, {}, false));
  r.set_governor("../../x");
  EXPECT_THAT(ValidateHostTuning(r, {}, false), StatusIs(absl::StatusCode::kInvalidArgument));
  r.set_governor("");
  r.set_thp("sometimes");
  EXPECT_THAT(ValidateHostTuning(r, {}, true),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("always|madvise|never")));
  r.set_thp("");
  EXPECT_THAT(ValidateHostTuning(r, {}, true), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ValidateStartStopTest, Cases) {
  crest::v1::StartDaemonRequest s;
  CREST_EXPECT_OK(ValidateStartRequest(s));
  s.mutable_start_timeout()->set_seconds(-1);
  EXPECT_THAT(ValidateStartRequest(s),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("start_timeout")));
  s.clear_start_timeout();
  s.mutable_pinning()->set_mode(static_cast<crest::v1::PinningMode>(9));
  EXPECT_THAT(ValidateStartRequest(s), StatusIs(absl::StatusCode::kInvalidArgument));
  crest::v1::StopDaemonRequest stop;
  stop.mutable_grace()->set_seconds(100000);
  EXPECT_THAT(ValidateStopRequest(stop),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("grace")));
}

TEST(ValidateBenchmarkSpecTest, RangesAndNames) {
  crest::v1::BenchmarkSpec spec;
  spec.set_concurrency(10);
  spec.set_max_output_len(20);
  CREST_EXPECT_OK(ValidateBenchmarkSpec(spec));
  auto bad = [&](auto mutate, const char* field) {
    crest::v1::BenchmarkSpec s = spec;
    mutate(s);
    EXPECT_THAT(ValidateBenchmarkSpec(s),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)));
  };
  bad([](auto& s) { s.set_concurrency(0); }, "spec.concurrency");
  bad([](auto& s) { s.set_max_output_len(0); }, "spec.max_output_len");
  bad([](auto& s) { s.set_request_rate(-1); }, "spec.request_rate");
  bad([](auto& s) { s.mutable_dataset()->set_name("/etc/passwd"); }, "spec.dataset.name");
  bad([](auto& s) { s.mutable_dataset()->set_name(".."); }, "spec.dataset.name");
  bad([](auto& s) { s.set_api(static_cast<crest::v1::BenchmarkApi>(7)); }, "spec.api");
  bad([](auto& s) { s.mutable_dataset()->set_type(crest::v1::DATASET_TYPE_SYNTHETIC); },
      "synthetic_input_tokens");
  bad([](auto& s) { s.mutable_request_timeout()->set_seconds(-5); }, "spec.request_timeout");
  bad([](auto& s) { s.set_model_name(std::string("a\nb")); }, "spec.model_name");
}

TEST(AgentConfigTest, DefaultsToTheSimulatorBesideTheBinary) {
  AgentConfig c = Config("");
  EXPECT_TRUE(c.use_builtin_sim);
  EXPECT_EQ(c.backend, "mindie-sim");
  EXPECT_EQ(c.binary, "/bin/mindie-sim");
  EXPECT_EQ(c.config_json, "/state/sim/conf/config.json");
  EXPECT_EQ(c.limits.size(), 6u);
}

TEST(AgentConfigTest, DaemonSectionResolvesPaths) {
  AgentConfig c = Config(
      "daemon:\n  binary: bin/mindieservice_daemon\n  install_dir: /opt/mindie\n"
      "  env: {A: b}\n  start_timeout_s: 30\n  args: [--x]\n");
  EXPECT_FALSE(c.use_builtin_sim);
  EXPECT_EQ(c.backend, "mindie");
  EXPECT_EQ(c.binary, "/opt/mindie/bin/mindieservice_daemon");
  EXPECT_EQ(c.config_json, "/opt/mindie/conf/config.json");
  EXPECT_EQ(c.env.at("A"), "b");
  EXPECT_EQ(c.start_timeout, absl::Seconds(30));
  EXPECT_EQ(c.log_file, "/state/daemon.log");
}

TEST(AgentConfigTest, ErrorsNameTheKey) {
  auto check = [](const std::string& yaml, const char* what) {
    EXPECT_THAT(ParseAgentConfig(yaml, "/state", "/bin"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)))
        << yaml;
  };
  check("daemon: {binray: x}", "daemon.binray: unknown key");
  check("daemon: {install_dir: /x}", "daemon.binary");
  check("daemon: {binary: x, install_dir: rel}", "must be absolute");
  check("daemon: {binary: /x, start_timeout_s: 0}", "start_timeout_s");
  check("limits: {maxBatchSize: {min: 0, max: 10}}", "limits.maxBatchSize");
  check("limits: {npuMemSize: {max: 1}}", "limits.npuMemSize: unknown key");
  check("limits: {supportSelectBatch: {max: 1}}", "boolean");
  check("sim: {port: 70000}", "ports");
  check("[unclosed", "agent config");
}

}  // namespace
}  // namespace crest::agent
