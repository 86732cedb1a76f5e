#include "loadgen/report.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"

namespace crest::loadgen {
namespace {

using google::protobuf::util::TimeUtil;
using nlohmann::ordered_json;

double Seconds(const google::protobuf::Duration& d) {
  return static_cast<double>(TimeUtil::DurationToNanoseconds(d)) / 1e9;
}

// A percentile the source did not give is null, never 0.
ordered_json Optional(bool has, double value) { return has ? ordered_json(value) : ordered_json(); }

ordered_json Stats(const crest::v1::LatencyStats& s) {
  ordered_json out{{"average", s.average_ms()},
                   {"p50", Optional(s.has_p50_ms(), s.p50_ms())},
                   {"p90", Optional(s.has_p90_ms(), s.p90_ms())},
                   {"p99", Optional(s.has_p99_ms(), s.p99_ms())},
                   {"max", s.max_ms()}};
  if (s.has_p75_ms()) out["p75"] = s.p75_ms();
  if (s.has_slo_p90_ms()) out["slo_p90"] = s.slo_p90_ms();
  return out;
}

const char* ApiName(crest::v1::BenchmarkApi api) {
  return api == crest::v1::BENCHMARK_API_OPENAI ? "openai" : "mindie";
}

const char* DatasetName(crest::v1::DatasetType type) {
  switch (type) {
    case crest::v1::DATASET_TYPE_JSONL:
      return "jsonl";
    case crest::v1::DATASET_TYPE_SYNTHETIC:
      return "synthetic";
    default:
      return "gsm8k";
  }
}

const char* SourceName(crest::v1::TokenCountSource source) {
  switch (source) {
    case crest::v1::TOKEN_COUNT_SOURCE_STREAM_EVENTS:
      return "stream_events";
    case crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS:
      return "usage_fields";
    default:
      return "unknown";
  }
}

ordered_json Parameters(const ReportContext& context) {
  ordered_json p;
  p["engine"] = context.engine;
  if (context.options == nullptr) return p;
  const RunOptions& o = *context.options;
  const crest::v1::BenchmarkSpec& s = o.spec;
  p["Http"] = o.target.base_url;
  p["ManagementHttp"] = o.target.management_url;
  p["api"] = ApiName(s.api());
  p["TaskKind"] = s.task_kind() == crest::v1::TASK_KIND_TEXT ? "text" : "stream";
  p["DatasetType"] = DatasetName(s.dataset().type());
  p["DatasetPath"] = o.dataset_path;
  if (s.dataset().type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    p["SyntheticInputLen"] = s.dataset().synthetic_input_tokens();
  }
  p["ModelName"] = s.model_name();
  p["Concurrency"] = s.concurrency();
  p["RequestRate"] = s.request_rate();
  p["Distribution"] =
      s.distribution() == crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT ? "constant" : "poisson";
  p["RequestCount"] = s.request_count();
  p["Duration"] = s.has_max_duration() ? Seconds(s.max_duration()) : 0.0;
  p["MaxOutputLen"] = s.max_output_len();
  p["WarmupRequests"] = s.warmup_requests();
  p["RequestTimeOut"] = s.has_request_timeout() ? Seconds(s.request_timeout()) : 600.0;
  p["seed"] = s.seed();
  return p;
}

std::string Ms(double v) { return absl::StrFormat("%.4f ms", v); }
// A percentile the source lacks prints as MindIE prints it: "/".
std::string Ms(bool has, double v) { return has ? Ms(v) : "/"; }

ordered_json Client(const crest::v1::ClientHealth& c) {
  ordered_json j{
      {"cpu_seconds", c.cpu_seconds()},
      {"cpu_utilisation", c.cpu_utilisation()},
      {"wall_seconds", c.wall_seconds()},
      {"loop_busy", c.loop_busy()},
      {"loop_lag_ms",
       {{"p50", c.loop_lag_p50_ms()}, {"p99", c.loop_lag_p99_ms()}, {"max", c.loop_lag_max_ms()}}},
      {"send_lag_ms",
       {{"p50", c.send_lag_p50_ms()}, {"p99", c.send_lag_p99_ms()}, {"max", c.send_lag_max_ms()}}},
      {"slot_waits", c.slot_waits()},
      {"client_bound", c.client_bound()},
      {"client_bound_reason", c.client_bound_reason()}};
  return j;
}

}  // namespace

std::string FormatJson(const crest::v1::BenchmarkResult& r, const ReportContext& context) {
  ordered_json j;
  j["GenerateSpeed"] = r.generate_speed();
  j["GenerateSpeedPerClient"] = r.generate_speed_per_client();
  j["FirstTokenTime"] = Stats(r.first_token_time());
  j["DecodeTime"] = Stats(r.decode_time());
  j["QPS"] = r.qps();
  j["succeeded"] = r.succeeded();
  j["failed"] = r.failed();
  ordered_json failures = ordered_json::object();
  // The proto map has no order; sort for a stable document.
  std::map<std::string, uint64_t> sorted(r.failures().begin(), r.failures().end());
  for (const auto& [reason, count] : sorted) failures[reason] = count;
  j["failures"] = failures;
  j["parameters"] = Parameters(context);
  j["E2ELatency"] = Stats(r.e2e_latency());
  j["FirstTokenTimeMin"] = r.first_token_time().min_ms();
  j["DecodeTimeMin"] = r.decode_time().min_ms();
  j["E2ELatencyMin"] = r.e2e_latency().min_ms();
  j["InputTokens"] = r.input_tokens();
  j["OutputTokens"] = r.output_tokens();
  j["InputGenerateSpeed"] = Optional(r.has_input_generate_speed(), r.input_generate_speed());
  j["TotalGenerateSpeed"] = Optional(r.has_total_generate_speed(), r.total_generate_speed());
  j["Concurrency"] = r.concurrency();
  j["TimeElapsed"] = Seconds(r.duration());
  j["started"] = TimeUtil::ToString(r.started());
  j["token_count_source"] = SourceName(r.token_count_source());
  j["samples"] = {{"FirstTokenTime", r.first_token_time().samples()},
                  {"DecodeTime", r.decode_time().samples()},
                  {"E2ELatency", r.e2e_latency().samples()}};
  if (r.has_client()) j["client"] = Client(r.client());
  return j.dump(2) + "\n";
}

std::string FormatTable(const crest::v1::BenchmarkResult& r, const ReportContext& context) {
  std::string out = "The BenchMark test performance metric result is:\n";
  const std::string rule(126, '-');  // 20 (name) + 6 x 16 (stats) + 10 (N)
  absl::StrAppendFormat(&out, "%-20s%16s%16s%16s%16s%16s%16s%10s\n", "Metric", "average", "max",
                        "min", "P50", "P90", "P99", "N");
  absl::StrAppend(&out, rule, "\n");
  auto row = [&out](const char* name, const crest::v1::LatencyStats& s) {
    absl::StrAppendFormat(&out, "%-20s%16s%16s%16s%16s%16s%16s%10d\n", name, Ms(s.average_ms()),
                          Ms(s.max_ms()), Ms(s.min_ms()), Ms(s.has_p50_ms(), s.p50_ms()),
                          Ms(s.has_p90_ms(), s.p90_ms()), Ms(s.has_p99_ms(), s.p99_ms()),
                          s.samples());
  };
  row("FirstTokenTime", r.first_token_time());
  row("DecodeTime", r.decode_time());
  row("GenerateTime", r.e2e_latency());
  absl::StrAppend(&out, "\nThe BenchMark test common metric result is:\n");
  absl::StrAppendFormat(&out, "%-26s%s\n", "Common Metric", "Value");
  absl::StrAppend(&out, std::string(50, '-'), "\n");
  auto kv = [&out](const char* name, const std::string& value) {
    absl::StrAppendFormat(&out, "%-26s%s\n", name, value);
  };
  const double elapsed = Seconds(r.duration());
  kv("CurrentTime", absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()));
  kv("TimeElapsed", absl::StrFormat("%.4f s", elapsed));
  kv("Failed", absl::StrCat(r.failed()));
  kv("Returned", absl::StrCat(r.succeeded()));
  kv("Total", absl::StrCat(r.succeeded() + r.failed()));
  kv("Concurrency", absl::StrCat(r.concurrency()));
  if (context.options != nullptr) kv("ModelName", context.options->spec.model_name());
  kv("Throughput", absl::StrFormat("%.4f req/s", r.qps()));
  kv("InputTokens", absl::StrCat(r.input_tokens()));
  kv("GeneratedTokens", absl::StrCat(r.output_tokens()));
  kv("GenerateSpeed", absl::StrFormat("%.4f token/s", r.generate_speed()));
  kv("InputGenerateSpeed", r.has_input_generate_speed()
                               ? absl::StrFormat("%.4f token/s", r.input_generate_speed())
                               : "/");
  kv("TotalGenerateSpeed", r.has_total_generate_speed()
                               ? absl::StrFormat("%.4f token/s", r.total_generate_speed())
                               : "/");
  kv("GenerateSpeedPerClient", absl::StrFormat("%.4f token/s", r.generate_speed_per_client()));
  kv("TokenCountSource", SourceName(r.token_count_source()));
  if (r.has_client()) {
    const crest::v1::ClientHealth& c = r.client();
    kv("ClientCPU",
       absl::StrFormat("%.3f s (%.0f%% of one core)", c.cpu_seconds(), 100 * c.cpu_utilisation()));
    kv("ClientLoopBusy", absl::StrFormat("%.0f%%", 100 * c.loop_busy()));
    kv("ClientLoopLag",
       absl::StrFormat("p50 %.3f ms, p99 %.3f ms, max %.3f ms", c.loop_lag_p50_ms(),
                       c.loop_lag_p99_ms(), c.loop_lag_max_ms()));
    if (context.options != nullptr && context.options->spec.request_rate() > 0) {
      kv("ClientSendLag",
         absl::StrFormat("p50 %.3f ms, p99 %.3f ms, max %.3f ms (%d waited for a slot)",
                         c.send_lag_p50_ms(), c.send_lag_p99_ms(), c.send_lag_max_ms(),
                         c.slot_waits()));
    }
    kv("ClientBound", c.client_bound() ? "YES: " + c.client_bound_reason() : "no");
  }
  if (!r.failures().empty()) {
    std::map<std::string, uint64_t> sorted(r.failures().begin(), r.failures().end());
    std::string reasons;
    for (const auto& [reason, count] : sorted) {
      absl::StrAppend(&reasons, reasons.empty() ? "" : ", ", reason, "=", count);
    }
    kv("FailureReasons", reasons);
  }
  return out;
}

