#include "controller/campaign_io/spec_limits.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/mindie_limits.h"

namespace crest::controller {
namespace {

using crest::v1::AgentInfo;
using crest::v1::CampaignSpec;
using crest::v1::ParameterLimit;

// The agent's range for `key`, or the documented one when it published none.
// An agent that published a list without `key` does not take that key.
std::optional<IntRange> RangeOf(const google::protobuf::RepeatedPtrField<ParameterLimit>& published,
                                const std::string& key, IntRange documented) {
  if (published.empty()) return documented;
  for (const ParameterLimit& p : published) {
    if (p.key() == key) {
      return IntRange{static_cast<int64_t>(p.min()), static_cast<int64_t>(p.max())};
    }
  }
  return std::nullopt;
}

struct Value {
  const char* name;  // as the agent's list names it
  bool benchmark;    // BenchmarkSpec field (else ScheduleConfig key)
  IntRange documented;
  int64_t value;
  std::string origin;  // what the value derives from, for the message
};

std::vector<Value> ValuesAt(const CampaignSpec& spec, int64_t point) {
  crest::v1::TrialParameters p = SearchParametersAt(spec, point);
  const auto& client = spec.client();
  const bool rate = client.mode() == crest::v1::CLIENT_MODE_RATE;
  std::vector<Value> values = {
      {"maxBatchSize", false, mindie::kMaxBatchSize, p.max_batch_size(), ""},
      {"maxPrefillBatchSize", false, mindie::kMaxPrefillBatchSize, p.max_prefill_batch_size(),
       absl::StrCat(" (maxBatchSize ", point, " / 2)")},
      {bench::kConcurrencyKey, true, bench::kConcurrency, p.concurrency(),
       rate ? std::string(" (client.concurrency)")
            : absl::StrCat(" (maxBatchSize ", point, " - 1)")},
      {bench::kWarmupRequestsKey, true, bench::kWarmupRequests, client.warmup_requests(), ""},
      {bench::kMaxOutputLenKey, true, bench::kMaxOutputLen, client.max_output_len(), ""},
  };
  // 0 asks for the whole dataset once, which every agent accepts.
  if (client.request_count() > 0) {
    values.push_back(
        {bench::kRequestCountKey, true, bench::kRequestCount, client.request_count(), ""});
  }
  return values;
}

std::string NodeList(const std::vector<AgentInfo>& agents) {
  std::vector<std::string> names;
  names.reserve(agents.size());
  for (const auto& a : agents) names.push_back(a.node_name());
  return absl::StrJoin(names, ", ");
}

}  // namespace

crest::v1::TrialParameters SearchParametersAt(const CampaignSpec& spec, int64_t point) {
  crest::v1::TrialParameters p;
  p.set_max_batch_size(point);
  p.set_max_prefill_batch_size(std::max<int64_t>(1, point / 2));
  if (spec.client().mode() == crest::v1::CLIENT_MODE_RATE) {
    p.set_concurrency(spec.client().concurrency());
  } else {
    p.set_concurrency(static_cast<uint32_t>(std::max<int64_t>(1, point - 1)));
  }
  return p;
}

std::string RefusalAt(const AgentInfo& agent, const CampaignSpec& spec, int64_t point) {
  for (const Value& v : ValuesAt(spec, point)) {
    std::optional<IntRange> range = RangeOf(
        v.benchmark ? agent.benchmark_limits() : agent.parameter_limits(), v.name, v.documented);
    if (!range) return absl::StrCat(v.name, " is not a value ", agent.node_name(), " accepts");
    if (!range->Contains(v.value)) {
      return absl::StrCat(v.name, " ", v.value, v.origin, " is outside ", agent.node_name(), "'s ",
                          range->ToString());
    }
  }
  return "";
}

int64_t LargestAcceptedPoint(const AgentInfo& agent, const CampaignSpec& spec, int64_t lo,
                             int64_t hi) {
  if (lo > hi || !RefusalAt(agent, spec, lo).empty()) return lo - 1;
  // Invariant: lo is accepted; every value grows with the point.
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (RefusalAt(agent, spec, mid).empty()) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::vector<SpecProblem> CheckAgainstAgentLimits(const CampaignSpec& spec, int model_index,
                                                 const std::vector<AgentInfo>& eligible) {
  const auto& search = spec.search();
  const std::string model = spec.models(model_index).name();
  std::vector<AgentInfo> agents = eligible;
  std::string who = NodeList(eligible);
  if (agents.empty()) {
    agents.emplace_back();  // no published limits: the documented ones
    agents.back().set_node_name("MindIE's documented limits");
    who = "no eligible agent is known yet; checked against MindIE's documented limits";
  }
  // With an auto range only the start of a real search is known here; the
  // point 1 stands for "the smallest batch" so that the fixed client values
  // (counts, MaxOutputLen, rate-mode Concurrency) are checked now.
  const int64_t lo = search.range_auto() ? 1 : search.range_lo();
  const int64_t hi = search.range_auto() ? 1 : search.range_hi();
  std::vector<std::string> refusals;
  int64_t largest = lo - 1;
  for (const AgentInfo& a : agents) {
    std::string refusal = RefusalAt(a, spec, lo);
    if (refusal.empty()) refusal = RefusalAt(a, spec, hi);
    if (refusal.empty()) return {};
    refusals.push_back(refusal);
    largest = std::max(largest, LargestAcceptedPoint(a, spec, lo, hi));
  }
  std::string path = search.range_auto() ? "client" : "search.range";
  std::string message =
      absl::StrCat("model ", model, ": no eligible agent accepts every trial ",
                   search.range_auto() ? "" : absl::StrCat("of [", lo, ", ", hi, "] "), "(", who,
                   "): ", absl::StrJoin(refusals, "; "));
  if (!search.range_auto()) {
    absl::StrAppend(&message, largest >= lo ? absl::StrCat("; the range can reach maxBatchSize ",
                                                           largest, " at most")
                                            : "; no point of the range is accepted");
  }
  return {SpecProblem{path, 0, message}};
}

}  // namespace crest::controller
