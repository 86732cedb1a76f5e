#include "loadgen/mindie_adapter.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"

#include "common/status.h"
#include "loadgen/table_cells.h"

namespace crest::loadgen {
namespace {

using google::protobuf::util::TimeUtil;

constexpr char kPerfHeader[] = "The BenchMark test performance metric result is:";
constexpr char kCommonHeader[] = "The BenchMark test common metric result is:";

std::string FormatNumber(double v) {
  std::string s = absl::StrCat(v);
  return s;
}

// Rows of the table that follows `header`: each row's cells, trimmed.
// Table lines are the ones holding '|' (border lines of '+---' are skipped).
std::vector<std::vector<std::string>> TableAfter(std::string_view output, const char* header) {
  std::vector<std::vector<std::string>> rows;
  size_t at = output.find(header);
  if (at == std::string_view::npos) return rows;
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(output.data() + at, output.size() - at), '\n');
  bool in_table = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (line.empty()) {
      if (in_table) break;
      continue;
    }
    if (line.front() == '+') {
      in_table = true;
      continue;
    }
    if (line.front() != '|') {
      if (in_table) break;
      continue;
    }
    in_table = true;
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, '|')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    // "| a | b |" splits into "", "a", "b", "".
    if (!cells.empty() && cells.front().empty()) cells.erase(cells.begin());
    if (!cells.empty() && cells.back().empty()) cells.pop_back();
    if (!cells.empty()) rows.push_back(std::move(cells));
  }
  return rows;
}

// The performance table: row -> column (lower case) -> value.
using PerformanceTable = std::map<std::string, std::map<std::string, double>>;
// The common table: metric -> value text.
using CommonTable = std::map<std::string, std::string>;

// The header row names the columns.
absl::StatusOr<PerformanceTable> ReadPerformanceTable(
    const std::vector<std::vector<std::string>>& rows) {
  const std::vector<std::string>& columns = rows.front();
  PerformanceTable metric;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string>& row = rows[i];
    for (size_t c = 1; c < row.size() && c < columns.size(); ++c) {
      double v = 0;
      if (!LeadingNumber(row[c], &v)) continue;
      if (!Plausible(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("MindIE benchmark performance table: ", row[0], " ", columns[c], " is \"",
                         row[c], "\"; expected a number in [0, 1e15]"));
      }
      metric[row[0]][absl::AsciiStrToLower(columns[c])] = v;
    }
  }
  return metric;
}

absl::StatusOr<CommonTable> ReadCommonTable(const std::vector<std::vector<std::string>>& rows) {
  CommonTable values;
  for (const std::vector<std::string>& row : rows) {
    if (row.size() < 2) continue;
    double v = 0;
    if (LeadingNumber(row[1], &v) && !Plausible(v)) {
      return absl::InvalidArgumentError(absl::StrCat("MindIE benchmark common table: ", row[0],
                                                     " is \"", row[1],
                                                     "\"; expected a number in [0, 1e15]"));
    }
    values[row[0]] = row[1];
  }
  return values;
}

bool CommonNumber(const CommonTable& values, const char* key, double* out) {
  auto it = values.find(key);
  return it != values.end() && LeadingNumber(it->second, out);
}

// A performance table cell; nullopt when the table lacks it or prints "/".
std::optional<double> Cell(const PerformanceTable& metric, const char* row, const char* column) {
  auto it = metric.find(row);
  if (it == metric.end()) return std::nullopt;
  auto c = it->second.find(column);
  if (c == it->second.end()) return std::nullopt;
  return c->second;
}

// Times are in ms; a cell in μs ("8792 μs", some builds' DecodeTime) is
// converted (UnitScale). The tool prints no P50: it stays unset.
void SetLatencyStats(const PerformanceTable& metric, const char* row, crest::v1::LatencyStats* s) {
  if (metric.find(row) == metric.end()) return;
  auto get = [&metric, row](const char* column) { return Cell(metric, row, column); };
  s->set_average_ms(get("average").value_or(0));
  s->set_max_ms(get("max").value_or(0));
  s->set_min_ms(get("min").value_or(0));
  if (auto v = get("p50")) {
    s->set_p50_ms(*v);
  } else if (auto median = get("median")) {
    s->set_p50_ms(*median);
  }
  if (auto v = get("p75")) s->set_p75_ms(*v);
  if (auto v = get("p90")) s->set_p90_ms(*v);
  if (auto v = get("slo_p90")) s->set_slo_p90_ms(*v);
  if (auto v = get("p99")) s->set_p99_ms(*v);
  s->set_samples(static_cast<uint64_t>(get("n").value_or(0)));
}

