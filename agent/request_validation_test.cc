#include "agent/request_validation.h"

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
  v.schedule = {{"maxBatchSize", int64_t{200}}, {"maxPrefillBatchSize", int64_t{50}}};
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
  EXPECT_EQ((*edits)[0].key, "maxBatchSize");
  EXPECT_EQ(ToJsonLiteral((*edits)[0].value), "400");
  EXPECT_EQ(ToJsonLiteral((*edits)[1].value), "true");
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

// What the agent publishes is exactly what it enforces: the controller's
// check at submission (controller/spec_limits.h) relies on it.
TEST(PublishedLimitsTest, EveryPublishedBenchmarkLimitIsTheOneEnforced) {
  crest::v1::BenchmarkSpec spec;
  spec.set_concurrency(10);
  spec.set_max_output_len(20);
  std::vector<crest::v1::ParameterLimit> limits = PublishedBenchmarkLimits();
  ASSERT_EQ(limits.size(), 4u);
  const auto* reflection = spec.GetReflection();
  for (const auto& limit : limits) {
    const auto* field = spec.GetDescriptor()->FindFieldByName(limit.key());
    ASSERT_NE(field, nullptr) << limit.key() << " is not a BenchmarkSpec field";
    crest::v1::BenchmarkSpec at_max = spec;
    reflection->SetUInt32(&at_max, field, static_cast<uint32_t>(limit.max()));
    CREST_EXPECT_OK(ValidateBenchmarkSpec(at_max)) << limit.key();
    crest::v1::BenchmarkSpec above = spec;
    reflection->SetUInt32(&above, field, static_cast<uint32_t>(limit.max()) + 1);
    EXPECT_THAT(ValidateBenchmarkSpec(above),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec." + limit.key())));
    // request_count 0 means "the whole dataset once", not a count below 1.
    if (limit.min() > 0 && limit.key() != "request_count") {
      crest::v1::BenchmarkSpec below = spec;
      reflection->SetUInt32(&below, field, static_cast<uint32_t>(limit.min()) - 1);
      EXPECT_THAT(ValidateBenchmarkSpec(below), StatusIs(absl::StatusCode::kInvalidArgument))
          << limit.key();
    }
  }
}

TEST(PublishedLimitsTest, ParameterLimitsFollowTheAgentsConfig) {
  auto config = ParseAgentConfig("limits: {maxBatchSize: {min: 1, max: 2048}}\n", "/tmp", "/tmp");
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<crest::v1::ParameterLimit> limits = PublishedParameterLimits(*config);
  ASSERT_EQ(limits.size(), DefaultParamLimits().size());
  EXPECT_EQ(limits[0].key(), "maxBatchSize");
  EXPECT_EQ(limits[0].max(), 2048);
  EXPECT_TRUE(limits[0].is_integer());
}

}  // namespace
}  // namespace crest::agent
