#include "cli/node_requests.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/rpc_client.h"
#include "google/protobuf/util/time_util.h"

namespace crest::cli {
namespace {

using google::protobuf::util::TimeUtil;

google::protobuf::Duration ToProtoDuration(double seconds) {
  return TimeUtil::NanosecondsToDuration(static_cast<int64_t>(seconds * 1e9));
}

absl::Status SetApiAndTaskKind(const BenchFlags& b, crest::v1::BenchmarkSpec* spec) {
  std::string api = absl::AsciiStrToLower(b.api);
  if (api == "mindie") {
    spec->set_api(crest::v1::BENCHMARK_API_MINDIE);
  } else if (api == "openai") {
    spec->set_api(crest::v1::BENCHMARK_API_OPENAI);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--api \"", b.api, "\": expected mindie or openai"));
  }
  std::string kind = absl::AsciiStrToLower(b.task_kind);
  if (kind == "stream") {
    spec->set_task_kind(crest::v1::TASK_KIND_STREAM);
  } else if (kind == "text") {
    spec->set_task_kind(crest::v1::TASK_KIND_TEXT);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--TaskKind \"", b.task_kind, "\": expected stream or text"));
  }
  return absl::OkStatus();
}

absl::Status SetDataset(const BenchFlags& b, crest::v1::DatasetSpec* ds) {
  std::string type = absl::AsciiStrToLower(b.dataset_type);
  if (type == "gsm8k") {
    ds->set_type(crest::v1::DATASET_TYPE_GSM8K);
  } else if (type == "jsonl") {
    ds->set_type(crest::v1::DATASET_TYPE_JSONL);
  } else if (type == "synthetic") {
    ds->set_type(crest::v1::DATASET_TYPE_SYNTHETIC);
    ds->set_synthetic_input_tokens(b.synthetic_input_len);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--DatasetType \"", b.dataset_type, "\": expected gsm8k, jsonl or synthetic"));
  }
  ds->set_name(b.dataset_name);
  return absl::OkStatus();
}

absl::Status SetArrivals(const BenchFlags& b, crest::v1::BenchmarkSpec* spec) {
  std::string dist = absl::AsciiStrToLower(b.distribution);
  if (dist == "poisson") {
    spec->set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_POISSON);
  } else if (dist == "constant" || dist == "uniform") {
    spec->set_distribution(crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--Distribution \"", b.distribution, "\": expected poisson or constant"));
  }
  if (b.request_rate < 0 || !std::isfinite(b.request_rate)) {
    return absl::InvalidArgumentError("--RequestRate: expected a number >= 0");
  }
  spec->set_request_rate(b.request_rate);
  return absl::OkStatus();
}

}  // namespace

void AddStartFlags(CLI::App& cmd, StartFlags* flags) {
  cmd.add_option("--set", flags->sets,
                 "ScheduleConfig KEY=VALUE (repeatable), e.g. maxBatchSize=400");
  cmd.add_option("--pin", flags->pin, "odd-numa | none | CPU list (e.g. 24-47,72-95)")
      ->capture_default_str();
  cmd.add_flag("--replace", flags->replace, "Stop a running daemon first instead of refusing");
  cmd.add_option("--start-timeout", flags->start_timeout_s,
                 "Start-up deadline in seconds (capped by the agent's config)");
  cmd.add_flag("--stream-log", flags->stream_log, "Print the daemon's log lines while it starts");
}

void AddBenchFlags(CLI::App& cmd, BenchFlags* b) {
  cmd.add_option("--Concurrency,--concurrency", b->concurrency, "Requests in flight at most")
      ->capture_default_str();
  cmd.add_option("--RequestRate,--request-rate", b->request_rate,
                 "Requests per second (0: concurrency mode)");
  cmd.add_option("--RequestCount,--request-count", b->request_count,
                 "Measured requests (0: the dataset once)");
  cmd.add_option("--MaxOutputLen,--max-output-len", b->max_output_len,
                 "Generated tokens per request at most")
      ->capture_default_str();
  cmd.add_option("--DatasetType,--dataset-type", b->dataset_type, "gsm8k | jsonl | synthetic")
      ->capture_default_str();
  cmd.add_option("--DatasetName,--dataset-name", b->dataset_name,
                 "A dataset the agent has (by name, never a path)");
  cmd.add_option("--SyntheticInputLen,--synthetic-input-len", b->synthetic_input_len,
                 "synthetic: tokens per prompt");
  cmd.add_option("--TaskKind,--task-kind", b->task_kind, "stream | text")->capture_default_str();
  cmd.add_option("--api", b->api, "mindie | openai")->capture_default_str();
  cmd.add_option("--ModelName,--model-name", b->model_name,
                 "Model name in requests (default: the daemon's)");
  cmd.add_option("--Distribution,--distribution", b->distribution, "poisson | constant")
      ->capture_default_str();
  cmd.add_option("--WarmupRequests,--warmup-requests,--WarmupSize,--warmup-size", b->warmup,
                 "Requests sent and discarded first");
  cmd.add_option("--RequestTimeOut,--request-timeout", b->request_timeout_s,
                 "Seconds before a request counts as failed")
      ->capture_default_str();
  cmd.add_option("--Duration,--duration", b->duration_s, "Stop sending after this many seconds");
  cmd.add_option("--seed,--Seed", b->seed, "Seed for prompt order and arrival gaps");
}

