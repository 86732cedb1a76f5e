#include "agent/request_validation.h"

#include <cmath>
#include <map>
#include <set>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

#include "common/mindie_limits.h"
#include "common/status.h"

namespace crest::agent {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string KnownKeys(const AgentConfig& config) {
  std::vector<std::string> keys;
  keys.reserve(config.limits.size());
  for (const ParamLimit& p : config.limits) keys.push_back(p.key);
  return absl::StrJoin(keys, ", ");
}

absl::Status CheckDuration(const google::protobuf::Duration& d, absl::string_view field,
                           int64_t max_seconds) {
  if (d.seconds() < 0 || d.nanos() < 0) return Invalid(field, "expected a non-negative duration");
  if (d.seconds() > max_seconds) {
    return Invalid(field, absl::StrCat("expected at most ", max_seconds, " s, got ", d.seconds()));
  }
  return absl::OkStatus();
}

int64_t CurrentInt(const MindieConfigView& current, const std::string& key) {
  const ConfigValue* value = current.FindSchedule(key);
  const auto* i = value == nullptr ? nullptr : std::get_if<int64_t>(value);
  return i == nullptr ? -1 : *i;
}

}  // namespace

bool IsSafeName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name.find("..") != std::string::npos) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::vector<ScheduleValue>> ValidateOverrides(
    const google::protobuf::RepeatedPtrField<crest::v1::ConfigOverride>& overrides,
    const AgentConfig& config, const MindieConfigView& current) {
  std::vector<ScheduleValue> values;
  std::map<std::string, int64_t> ints;
  std::set<std::string> seen;
  for (int i = 0; i < overrides.size(); ++i) {
    const crest::v1::ConfigOverride& o = overrides[i];
    std::string field = absl::StrCat("overrides[", i, "]");
    const ParamLimit* limit = config.FindLimit(o.key());
    if (limit == nullptr) {
      return Invalid(field + ".key",
                     absl::StrCat("\"", ClipForMessage(o.key()), "\" is not an overridable key (",
                                  KnownKeys(config), ")"));
    }
    field = absl::StrCat(field, " (", ClipForMessage(o.key()), ")");
    if (!seen.insert(o.key()).second) return Invalid(field, "given more than once");
    if (limit->is_bool) {
      if (o.value_case() != crest::v1::ConfigOverride::kBoolValue) {
        return Invalid(field, "expected a boolean (bool_value)");
      }
      values.push_back({o.key(), o.bool_value()});
    } else {
      int64_t v = 0;
      if (o.value_case() == crest::v1::ConfigOverride::kIntValue) {
        v = o.int_value();
      } else if (o.value_case() == crest::v1::ConfigOverride::kDoubleValue &&
                 std::isfinite(o.double_value()) &&
                 std::trunc(o.double_value()) == o.double_value() &&
                 std::fabs(o.double_value()) < 9e15) {
        // A whole number sent as a double is the same integer.
        v = static_cast<int64_t>(o.double_value());
      } else {
        return Invalid(field,
                       absl::StrCat("expected an integer in [", limit->min, ", ", limit->max, "]"));
      }
      if (v < limit->min || v > limit->max) {
        return Invalid(field, absl::StrCat("expected an integer in [", limit->min, ", ", limit->max,
                                           "], got ", v));
      }
      ints[o.key()] = v;
      values.push_back({o.key(), v});
    }
  }
  // Cross-checks with the values that will be in force.
  auto effective = [&](const std::string& key) {
    auto it = ints.find(key);
    return it != ints.end() ? it->second : CurrentInt(current, key);
  };
  int64_t batch = effective("maxBatchSize");
  int64_t prefill_batch = effective("maxPrefillBatchSize");
  if (batch > 0 && prefill_batch > batch &&
      (ints.count("maxBatchSize") != 0 || ints.count("maxPrefillBatchSize") != 0)) {
    return Invalid("maxPrefillBatchSize", absl::StrCat("expected at most maxBatchSize (", batch,
                                                       "), got ", prefill_batch));
  }
  if (auto it = ints.find("maxPrefillTokens"); it != ints.end() &&
                                               current.max_input_token_len > 0 &&
                                               it->second < current.max_input_token_len) {
    return Invalid("maxPrefillTokens",
                   absl::StrCat("expected at least maxInputTokenLen (", current.max_input_token_len,
                                "), got ", it->second));
  }
  return values;
}

absl::Status ValidateHostTuning(const crest::v1::ApplyHostTuningRequest& request,
                                const std::vector<std::string>& available_governors,
                                bool governor_supported) {
  if (!request.governor().empty() && governor_supported) {
    bool known = false;
    for (const std::string& g : available_governors) known = known || g == request.governor();
    if (!known) {
      return Invalid("governor", absl::StrCat("\"", ClipForMessage(request.governor()),
                                              "\" is not offered by this host (available: ",
                                              absl::StrJoin(available_governors, ", "), ")"));
    }
  } else if (!request.governor().empty() && !IsSafeName(request.governor())) {
    return Invalid("governor", "expected a governor name such as performance");
  }
  if (!request.thp().empty() && request.thp() != "always" && request.thp() != "madvise" &&
      request.thp() != "never") {
    return Invalid("thp", absl::StrCat("\"", ClipForMessage(request.thp()),
                                       "\" is not a THP mode (always|madvise|never)"));
  }
  if (request.governor().empty() && request.thp().empty()) {
    return Invalid("governor/thp", "nothing to tune (give a governor, a THP mode or both)");
  }
  return absl::OkStatus();
}

