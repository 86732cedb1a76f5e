#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "controller/campaign_io/spec_parser.h"
#include "controller/campaign_io/spec_validator.h"

namespace crest::controller {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::vector<std::string> Messages(const ParsedSpec& parsed) {
  std::vector<std::string> out;
  out.reserve(parsed.problems.size());
  for (const auto& p : parsed.problems) out.push_back(FormatProblem(p, "spec.yaml"));
  return out;
}

constexpr char kFull[] = R"(name: demo
models:
  - name: LLaMa3-8B
    nodes: [node-1, node-2]
    parallel: 2
    exclusive: true
  - name: Qwen2-7B
    selector: {model: Qwen2-7B}
    fleet: true
search:
  parameter: maxBatchSize
  range: [100, 900]
  initial: 150
  step: 50
  strategy: step
  repeats: 2
  tolerance: 0.05
  max_trials: 7
  cache_block_size: 64
  neighbour_noise: 0.015
client:
  mode: rate
  request_rate: 12.5
  distribution: constant
  dataset: {type: synthetic, input_tokens: 300}
  max_output_len: 256
  request_count: 40
  api: openai
  warmup_requests: 2
host: {governor: performance, thp: always, pin: 24-47}
calibrate: true
limits: {start_timeout: 90s, benchmark_timeout: 10m, max_retries: 3}
)";

TEST(SpecParser, ParsesEveryKey) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(kFull);
  ASSERT_THAT(parsed.problems, SizeIs(0)) << ::testing::PrintToString(Messages(parsed));
  const auto& s = parsed.spec;
  EXPECT_EQ(s.name(), "demo");
  ASSERT_EQ(s.models_size(), 2);
  EXPECT_THAT(s.models(0).nodes(), ::testing::ElementsAre("node-1", "node-2"));
  EXPECT_EQ(s.models(0).parallel(), 2u);
  EXPECT_EQ(s.models(1).selector().at("model"), "Qwen2-7B");
  EXPECT_EQ(s.models(1).parallel(), 1u);  // default
  EXPECT_TRUE(s.models(0).exclusive());
  EXPECT_FALSE(s.models(1).exclusive());  // default
  EXPECT_FALSE(s.models(0).fleet());      // default
  EXPECT_TRUE(s.models(1).fleet());
  EXPECT_FALSE(s.search().range_auto());
  EXPECT_EQ(s.search().range_lo(), 100);
  EXPECT_EQ(s.search().range_hi(), 900);
  EXPECT_EQ(s.search().initial(), 150);
  EXPECT_FALSE(s.search().initial_auto());
  EXPECT_EQ(s.search().step(), 50);
  EXPECT_EQ(s.search().repeats(), 2u);
  EXPECT_DOUBLE_EQ(s.search().tolerance(), 0.05);
  EXPECT_EQ(s.search().max_trials(), 7u);
  EXPECT_EQ(s.search().cache_block_size(), 64u);
  EXPECT_DOUBLE_EQ(s.search().neighbour_noise(), 0.015);
  EXPECT_EQ(s.client().mode(), crest::v1::CLIENT_MODE_RATE);
  EXPECT_DOUBLE_EQ(s.client().request_rate(), 12.5);
  EXPECT_EQ(s.client().concurrency(), 1000u);  // derived default in rate mode
  EXPECT_EQ(s.client().distribution(), crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  EXPECT_EQ(s.client().dataset().type(), crest::v1::DATASET_TYPE_SYNTHETIC);
  EXPECT_EQ(s.client().dataset().synthetic_input_tokens(), 300u);
  EXPECT_EQ(s.client().max_output_len(), 256u);
  EXPECT_EQ(s.client().request_count(), 40u);
  EXPECT_EQ(s.client().api(), crest::v1::BENCHMARK_API_OPENAI);
  EXPECT_EQ(s.host().governor(), "performance");
  EXPECT_EQ(s.host().thp(), "always");
  EXPECT_EQ(s.host().pin().mode(), crest::v1::PINNING_CPU_LIST);
  EXPECT_EQ(s.host().pin().cpu_list(), "24-47");
  EXPECT_TRUE(s.calibrate());
  EXPECT_EQ(s.limits().start_timeout().seconds(), 90);
  EXPECT_EQ(s.limits().benchmark_timeout().seconds(), 600);
  EXPECT_EQ(s.limits().max_retries(), 3u);
}

