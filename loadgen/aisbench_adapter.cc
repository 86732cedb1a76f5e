#include "loadgen/aisbench_adapter.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/time_util.h"

#include "common/file_util.h"
#include "common/status.h"
#include "loadgen/table_cells.h"

namespace crest::loadgen {
namespace {

using google::protobuf::util::TimeUtil;

constexpr char kResultsLine[] = "Performance Results of task";
// The box-drawing column separator of tabulate's fancy_grid (U+2502).
constexpr char kColumn[] = "\xE2\x94\x82";

// What AISBench reported, as text cells: metric -> column (lower case:
// "average", "median", "p90", "n", ...) -> cell, for the stage read; and the
// common metrics, name -> cell.
struct AisTables {
  std::map<std::string, std::map<std::string, std::string>> stats;
  std::map<std::string, std::string> common;
};

// The stage whose rows are read: "total" when any row has it (the default
// summarizer), else the first stage seen (stable_stage's name).
bool KeepStage(const std::string& stage, std::string& chosen, bool any_total) {
  if (any_total) return stage == "total";
  if (chosen.empty()) chosen = stage;
  return stage == chosen;
}

// Rows of cells: a header, then data rows, each with the metric and stage
// first. Adds them to `tables`, the header's columns naming the cells.
void AddRows(const std::vector<std::vector<std::string>>& rows, AisTables& tables) {
  if (rows.empty()) return;
  const std::vector<std::string>& header = rows.front();
  if (header.empty()) return;
  const bool common = absl::StrContains(header[0], "Common Metric");
  bool any_total = false;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].size() > 1 && rows[i][1] == "total") any_total = true;
  }
  std::string chosen;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string>& row = rows[i];
    if (row.size() < 3 || !KeepStage(row[1], chosen, any_total)) continue;
    if (common) {
      // Older builds print "Total generated tokens".
      std::string name = row[0];
      if (absl::EqualsIgnoreCase(name, "Total generated tokens")) name = "Total Generated Tokens";
      tables.common[name] = row[2];
      continue;
    }
    for (size_t c = 2; c < row.size() && c < header.size(); ++c) {
      tables.stats[row[0]][absl::AsciiStrToLower(header[c])] = row[c];
    }
  }
}

std::optional<double> Number(const std::string& cell) {
  double v = 0;
  if (!LeadingNumber(cell, &v)) return std::nullopt;
  return v;
}

