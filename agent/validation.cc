#include "agent/validation.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

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
  for (const auto& [k, v] : current.schedule) {
    int64_t value = 0;
    if (k == key && absl::SimpleAtoi(v, &value)) return value;
  }
  return -1;
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

absl::StatusOr<std::vector<JsonEdit>> ValidateOverrides(
    const google::protobuf::RepeatedPtrField<crest::v1::ConfigOverride>& overrides,
    const AgentConfig& config, const MindieConfigView& current) {
  std::vector<JsonEdit> edits;
  std::map<std::string, int64_t> ints;
  std::set<std::string> seen;
  for (int i = 0; i < overrides.size(); ++i) {
    const crest::v1::ConfigOverride& o = overrides[i];
    std::string field = absl::StrCat("overrides[", i, "]");
    const ParamLimit* limit = config.FindLimit(o.key());
    if (limit == nullptr) {
      return Invalid(field + ".key", absl::StrCat("\"", o.key(), "\" is not an overridable key (",
                                                  KnownKeys(config), ")"));
    }
    field = absl::StrCat(field, " (", o.key(), ")");
    if (!seen.insert(o.key()).second) return Invalid(field, "given more than once");
    std::string literal;
    if (limit->is_bool) {
      if (o.value_case() != crest::v1::ConfigOverride::kBoolValue) {
        return Invalid(field, "expected a boolean (bool_value)");
      }
      literal = o.bool_value() ? "true" : "false";
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
      literal = absl::StrCat(v);
    }
    edits.push_back({{"BackendConfig", "ScheduleConfig", o.key()}, literal});
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
  return edits;
}

absl::Status ValidateHostTuning(const crest::v1::ApplyHostTuningRequest& request,
                                const std::vector<std::string>& available_governors,
                                bool governor_supported) {
  if (!request.governor().empty() && governor_supported) {
    bool known = false;
    for (const std::string& g : available_governors) known = known || g == request.governor();
    if (!known) {
      return Invalid("governor", absl::StrCat("\"", request.governor(),
                                              "\" is not offered by this host (available: ",
                                              absl::StrJoin(available_governors, ", "), ")"));
    }
  } else if (!request.governor().empty() && !IsSafeName(request.governor())) {
    return Invalid("governor", "expected a governor name such as performance");
  }
  if (!request.thp().empty() && request.thp() != "always" && request.thp() != "madvise" &&
      request.thp() != "never") {
    return Invalid(
        "thp", absl::StrCat("\"", request.thp(), "\" is not a THP mode (always|madvise|never)"));
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
                   absl::StrCat("\"", ds.name(),
                                "\" is not a dataset name (letters, digits, _ - .; no paths)"));
  }
  if (ds.type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    if (ds.synthetic_input_tokens() < 1 || ds.synthetic_input_tokens() > 131072) {
      return Invalid("spec.dataset.synthetic_input_tokens", "expected [1, 131072] for SYNTHETIC");
    }
  } else if (ds.synthetic_input_tokens() != 0) {
    return Invalid("spec.dataset.synthetic_input_tokens", "only allowed with SYNTHETIC");
  }
  if (spec.model_name().size() > 256) return Invalid("spec.model_name", "longer than 256 bytes");
  for (char c : spec.model_name()) {
    if (static_cast<unsigned char>(c) < 0x20) {
      return Invalid("spec.model_name", "contains control characters");
    }
  }
  if (spec.concurrency() < 1 || spec.concurrency() > 100000) {
    return Invalid("spec.concurrency",
                   absl::StrCat("expected [1, 100000], got ", spec.concurrency()));
  }
  if (!std::isfinite(spec.request_rate()) || spec.request_rate() < 0 || spec.request_rate() > 1e6) {
    return Invalid("spec.request_rate", "expected [0, 1e6] requests/s (0: concurrency mode)");
  }
  if (spec.request_count() > 10'000'000) {
    return Invalid("spec.request_count", "expected at most 10000000");
  }
  if (spec.max_output_len() < 1 || spec.max_output_len() > 1'048'576) {
    return Invalid("spec.max_output_len",
                   absl::StrCat("expected [1, 1048576] tokens, got ", spec.max_output_len()));
  }
  if (spec.warmup_requests() > 100'000) {
    return Invalid("spec.warmup_requests", "expected at most 100000");
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

}  // namespace crest::agent