TEST(SpecParser, MinimalSpecGetsDefaults) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec("name: x\nmodels: [{name: m}]\n");
  ASSERT_THAT(parsed.problems, SizeIs(0)) << ::testing::PrintToString(Messages(parsed));
  const auto& s = parsed.spec;
  EXPECT_EQ(s.search().parameter(), "maxBatchSize");
  EXPECT_TRUE(s.search().range_auto());
  EXPECT_TRUE(s.search().initial_auto());
  EXPECT_EQ(s.search().step(), 100);
  EXPECT_EQ(s.search().strategy(), "knee");
  EXPECT_EQ(s.search().repeats(), 1u);
  EXPECT_DOUBLE_EQ(s.search().tolerance(), 0.02);
  EXPECT_EQ(s.search().max_trials(), 20u);
  EXPECT_EQ(s.client().mode(), crest::v1::CLIENT_MODE_CONCURRENCY);
  EXPECT_EQ(s.client().dataset().type(), crest::v1::DATASET_TYPE_GSM8K);
  EXPECT_EQ(s.client().max_output_len(), 512u);
  EXPECT_EQ(s.client().task_kind(), crest::v1::TASK_KIND_STREAM);
  EXPECT_EQ(s.host().pin().mode(), crest::v1::PINNING_NONE);
  EXPECT_EQ(s.limits().max_retries(), 2u);
  EXPECT_EQ(s.limits().start_timeout().seconds(), 300);
  EXPECT_EQ(s.models(0).profile(), "m");
}

TEST(SpecParser, UnknownKeyHasDidYouMeanAndLine) {
  ParsedSpec parsed = ParseCampaignSpec("name: x\nmodles: []\n");
  ASSERT_THAT(parsed.problems, SizeIs(1));
  EXPECT_EQ(FormatProblem(parsed.problems[0], "spec.yaml"),
            "spec.yaml:2: modles: unknown key 'modles'; did you mean 'models'?");
}

TEST(SpecParser, WrongTypeNamesPathAndLine) {
  ParsedSpec parsed =
      ParseCampaignSpec("name: x\nmodels:\n  - name: a\n  - name: b\n    nodes: node-1\n");
  ASSERT_THAT(parsed.problems, SizeIs(1));
  EXPECT_EQ(FormatProblem(parsed.problems[0], "spec.yaml"),
            "spec.yaml:5: models[1].nodes: expected a list of node names");
}