absl::Status CheckPlausible(const std::string& what, const std::string& cell, double v) {
  if (Plausible(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("AISBench ", what, " is \"", cell, "\"; expected a number in [0, 1e15]"));
}

// One latency row into `out` (milliseconds, as AISBench prints them).
absl::Status SetStats(const AisTables& tables, const char* metric, crest::v1::LatencyStats* out) {
  auto row = tables.stats.find(metric);
  if (row == tables.stats.end()) return absl::OkStatus();
  for (const auto& [column, cell] : row->second) {
    std::optional<double> v = Number(cell);
    if (!v) continue;  // "/" or text: the figure stays unset
    CREST_RETURN_IF_ERROR(CheckPlausible(absl::StrCat(metric, " ", column), cell, *v));
    if (column == "average") out->set_average_ms(*v);
    if (column == "min") out->set_min_ms(*v);
    if (column == "max") out->set_max_ms(*v);
    if (column == "median" || column == "p50") out->set_p50_ms(*v);
    if (column == "p75") out->set_p75_ms(*v);
    if (column == "p90") out->set_p90_ms(*v);
    if (column == "p99") out->set_p99_ms(*v);
    if (column == "n") out->set_samples(static_cast<uint64_t>(*v));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<double>> Common(const AisTables& tables, const char* name) {
  auto it = tables.common.find(name);
  if (it == tables.common.end()) return std::optional<double>();
  std::optional<double> v = Number(it->second);
  if (v) CREST_RETURN_IF_ERROR(CheckPlausible(name, it->second, *v));
  return v;
}

absl::StatusOr<crest::v1::BenchmarkResult> FromTables(const AisTables& tables) {
  CREST_ASSIGN_OR_RETURN(std::optional<double> output_speed,
                         Common(tables, "Output Token Throughput"));
  CREST_ASSIGN_OR_RETURN(std::optional<double> succeeded, Common(tables, "Success Requests"));
  if (!output_speed || !succeeded) {
    return absl::InvalidArgumentError(
        "AISBench results lack \"Output Token Throughput\" or \"Success Requests\" among the "
        "common metrics");
  }
  crest::v1::BenchmarkResult r;
  r.set_generate_speed(*output_speed);
  r.set_succeeded(static_cast<uint64_t>(*succeeded));
  CREST_ASSIGN_OR_RETURN(std::optional<double> failed, Common(tables, "Failed Requests"));
  r.set_failed(static_cast<uint64_t>(failed.value_or(0)));
  // AISBench reports how many failed, not why.
  if (r.failed() > 0) (*r.mutable_failures())["reported_by_aisbench"] = r.failed();
  CREST_ASSIGN_OR_RETURN(std::optional<double> concurrency, Common(tables, "Max Concurrency"));
  if (concurrency && *concurrency <= 4294967295.0) {
    r.set_concurrency(static_cast<uint32_t>(*concurrency));
    if (*concurrency > 0) r.set_generate_speed_per_client(*output_speed / *concurrency);
  }
  CREST_ASSIGN_OR_RETURN(std::optional<double> qps, Common(tables, "Request Throughput"));
  if (qps) r.set_qps(*qps);
  CREST_ASSIGN_OR_RETURN(std::optional<double> input_speed,
                         Common(tables, "Input Token Throughput"));
  if (input_speed) r.set_input_generate_speed(*input_speed);
  CREST_ASSIGN_OR_RETURN(std::optional<double> total_speed,
                         Common(tables, "Total Token Throughput"));
  if (total_speed) r.set_total_generate_speed(*total_speed);
  CREST_ASSIGN_OR_RETURN(std::optional<double> input_tokens, Common(tables, "Total Input Tokens"));
  if (input_tokens) r.set_input_tokens(static_cast<uint64_t>(*input_tokens));
  CREST_ASSIGN_OR_RETURN(std::optional<double> output_tokens,
                         Common(tables, "Total Generated Tokens"));
  if (output_tokens) r.set_output_tokens(static_cast<uint64_t>(*output_tokens));
  CREST_ASSIGN_OR_RETURN(std::optional<double> duration_ms, Common(tables, "Benchmark Duration"));
  // A run's duration is held in int64 nanoseconds; past 1e12 ms is corrupt.
  if (duration_ms && *duration_ms <= 1e12) {
    *r.mutable_duration() =
        TimeUtil::NanosecondsToDuration(static_cast<int64_t>(*duration_ms * 1e6));
  }
  CREST_RETURN_IF_ERROR(SetStats(tables, "TTFT", r.mutable_first_token_time()));
  // MindIE's DecodeTime is the time per output token: AISBench's TPOT.
  CREST_RETURN_IF_ERROR(SetStats(tables, "TPOT", r.mutable_decode_time()));
  CREST_RETURN_IF_ERROR(SetStats(tables, "E2EL", r.mutable_e2e_latency()));
  return r;
}

// Debian's abseil has its own string_view.
absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

// The rows of the fancy_grid tables after `at` in `output`, one vector of
// rows per table (a border line between tables ends one).
std::vector<std::vector<std::vector<std::string>>> GridTables(std::string_view output) {
  std::vector<std::vector<std::vector<std::string>>> tables;
  std::vector<std::vector<std::string>> current;
  for (absl::string_view line : absl::StrSplit(Absl(output), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, kColumn)) {
      std::vector<std::string> cells;
      for (absl::string_view cell : absl::StrSplit(line, kColumn)) {
        cells.emplace_back(absl::StripAsciiWhitespace(cell));
      }
      // "│ a │ b │" splits into "", "a", "b", "".
      if (!cells.empty() && cells.front().empty()) cells.erase(cells.begin());
      if (!cells.empty() && cells.back().empty()) cells.pop_back();
      if (!cells.empty()) current.push_back(std::move(cells));
      continue;
    }
    // "╘" (U+2558) closes a table; a line of other text ends one too.
    const bool rule = absl::StartsWith(line, "\xE2\x95") || absl::StartsWith(line, "\xE2\x94");
    if ((!rule || absl::StartsWith(line, "\xE2\x95\x98")) && !current.empty()) {
      tables.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tables.push_back(std::move(current));
  return tables;
}

std::string Tail(std::string_view output) {
  return std::string(output.substr(output.size() > 400 ? output.size() - 400 : 0));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> BuildAisBenchArgs(const RunOptions& options,
                                                           const AisBenchOptions& tool) {
  const crest::v1::BenchmarkSpec& s = options.spec;
  if (s.has_max_duration() && TimeUtil::DurationToNanoseconds(s.max_duration()) > 0) {
    return absl::InvalidArgumentError(
        "AISBench has no duration limit in perf mode; use a request count instead");
  }
  if (s.dataset().type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    return absl::InvalidArgumentError(
        "synthetic prompts are crest-bench's own; AISBench takes a dataset config "
        "(--aisbench-datasets, e.g. synthetic_gen)");
  }
  absl::string_view url = options.target.base_url;
  if (!absl::ConsumePrefix(&url, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("AISBench adapter: the target \"", options.target.base_url,
                     "\" is not http://host:port (an https daemon needs the model config's own "
                     "url and certificates: run AISBench by hand, or serve plain http)"));
  }
  url = absl::StripSuffix(url, "/");
  const size_t colon = url.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == url.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AISBench adapter: the target \"", options.target.base_url, "\" has no port"));
  }
  std::vector<std::string> args = {tool.binary,    "--models",   tool.models,  "--datasets",
                                   tool.datasets,  "--mode",     "perf",       "--summarizer",
                                   "default_perf", "--work-dir", tool.work_dir};
  auto add = [&args](const char* flag, const std::string& value) {
    args.emplace_back(flag);
    args.push_back(value);
  };
  add("--host-ip", std::string(url.substr(0, colon)));
  add("--host-port", std::string(url.substr(colon + 1)));
  add("--model-name", s.model_name());
  add("--batch-size", absl::StrCat(s.concurrency()));
  add("--max-out-len", absl::StrCat(s.max_output_len()));
  if (s.request_rate() > 0) add("--request-rate", absl::StrCat(s.request_rate()));
  if (s.request_count() > 0) add("--num-prompts", absl::StrCat(s.request_count()));
  add("--num-warmups", absl::StrCat(s.warmup_requests()));
  return args;
}

absl::StatusOr<crest::v1::BenchmarkResult> ParseAisBenchScreen(std::string_view output) {
  // The tables after the last results line; a pasted table without that
  // line is read whole.
  size_t at = output.rfind(kResultsLine);
  if (at == std::string_view::npos) at = 0;
  AisTables tables;
  for (const auto& rows : GridTables(output.substr(at))) AddRows(rows, tables);
  if (tables.common.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AISBench output lacks the perf mode's \"Common Metric\" table (was it run "
                     "with --mode perf?); output ends with: ",
                     Tail(output)));
  }
  return FromTables(tables);
}