absl::Status ValidateStartRequest(const crest::v1::StartDaemonRequest& request) {
  if (!crest::v1::PinningMode_IsValid(request.pinning().mode())) {
    return Invalid("pinning.mode", absl::StrCat("unknown value ", request.pinning().mode()));
  }
  if (request.has_start_timeout()) {
    const auto& d = request.start_timeout();
    if (d.seconds() < 0 || d.nanos() < 0 || (d.seconds() == 0 && d.nanos() == 0)) {
      return Invalid("start_timeout", "expected a positive duration");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateStopRequest(const crest::v1::StopDaemonRequest& request) {
  if (request.has_grace()) return CheckDuration(request.grace(), "grace", 3600);
  return absl::OkStatus();
}

absl::Status ValidateBenchmarkSpec(const crest::v1::BenchmarkSpec& spec) {
  if (!crest::v1::BenchmarkApi_IsValid(spec.api())) {
    return Invalid("spec.api", absl::StrCat("unknown value ", spec.api()));
  }
  if (!crest::v1::TaskKind_IsValid(spec.task_kind())) {
    return Invalid("spec.task_kind", absl::StrCat("unknown value ", spec.task_kind()));
  }
  if (!crest::v1::ArrivalDistribution_IsValid(spec.distribution())) {
    return Invalid("spec.distribution", absl::StrCat("unknown value ", spec.distribution()));
  }
  const crest::v1::DatasetSpec& ds = spec.dataset();
  if (!crest::v1::DatasetType_IsValid(ds.type())) {
    return Invalid("spec.dataset.type", absl::StrCat("unknown value ", ds.type()));
  }
  if (!ds.name().empty() && !IsSafeName(ds.name())) {
    return Invalid("spec.dataset.name",
                   absl::StrCat("\"", ClipForMessage(ds.name()),
                                "\" is not a dataset name (letters, digits, _ - .; no paths)"));
  }
  if (ds.type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    if (!bench::kSyntheticInputTokens.Contains(ds.synthetic_input_tokens())) {
      return Invalid(
          "spec.dataset.synthetic_input_tokens",
          absl::StrCat("expected ", bench::kSyntheticInputTokens.ToString(), " for SYNTHETIC"));
    }
  } else if (ds.synthetic_input_tokens() != 0) {
    return Invalid("spec.dataset.synthetic_input_tokens", "only allowed with SYNTHETIC");
  }
  if (spec.model_name().size() > bench::kMaxModelNameBytes) {
    return Invalid("spec.model_name",
                   absl::StrCat("longer than ", bench::kMaxModelNameBytes, " bytes"));
  }
  for (char c : spec.model_name()) {
    if (static_cast<unsigned char>(c) < 0x20) {
      return Invalid("spec.model_name", "contains control characters");
    }
  }
  if (!bench::kConcurrency.Contains(spec.concurrency())) {
    return Invalid("spec.concurrency", absl::StrCat("expected ", bench::kConcurrency.ToString(),
                                                    ", got ", spec.concurrency()));
  }
  if (!std::isfinite(spec.request_rate()) || spec.request_rate() < 0 ||
      spec.request_rate() > bench::kMaxRequestRate) {
    return Invalid("spec.request_rate", "expected [0, 1e6] requests/s (0: concurrency mode)");
  }
  if (spec.request_count() > bench::kRequestCount.max) {
    return Invalid("spec.request_count",
                   absl::StrCat("expected at most ", bench::kRequestCount.max));
  }
  if (!bench::kMaxOutputLen.Contains(spec.max_output_len())) {
    return Invalid("spec.max_output_len", absl::StrCat("expected ", bench::kMaxOutputLen.ToString(),
                                                       " tokens, got ", spec.max_output_len()));
  }
  if (spec.warmup_requests() > bench::kWarmupRequests.max) {
    return Invalid("spec.warmup_requests",
                   absl::StrCat("expected at most ", bench::kWarmupRequests.max));
  }
  if (spec.has_max_duration()) {
    absl::Status s =
        CheckDuration(spec.max_duration(), "spec.max_duration", int64_t{7} * 24 * 3600);
    if (!s.ok()) return s;
  }
  if (spec.has_request_timeout()) {
    absl::Status s =
        CheckDuration(spec.request_timeout(), "spec.request_timeout", int64_t{24} * 3600);
    if (!s.ok()) return s;
  }
  if (spec.request_count() == 0 && spec.max_duration().seconds() == 0 &&
      spec.max_duration().nanos() == 0 && ds.type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    return Invalid("spec.request_count",
                   "SYNTHETIC has no end: give request_count or max_duration");
  }
  return absl::OkStatus();
}

std::vector<crest::v1::ParameterLimit> PublishedParameterLimits(const AgentConfig& config) {
  std::vector<crest::v1::ParameterLimit> out;
  for (const ParamLimit& p : config.limits) {
    crest::v1::ParameterLimit& l = out.emplace_back();
    l.set_key(p.key);
    l.set_min(static_cast<double>(p.min));
    l.set_max(static_cast<double>(p.max));
    l.set_is_bool(p.is_bool);
    l.set_is_integer(!p.is_bool);
  }
  return out;
}

std::vector<crest::v1::ParameterLimit> PublishedBenchmarkLimits() {
  std::vector<crest::v1::ParameterLimit> out;
  for (const auto& [key, range] : {std::pair{bench::kConcurrencyKey, bench::kConcurrency},
                                   std::pair{bench::kRequestCountKey, bench::kRequestCount},
                                   std::pair{bench::kWarmupRequestsKey, bench::kWarmupRequests},
                                   std::pair{bench::kMaxOutputLenKey, bench::kMaxOutputLen}}) {
    crest::v1::ParameterLimit& l = out.emplace_back();
    l.set_key(key);
    l.set_min(static_cast<double>(range.min));
    l.set_max(static_cast<double>(range.max));
    l.set_is_integer(true);
  }
  return out;
}

}  // namespace crest::agent