// Counts, concurrency, duration and rates from the common table; returns
// Returned, which the token totals multiply.
absl::StatusOr<double> SetCommonFigures(const CommonTable& values, crest::v1::BenchmarkResult* r) {
  double failed = 0;
  double returned = 0;
  double total = 0;
  double concurrency = 0;
  double elapsed = 0;
  double v = 0;
  if (!CommonNumber(values, "Returned", &returned) ||
      !CommonNumber(values, "TimeElapsed", &elapsed)) {
    return absl::InvalidArgumentError(
        "MindIE benchmark common table lacks Returned or TimeElapsed");
  }
  CommonNumber(values, "Failed", &failed);
  if (CommonNumber(values, "Total", &total) && failed == 0 && total > returned) {
    failed = total - returned;
  }
  CommonNumber(values, "Concurrency", &concurrency);
  r->set_succeeded(static_cast<uint64_t>(returned));
  r->set_failed(static_cast<uint64_t>(failed));
  // The tool reports only how many failed, not why.
  if (failed > 0) (*r->mutable_failures())["reported_by_mindie_benchmark"] = r->failed();
  if (concurrency > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("MindIE benchmark common table: Concurrency ",
                                                   concurrency, " is above ",
                                                   std::numeric_limits<uint32_t>::max()));
  }
  r->set_concurrency(static_cast<uint32_t>(concurrency));
  // A run's duration is held in int64 nanoseconds (292 years); a figure past
  // 1e9 s is corrupt output, and converting it would be undefined behaviour.
  constexpr double kLongestRunSeconds = 1e9;
  if (elapsed > kLongestRunSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("MindIE benchmark common table: TimeElapsed is ",
                                                   elapsed, " s; expected at most 1e9 s"));
  }
  *r->mutable_duration() = TimeUtil::NanosecondsToDuration(static_cast<int64_t>(elapsed * 1e9));
  if (CommonNumber(values, "Throughput", &v)) r->set_qps(v);
  // Newer builds: OutputGenerateSpeed (+ Input/Total); older: GenerateSpeed.
  if (CommonNumber(values, "OutputGenerateSpeed", &v) ||
      CommonNumber(values, "GenerateSpeed", &v)) {
    r->set_generate_speed(v);
  }
  if (CommonNumber(values, "InputGenerateSpeed", &v)) r->set_input_generate_speed(v);
  if (CommonNumber(values, "TotalGenerateSpeed", &v)) r->set_total_generate_speed(v);
  if (CommonNumber(values, "GenerateSpeedPerClient", &v)) {
    r->set_generate_speed_per_client(v);
  } else if (concurrency > 0) {
    r->set_generate_speed_per_client(r->generate_speed() / concurrency);
  }
  return returned;
}

// A token total: the table gives per-request averages over returned
// requests. Each factor is at most 1e15, so their product can pass what
// uint64 holds.
absl::StatusOr<uint64_t> TotalTokens(const PerformanceTable& metric, const char* row,
                                     double returned) {
  const double tokens = std::round(Cell(metric, row, "average").value_or(0) * returned);
  if (tokens > kLargestFigure) {
    return absl::InvalidArgumentError(absl::StrCat("MindIE benchmark: ", row,
                                                   " average x Returned is ", tokens,
                                                   " tokens; expected at most 1e15"));
  }
  return static_cast<uint64_t>(tokens);
}

}  // namespace