absl::StatusOr<crest::v1::BenchmarkResult> ParseAisBenchResultFiles(std::string_view csv,
                                                                    std::string_view json) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(Absl(csv), '\n', absl::SkipWhitespace())) {
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), ',')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    rows.push_back(std::move(cells));
  }
  if (rows.empty() || rows.front().empty() || rows.front()[0] != "Performance Parameters") {
    return absl::InvalidArgumentError(
        "AISBench result .csv: expected a header row \"Performance Parameters,Stage,...\"");
  }
  AisTables tables;
  AddRows(rows, tables);
  nlohmann::json common = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (common.is_discarded() || !common.is_object()) {
    return absl::InvalidArgumentError(
        "AISBench result .json: expected an object of {metric: {stage: value}}");
  }
  std::vector<std::vector<std::string>> common_rows = {{"Common Metric", "Stage", "Value"}};
  for (const auto& [name, stages] : common.items()) {
    if (!stages.is_object()) continue;
    for (const auto& [stage, value] : stages.items()) {
      common_rows.push_back(
          {name, stage, value.is_string() ? value.get<std::string>() : value.dump()});
    }
  }
  AddRows(common_rows, tables);
  return FromTables(tables);
}

std::string AisBenchResultDir(std::string_view output) {
  for (const char* marker : {"Result files located in ", "files locate in "}) {
    const size_t at = output.rfind(marker);
    if (at == std::string_view::npos) continue;
    std::string_view rest = output.substr(at + std::strlen(marker));
    rest = rest.substr(0, rest.find('\n'));
    absl::string_view dir = absl::StripAsciiWhitespace(Absl(rest));
    dir = absl::StripSuffix(dir, ".");
    return std::string(dir);
  }
  return "";
}

absl::StatusOr<RunOutput> RunAisBench(const RunOptions& options, const AisBenchOptions& tool,
                                      ProcessRunner& runner) {
  CREST_ASSIGN_OR_RETURN(std::vector<std::string> args, BuildAisBenchArgs(options, tool));
  CREST_ASSIGN_OR_RETURN(ProcessResult run, runner.Run(args, {}));
  absl::StatusOr<crest::v1::BenchmarkResult> result = absl::InvalidArgumentError("no result files");
  const std::string dir = AisBenchResultDir(run.output);
  std::error_code error;
  if (!dir.empty() && std::filesystem::is_directory(dir, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      if (entry.path().extension() != ".csv") continue;
      std::filesystem::path json_path = entry.path();
      json_path.replace_extension(".json");
      absl::StatusOr<std::string> csv = ReadFileToString(entry.path().string());
      absl::StatusOr<std::string> json = ReadFileToString(json_path.string());
      if (csv.ok() && json.ok()) result = ParseAisBenchResultFiles(*csv, *json);
      break;
    }
  }
  if (!result.ok()) result = ParseAisBenchScreen(run.output);
  if (!result.ok()) {
    return absl::Status(
        result.status().code(),
        absl::StrCat(tool.binary, " exited with ", run.exit_code, ": ", result.status().message()));
  }
  RunOutput out;
  out.result = *std::move(result);
  return out;
}

}  // namespace crest::loadgen