TEST(SpecParser, ListsEveryProblemAtOnce) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(R"(models:
  - name: a
    nodes: [n1]
    selector: {x: y}
    parallel: 3
  - {name: a, exclusive: alone}
search:
  range: [900, 100]
  strategy: stpe
  tolerance: lots
  repats: 2
  neighbour_noise: 0.7
client:
  mode: rate
  dataset: {type: gsm9k}
host: {governor: turbo, thp: sometimes, pin: every-other}
calibrate: maybe
limits: {start_timeout: soon}
)");
  auto m = Messages(parsed);
  EXPECT_THAT(m, ::testing::IsSupersetOf(std::vector<::testing::Matcher<std::string>>{
                     HasSubstr("name: required"),
                     "spec.yaml:2: models[0]: give either nodes or selector, not both",
                     "spec.yaml:6: models[1].name: model 'a' is listed twice",
                     "spec.yaml:6: models[1].exclusive: expected true or false",
                     "spec.yaml:8: search.range: lo 900 is above hi 100",
                     AllOf(HasSubstr("spec.yaml:9: search.strategy: unknown strategy 'stpe'"),
                           HasSubstr("did you mean 'step'?")),
                     HasSubstr("spec.yaml:10: search.tolerance: expected a relative drop"),
                     "spec.yaml:11: search.repats: unknown key 'repats'; did you mean 'repeats'?",
                     HasSubstr("spec.yaml:12: search.neighbour_noise: expected a relative noise"),
                     HasSubstr("client.request_rate: required in rate mode"),
                     AllOf(HasSubstr("spec.yaml:15: client.dataset.type: unknown value 'gsm9k'"),
                           HasSubstr("did you mean 'gsm8k'?")),
                     HasSubstr("spec.yaml:16: host.governor: unknown governor 'turbo'"),
                     HasSubstr("spec.yaml:16: host.thp: unknown THP mode 'sometimes'"),
                     HasSubstr("host.pin: 'every-other' is not odd-numa, none or a CPU list"),
                     "spec.yaml:17: calibrate: expected true or false",
                     HasSubstr("spec.yaml:18: limits.start_timeout: expected a duration"),
                 }));
  EXPECT_THAT(FormatProblems(parsed.problems), HasSubstr("campaign spec has"));
}

TEST(SpecParser, MoreSemanticProblems) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m, nodes: [a, a]}]
search: {parameter: maxPrefillBatchSize, range: [100, 200], initial: 300}
client: {request_rate: 5, concurrency: 10, task_kind: text,
         dataset: {type: synthetic, path: /etc/passwd}}
calibrate: true
)");
  EXPECT_THAT(Messages(parsed),
              ::testing::IsSupersetOf(std::vector<::testing::Matcher<std::string>>{
                  HasSubstr("models[0].nodes[1]: node 'a' is listed twice"),
                  HasSubstr("search.parameter: unsupported parameter 'maxPrefillBatchSize'"),
                  HasSubstr("search.initial: initial 300 lies outside the range [100, 200]"),
                  HasSubstr("client.request_rate: only used in rate mode"),
                  HasSubstr("client.concurrency: derived in concurrency mode"),
                  HasSubstr("client.dataset.input_tokens: required for a synthetic dataset"),
                  HasSubstr("client.dataset.path: must be relative"),
              }));
  EXPECT_EQ(parsed.spec.client().task_kind(), crest::v1::TASK_KIND_TEXT);
}

TEST(SpecParser, APriorCampaignWarmStartsTheDefaultSearchOnly) {
  ParsedSpec ok = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m}]
search: {prior: c12}
)");
  EXPECT_TRUE(ok.problems.empty()) << FormatProblems(ok.problems);
  EXPECT_EQ(ok.spec.search().prior(), "c12");
  ParsedSpec practice = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m}]
search: {strategy: practice, prior: c12}
)");
  EXPECT_THAT(Messages(practice),
              ::testing::Contains(HasSubstr(
                  "search.prior: a warm start needs the default strategy (knee), not 'practice'")));
  ParsedSpec list = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m}]
search: {prior: [c1, c2]}
)");
  EXPECT_THAT(Messages(list), ::testing::Contains(HasSubstr("spec.yaml:3: search.prior: expected "
                                                            "a campaign id such as c12")));
}

TEST(SpecParser, RateSearchKeysAndDefaults) {
  ParsedSpec full = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m}]
