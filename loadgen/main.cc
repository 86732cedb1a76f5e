// crest-bench: drives an inference server the way MindIE's `benchmark` client
// test does (same flags) and prints/writes what tuning optimises. A thin shell
// around crest_loadgen; --use-mindie-benchmark runs the real MindIE tool
// instead, --use-aisbench AISBench.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "common/command_line.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "loadgen/aisbench_adapter.h"
#include "loadgen/flags.h"
#include "loadgen/mindie_adapter.h"
#include "loadgen/report.h"
#include "loadgen/runner.h"

namespace {

// Set by SIGINT/SIGTERM; the only way a signal handler can talk to the run.
std::atomic<bool> g_cancel{false};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

void OnSignal(int /*sig*/) { g_cancel = true; }

// 1000 streams need 1000 sockets: lift the soft descriptor limit to the hard one.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("crest-bench: the Crest load generator (MindIE benchmark-compatible flags)",
               "crest-bench");
  crest::loadgen::BenchFlags flags(app);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  absl::StatusOr<crest::loadgen::Invocation> inv = flags.Resolve();
  if (!inv.ok()) {
    std::cerr << "crest-bench: " << inv.status().message() << " (see --help)\n";
    return 2;
  }
  crest::LogOptions log;
  log.level = inv->log_level;
  if (absl::Status s = crest::InitLogging("crest-bench", log); !s.ok()) {
    return crest::FailWithMessage(app, s.ToString());
  }
  RaiseFileLimit();
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  crest::loadgen::ReportContext context;
  context.options = &inv->run;
  absl::StatusOr<crest::loadgen::RunOutput> out;
  if (!inv->mindie_benchmark.empty()) {
    context.engine = "mindie-benchmark";
    crest::loadgen::MindieToolOptions tool;
    tool.binary = inv->mindie_benchmark;
    tool.save_path = inv->save_path;
    tool.model_path = inv->model_path;
    crest::loadgen::SubprocessRunner runner;
    out = crest::loadgen::RunMindieBenchmark(inv->run, tool, runner);
  } else if (!inv->aisbench.empty()) {
    context.engine = "aisbench";
    crest::loadgen::AisBenchOptions tool;
    tool.binary = inv->aisbench;
    tool.models = inv->aisbench_models;
    tool.datasets = inv->aisbench_datasets;
    tool.work_dir = inv->aisbench_work_dir;
    crest::loadgen::SubprocessRunner runner;
    out = crest::loadgen::RunAisBench(inv->run, tool, runner);
  } else {
    // A progress line only for a person watching a terminal.
    const bool tty = isatty(STDERR_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
    crest::loadgen::ProgressCallback progress;
    if (tty) {
      progress = [](const crest::v1::BenchmarkProgress& p) {
        std::fprintf(stderr, "\r%s\033[K", crest::loadgen::FormatProgress(p).c_str());
        std::fflush(stderr);
      };
    }
    out = crest::loadgen::RunBenchmark(inv->run, progress, &g_cancel);
    if (tty) std::fprintf(stderr, "\n");
  }
  if (!out.ok()) return crest::FailWithMessage(app, out.status().ToString());

  std::cout << crest::loadgen::FormatTable(out->result, context) << std::flush;
  if (!inv->json_file.empty()) {
    absl::Status s = crest::WriteFileAtomically(inv->json_file,
                                                crest::loadgen::FormatJson(out->result, context));
    if (!s.ok()) return crest::FailWithMessage(app, s.ToString());
  }
  if (!inv->csv_file.empty()) {
    absl::Status s =
        crest::WriteFileAtomically(inv->csv_file, crest::loadgen::FormatCsv(out->requests));
    if (!s.ok()) return crest::FailWithMessage(app, s.ToString());
  }
  if (out->result.succeeded() == 0) {
    return crest::FailWithMessage(
        app, "no request succeeded (" + std::to_string(out->result.failed()) + " failed)");
  }
  return 0;
}