absl::StatusOr<crest::v1::ConfigOverride> ParseSet(absl::string_view text) {
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--set \"", text, "\": expected KEY=VALUE"));
  }
  crest::v1::ConfigOverride o;
  o.set_key(std::string(text.substr(0, eq)));
  absl::string_view value = text.substr(eq + 1);
  std::string lower = absl::AsciiStrToLower(value);
  int64_t i = 0;
  double d = 0;
  if (lower == "true" || lower == "false") {
    o.set_bool_value(lower == "true");
  } else if (absl::SimpleAtoi(value, &i)) {
    o.set_int_value(i);
  } else if (absl::SimpleAtod(value, &d) && std::isfinite(d)) {
    o.set_double_value(d);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--set ", o.key(), "=\"", value, "\": expected an integer, a number, true or false"));
  }
  return o;
}

absl::StatusOr<crest::v1::PinningPolicy> ParsePin(absl::string_view pin) {
  crest::v1::PinningPolicy p;
  if (pin == "none") {
    p.set_mode(crest::v1::PINNING_NONE);
  } else if (pin == "odd-numa") {
    p.set_mode(crest::v1::PINNING_ODD_NUMA);
  } else if (!pin.empty() && absl::ascii_isdigit(static_cast<unsigned char>(pin[0]))) {
    p.set_mode(crest::v1::PINNING_CPU_LIST);
    p.set_cpu_list(std::string(pin));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--pin \"", pin, "\": expected odd-numa, none or a CPU list such as 24-47"));
  }
  return p;
}

absl::StatusOr<crest::v1::StartDaemonRequest> MakeStartRequest(uint32_t slot,
                                                               const StartFlags& flags) {
  crest::v1::StartDaemonRequest req;
  req.set_slot(slot);
  for (const std::string& set : flags.sets) {
    CREST_ASSIGN_OR_RETURN(*req.add_overrides(), ParseSet(set));
  }
  CREST_ASSIGN_OR_RETURN(*req.mutable_pinning(), ParsePin(flags.pin));
  req.set_replace_running(flags.replace);
  req.set_stream_log(flags.stream_log);
  if (flags.start_timeout_s < 0 || !std::isfinite(flags.start_timeout_s)) {
    return absl::InvalidArgumentError("--start-timeout: expected seconds >= 0 (0: the agent's)");
  }
  if (flags.start_timeout_s > 0) {
    *req.mutable_start_timeout() = ToProtoDuration(flags.start_timeout_s);
  }
  return req;
}

absl::Duration StartCallTimeout(const StartFlags& flags) {
  if (flags.start_timeout_s > 0) return absl::Seconds(flags.start_timeout_s) + kDaemonStartMargin;
  return kDaemonStartTimeout;
}

absl::StatusOr<crest::v1::StopDaemonRequest> MakeStopRequest(uint32_t slot, double grace_s) {
  if (grace_s < 0 || !std::isfinite(grace_s)) {
    return absl::InvalidArgumentError("--grace: expected seconds >= 0");
  }
  crest::v1::StopDaemonRequest req;
  req.set_slot(slot);
  if (grace_s > 0) *req.mutable_grace() = ToProtoDuration(grace_s);
  return req;
}

absl::Duration StopCallTimeout(double grace_s) {
  return absl::Seconds(std::max(0.0, grace_s)) + kDaemonStopMargin;
}

absl::StatusOr<crest::v1::BenchmarkSpec> MakeBenchmarkSpec(const BenchFlags& b) {
  crest::v1::BenchmarkSpec spec;
  CREST_RETURN_IF_ERROR(SetApiAndTaskKind(b, &spec));
  CREST_RETURN_IF_ERROR(SetDataset(b, spec.mutable_dataset()));
  CREST_RETURN_IF_ERROR(SetArrivals(b, &spec));
  spec.set_model_name(b.model_name);
  spec.set_concurrency(b.concurrency);
  spec.set_request_count(b.request_count);
  spec.set_max_output_len(b.max_output_len);
  spec.set_warmup_requests(b.warmup);
  spec.set_seed(b.seed);
  if (!(b.request_timeout_s > 0) || !std::isfinite(b.request_timeout_s)) {
    return absl::InvalidArgumentError("--RequestTimeOut: expected > 0");
  }
  *spec.mutable_request_timeout() = ToProtoDuration(b.request_timeout_s);
  if (b.duration_s < 0 || !std::isfinite(b.duration_s)) {
    return absl::InvalidArgumentError("--Duration: expected >= 0");
  }
  if (b.duration_s > 0) *spec.mutable_max_duration() = ToProtoDuration(b.duration_s);
  return spec;
}

}  // namespace crest::cli
