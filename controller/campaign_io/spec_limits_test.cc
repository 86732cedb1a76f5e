#include "controller/campaign_io/spec_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/campaign_io/spec_parser.h"

namespace crest::controller {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

crest::v1::CampaignSpec Spec(const std::string& search_and_client) {
  ParsedSpec parsed = ParseAndValidateCampaignSpec("name: limits\nmodels: [{name: LLaMa3-8B}]\n" +
                                                   search_and_client);
  EXPECT_THAT(parsed.problems, IsEmpty()) << FormatProblems(parsed.problems);
  return parsed.spec;
}

crest::v1::ParameterLimit Limit(const std::string& key, double min, double max) {
  crest::v1::ParameterLimit l;
  l.set_key(key);
  l.set_min(min);
  l.set_max(max);
  l.set_is_integer(true);
  return l;
}

// An agent publishing MindIE's documented ScheduleConfig limits and the
// benchmark limits, with `concurrency_max` as its Concurrency ceiling.
crest::v1::AgentInfo Agent(const std::string& name, double concurrency_max) {
  crest::v1::AgentInfo a;
  a.set_node_name(name);
  *a.add_parameter_limits() = Limit("maxBatchSize", 1, 819200);
  *a.add_parameter_limits() = Limit("maxPrefillBatchSize", 1, 819200);
  *a.add_benchmark_limits() = Limit("concurrency", 1, concurrency_max);
  *a.add_benchmark_limits() = Limit("request_count", 1, 10000000);
  *a.add_benchmark_limits() = Limit("warmup_requests", 0, 100000);
  *a.add_benchmark_limits() = Limit("max_output_len", 1, 1048576);
  return a;
}

TEST(SpecLimits, SearchParametersFollowThePractice) {
  auto spec = Spec("search: {range: [362, 1088], initial: 435}\n");
  auto p = SearchParametersAt(spec, 435);
  EXPECT_EQ(p.max_batch_size(), 435);
  EXPECT_EQ(p.max_prefill_batch_size(), 217);
  EXPECT_EQ(p.concurrency(), 434U);
  EXPECT_EQ(SearchParametersAt(spec, 1).max_prefill_batch_size(), 1);
  EXPECT_EQ(SearchParametersAt(spec, 1).concurrency(), 1U);

  auto rate = Spec(
      "search: {range: [362, 1088], initial: 435}\n"
      "client: {mode: rate, request_rate: 5, concurrency: 1000}\n");
  EXPECT_EQ(SearchParametersAt(rate, 435).concurrency(), 1000U);
}

// The case: maxBatchSize is fine up to 819200, but Concurrency =
// maxBatchSize - 1 goes above what agents accept: refused at submission.
TEST(SpecLimits, ARangeWhoseConcurrencyNoAgentAcceptsIsRefused) {
  auto spec = Spec(
      "search: {range: [100000, 100010], initial: 100000}\n"
      "client: {request_count: 200000}\n");
  auto problems =
      CheckAgainstAgentLimits(spec, 0, {Agent("node-1", 100000), Agent("node-2", 100000)});
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].path, "search.range");
  EXPECT_THAT(problems[0].message,
              AllOf(HasSubstr("model LLaMa3-8B"), HasSubstr("[100000, 100010]"),
                    HasSubstr("node-1, node-2"),
                    HasSubstr("concurrency 100009 (maxBatchSize 100010 - 1) is outside node-1's "
                              "[1, 100000]"),
                    HasSubstr("the range can reach maxBatchSize 100001 at most")));
}

TEST(SpecLimits, WithNoAgentKnownTheDocumentedLimitsStandIn) {
  auto spec = Spec(
      "search: {range: [100000, 100010], initial: 100000}\n"
      "client: {request_count: 200000}\n");
  auto problems = CheckAgainstAgentLimits(spec, 0, {});
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0].message,
              AllOf(HasSubstr("no eligible agent is known yet"),
                    HasSubstr("concurrency 100009 (maxBatchSize 100010 - 1) is outside")));
  EXPECT_THAT(CheckAgainstAgentLimits(Spec("search: {range: [362, 1088]}\n"), 0, {}), IsEmpty());
}

TEST(SpecLimits, OneAgentAcceptingTheWholeRangeIsEnough) {
  auto spec = Spec("search: {range: [400, 600], initial: 435}\n");
  EXPECT_THAT(CheckAgainstAgentLimits(spec, 0, {Agent("small", 500), Agent("big", 1000)}),
              IsEmpty());
  auto problems = CheckAgainstAgentLimits(spec, 0, {Agent("small", 500), Agent("tiny", 450)});
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0].message,
              AllOf(HasSubstr("concurrency 599 (maxBatchSize 600 - 1) is outside small's [1, 500]"),
                    HasSubstr("concurrency 599 (maxBatchSize 600 - 1) is outside tiny's [1, 450]"),
                    HasSubstr("the range can reach maxBatchSize 501 at most")));
}

TEST(SpecLimits, LargestAcceptedPointIsExact) {
  auto spec = Spec(
      "search: {range: [1, 100000], initial: 435}\n"
      "client: {request_count: 200000}\n");
  EXPECT_EQ(LargestAcceptedPoint(Agent("a", 500), spec, 1, 100000), 501);
  EXPECT_EQ(LargestAcceptedPoint(Agent("a", 500), spec, 600, 700), 599);  // none: lo - 1
  crest::v1::AgentInfo narrow = Agent("b", 100000);
  *narrow.mutable_parameter_limits(1) = Limit("maxPrefillBatchSize", 1, 200);
  EXPECT_EQ(LargestAcceptedPoint(narrow, spec, 1, 100000), 401);  // 401 / 2 = 200
  EXPECT_EQ(RefusalAt(narrow, spec, 402),
            "maxPrefillBatchSize 201 (maxBatchSize 402 / 2) is outside b's [1, 200]");
}

TEST(SpecLimits, FixedClientValuesAreCheckedEvenWithAnAutoRange) {
  crest::v1::AgentInfo agent = Agent("node-1", 100000);
  *agent.mutable_benchmark_limits(3) = Limit("max_output_len", 1, 256);
  auto problems = CheckAgainstAgentLimits(Spec("client: {max_output_len: 512}\n"), 0, {agent});
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].path, "client");
  EXPECT_THAT(problems[0].message, HasSubstr("max_output_len 512 is outside node-1's [1, 256]"));
  EXPECT_THAT(CheckAgainstAgentLimits(Spec("client: {max_output_len: 256}\n"), 0, {agent}),
              IsEmpty());
}

TEST(SpecLimits, RateModeConcurrencyIsTheClientCount) {
  auto spec = Spec(
      "search: {range: [100, 200], initial: 150}\n"
      "client: {mode: rate, request_rate: 5, concurrency: 1000}\n");
  auto problems = CheckAgainstAgentLimits(spec, 0, {Agent("node-1", 999)});
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0].message,
              HasSubstr("concurrency 1000 (client.concurrency) is outside node-1's [1, 999]"));
}

TEST(SpecLimits, AKeyMissingFromAPublishedListIsNotAccepted) {
  crest::v1::AgentInfo agent = Agent("node-1", 100000);
  agent.mutable_parameter_limits()->RemoveLast();  // no maxPrefillBatchSize
  EXPECT_EQ(RefusalAt(agent, Spec("search: {range: [100, 200]}\n"), 100),
            "maxPrefillBatchSize is not a value node-1 accepts");
}

}  // namespace
}  // namespace crest::controller