std::string FormatCsv(const std::vector<RequestRecord>& requests) {
  std::string out =
      "index,sent_unix_ms,first_token_ms,decode_avg_ms,e2e_ms,input_tokens,output_tokens,"
      "token_events,ok,failure,http_status\n";
  for (const RequestRecord& r : requests) {
    absl::StrAppendFormat(&out, "%d,%.3f,%.3f,%.3f,%.3f,%d,%d,%d,%s,%s,%d\n", r.index,
                          absl::ToDoubleMilliseconds(r.sent - absl::UnixEpoch()), r.first_token_ms,
                          r.decode_avg_ms, r.e2e_ms, r.input_tokens, r.output_tokens,
                          r.token_events, r.ok ? "true" : "false", r.failure, r.http_status);
  }
  return out;
}

std::string FormatProgress(const crest::v1::BenchmarkProgress& p) {
  std::string done = p.requests_total() > 0
                         ? absl::StrCat(p.requests_done(), "/", p.requests_total())
                         : absl::StrCat(p.requests_done());
  return absl::StrFormat("requests %s (%d failed)  %.1f tokens/s  elapsed %.0fs  ETA %.0fs", done,
                         p.requests_failed(), p.tokens_per_second(), Seconds(p.elapsed()),
                         Seconds(p.eta()));
}

}  // namespace crest::loadgen