absl::StatusOr<ProcessResult> SubprocessRunner::Run(const std::vector<std::string>& argv,
                                                    const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command line");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    execvp(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(fds[1]);
  ProcessResult result;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

absl::StatusOr<std::vector<std::string>> BuildMindieBenchmarkArgs(const RunOptions& options,
                                                                  const MindieToolOptions& tool) {
  const crest::v1::BenchmarkSpec& s = options.spec;
  if (s.has_max_duration() && TimeUtil::DurationToNanoseconds(s.max_duration()) > 0) {
    return absl::InvalidArgumentError(
        "the MindIE benchmark tool has no duration limit; use --RequestCount instead");
  }
  if (s.dataset().type() == crest::v1::DATASET_TYPE_SYNTHETIC) {
    return absl::InvalidArgumentError(
        "synthetic prompts are crest-bench's own; the MindIE tool needs a dataset file");
  }
  std::vector<std::string> args = {tool.binary};
  auto add = [&args](const char* flag, const std::string& value) {
    args.emplace_back(flag);
    args.push_back(value);
  };
  // The tool takes GSM8K as the directory holding test.jsonl.
  std::string dataset = options.dataset_path;
  if (s.dataset().type() != crest::v1::DATASET_TYPE_JSONL) {
    const std::string suffix = "/test.jsonl";
    if (dataset.size() > suffix.size() &&
        dataset.compare(dataset.size() - suffix.size(), suffix.size(), suffix) == 0) {
      dataset.resize(dataset.size() - suffix.size());
    }
  }
  add("--DatasetPath", dataset);
  add("--DatasetType", s.dataset().type() == crest::v1::DATASET_TYPE_JSONL ? "jsonl" : "gsm8k");
  add("--ModelName", s.model_name());
  if (!tool.model_path.empty()) add("--ModelPath", tool.model_path);
  add("--TestType", s.api() == crest::v1::BENCHMARK_API_OPENAI ? "openai" : "client");
  add("--Http", options.target.base_url);
  if (!options.target.management_url.empty()) {
    add("--ManagementHttp", options.target.management_url);
  }
  add("--Concurrency", absl::StrCat(s.concurrency()));
  add("--MaxOutputLen", absl::StrCat(s.max_output_len()));
  add("--TaskKind", s.task_kind() == crest::v1::TASK_KIND_TEXT ? "text" : "stream");
  add("--Tokenizer", tool.model_path.empty() ? "False" : "True");
  if (s.request_rate() > 0) {
    add("--RequestRate", FormatNumber(s.request_rate()));
    add("--Distribution",
        s.distribution() == crest::v1::ARRIVAL_DISTRIBUTION_CONSTANT ? "uniform" : "poisson");
  }
  if (s.request_count() > 0) add("--RequestCount", absl::StrCat(s.request_count()));
  add("--WarmupSize", absl::StrCat(s.warmup_requests()));
  if (s.has_request_timeout() && TimeUtil::DurationToNanoseconds(s.request_timeout()) > 0) {
    add("--RequestTimeOut",
        absl::StrCat(static_cast<int64_t>(std::ceil(
            static_cast<double>(TimeUtil::DurationToMilliseconds(s.request_timeout())) / 1000.0))));
  }
  add("--SavePath", tool.save_path);
  return args;
}

std::vector<std::string> MindieBenchmarkEnv() {
  return {"MINDIE_LOG_TO_STDOUT=benchmark:1; client:1"};
}

absl::StatusOr<crest::v1::BenchmarkResult> ParseMindieBenchmarkOutput(std::string_view output) {
  std::vector<std::vector<std::string>> perf = TableAfter(output, kPerfHeader);
  std::vector<std::vector<std::string>> common = TableAfter(output, kCommonHeader);
  if (perf.size() < 2 && !common.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MindIE benchmark output has the \"", kCommonHeader, "\" table but not the \"", kPerfHeader,
        "\" one: without FirstTokenTime and DecodeTime the run cannot be used (run the tool "
        "with MINDIE_LOG_TO_STDOUT=\"benchmark:1; client:1\" so it prints both)"));
  }
  if (perf.size() < 2 || common.empty()) {
    std::string_view tail = output.substr(output.size() > 400 ? output.size() - 400 : 0);
    return absl::InvalidArgumentError(
        absl::StrCat("MindIE benchmark output lacks the \"", kPerfHeader, "\" and \"",
                     kCommonHeader, "\" tables; output ends with: ", std::string(tail)));
  }
  CREST_ASSIGN_OR_RETURN(PerformanceTable metric, ReadPerformanceTable(perf));
  CREST_ASSIGN_OR_RETURN(CommonTable values, ReadCommonTable(common));
  crest::v1::BenchmarkResult r;
  SetLatencyStats(metric, "FirstTokenTime", r.mutable_first_token_time());
  SetLatencyStats(metric, "DecodeTime", r.mutable_decode_time());
  SetLatencyStats(metric, "GenerateTime", r.mutable_e2e_latency());
  CREST_ASSIGN_OR_RETURN(double returned, SetCommonFigures(values, &r));
  CREST_ASSIGN_OR_RETURN(uint64_t input_tokens, TotalTokens(metric, "InputTokens", returned));
  CREST_ASSIGN_OR_RETURN(uint64_t output_tokens, TotalTokens(metric, "GeneratedTokens", returned));
  r.set_input_tokens(input_tokens);
  r.set_output_tokens(output_tokens);
  return r;
}

absl::StatusOr<RunOutput> RunMindieBenchmark(const RunOptions& options,
                                             const MindieToolOptions& tool, ProcessRunner& runner) {
  absl::StatusOr<std::vector<std::string>> args = BuildMindieBenchmarkArgs(options, tool);
  if (!args.ok()) return args.status();
  absl::StatusOr<ProcessResult> run = runner.Run(*args, MindieBenchmarkEnv());
  if (!run.ok()) return run.status();
  absl::StatusOr<crest::v1::BenchmarkResult> result = ParseMindieBenchmarkOutput(run->output);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(tool.binary, " exited with ", run->exit_code, ": ",
                                     result.status().message()));
  }
  RunOutput out;
  out.result = *std::move(result);
  return out;
}

}  // namespace crest::loadgen