rate_search: {start: 4.5, factor: 1.5, max_runs: 8, concurrency: 500}
)");
  ASSERT_THAT(full.problems, SizeIs(0)) << ::testing::PrintToString(Messages(full));
  ASSERT_TRUE(full.spec.has_rate_search());
  EXPECT_DOUBLE_EQ(full.spec.rate_search().start(), 4.5);
  EXPECT_DOUBLE_EQ(full.spec.rate_search().factor(), 1.5);
  EXPECT_EQ(full.spec.rate_search().max_runs(), 8u);
  EXPECT_EQ(full.spec.rate_search().concurrency(), 500u);
  ParsedSpec defaults =
      ParseAndValidateCampaignSpec("name: x\nmodels: [{name: m}]\nrate_search: {start: auto}\n");
  ASSERT_THAT(defaults.problems, SizeIs(0)) << ::testing::PrintToString(Messages(defaults));
  EXPECT_DOUBLE_EQ(defaults.spec.rate_search().start(), 0);  // auto
  EXPECT_DOUBLE_EQ(defaults.spec.rate_search().factor(), 1.25);
  EXPECT_EQ(defaults.spec.rate_search().max_runs(), 6u);
  EXPECT_EQ(defaults.spec.rate_search().concurrency(), 1000u);
  EXPECT_FALSE(
      ParseAndValidateCampaignSpec("name: x\nmodels: [{name: m}]\n").spec.has_rate_search());
}

TEST(SpecParser, BadRateSearchValuesAreNamed) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec(R"(name: x
models: [{name: m}]
rate_search: {start: -1, factor: 1, max_runs: 1, concurency: 10}
)");
  EXPECT_THAT(Messages(parsed),
              ::testing::IsSupersetOf(std::vector<::testing::Matcher<std::string>>{
                  HasSubstr("spec.yaml:3: rate_search.start: expected auto or requests per second"),
                  HasSubstr("spec.yaml:3: rate_search.factor: expected the ratio of one rate to "
                            "the one before, such as 1.25 in [1.01, 4], got 1"),
                  HasSubstr("spec.yaml:3: rate_search.max_runs: expected a run count in [2, 50]"),
                  HasSubstr("rate_search.concurency: unknown key 'concurency'; did you mean "
                            "'concurrency'?"),
              }));
  ParsedSpec not_a_map =
      ParseAndValidateCampaignSpec("name: x\nmodels: [{name: m}]\nrate_search: yes\n");
  EXPECT_THAT(Messages(not_a_map),
              ::testing::Contains(HasSubstr("rate_search: expected a map with keys start, factor, "
                                            "max_runs, concurrency")));
  // A hand-made request gets the validator's word for what YAML refuses.
  crest::v1::CampaignSpec spec = ParseAndValidateCampaignSpec(kFull).spec;
  spec.mutable_rate_search()->set_factor(0.5);
  spec.mutable_rate_search()->set_max_runs(1);
  EXPECT_THAT(CheckCampaignSpec(spec).message(),
              AllOf(HasSubstr("rate_search.factor: must lie in (1, 4]"),
                    HasSubstr("rate_search.max_runs: must lie in [2, 50]")));
}

TEST(SpecParser, SyntaxErrorsAndEmptyInput) {
  ParsedSpec bad = ParseCampaignSpec("name: x\nmodels: [\n");
  ASSERT_THAT(bad.problems, SizeIs(1));
  EXPECT_THAT(bad.problems[0].message, HasSubstr("not valid YAML"));
  EXPECT_GT(bad.problems[0].line, 0);
  ParsedSpec empty = ParseCampaignSpec("");
  ASSERT_THAT(empty.problems, SizeIs(1));
  EXPECT_THAT(empty.problems[0].message, HasSubstr("empty"));
  ParsedSpec list = ParseCampaignSpec("- a\n- b\n");
  ASSERT_THAT(list.problems, SizeIs(1));
  EXPECT_THAT(list.problems[0].message, HasSubstr("expected a map"));
}

TEST(SpecValidator, ServerSideCheckListsEveryProblem) {
  crest::v1::CampaignSpec spec;
  spec.mutable_search()->set_strategy("nope");
  ApplySpecDefaults(&spec);
  absl::Status s = CheckCampaignSpec(spec);
  EXPECT_THAT(s, testing::StatusIs(
                     absl::StatusCode::kInvalidArgument,
                     AllOf(HasSubstr("3 problems"), HasSubstr("name: required"),
                           HasSubstr("models: required"), HasSubstr("unknown strategy 'nope'"))));
}

}  // namespace
}  // namespace crest::controller
