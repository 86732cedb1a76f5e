#include "sim/daemon.h"

#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

#include "common/command_line.h"
#include "common/curve_file.h"
#include "common/paths.h"
#include "sim/config.h"
#include "sim/curve_replay.h"
#include "sim/engine.h"
#include "sim/http_server.h"
#include "sim/kv_cache.h"
#include "sim/npu_host.h"
#include "sim/profile.h"
#include "sim/service.h"
#include "sim/startup_lines.h"

namespace crest::sim {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitConfig = 2;

// MindIE-like log lines on stdout: "[time] [pid] [component] [LEVEL] message".
void Log(const char* level, const char* component, const std::string& message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
  std::string line = absl::StrFormat("[%s.%03d] [%d] [%s] [%s] %s\n", stamp, static_cast<int>(ms),
                                     static_cast<int>(getpid()), component, level, message);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

// A start-up line: through the logger, or bare as the daemon's own prints.
void Print(const SimLogLine& line) {
  if (line.logged) {
    Log(line.level.c_str(), line.component.c_str(), line.text);
    return;
  }
  std::FILE* out = line.to_stderr ? stderr : stdout;
  std::fputs((line.text + "\n").c_str(), out);
  std::fflush(out);
}

std::optional<std::string> GetEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// 1000 streaming clients need more descriptors than the usual soft limit.
void RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

struct Flags {
  std::string config;
  std::string profile;
  std::string workload;
  double time_scale = 1.0;
  std::optional<uint64_t> seed;
  std::optional<double> startup_seconds;
  std::optional<double> noise_cv;
  std::vector<std::string> omit_metrics;
  // Fault injection (tests/faults); 0: off.
  int64_t crash_after_tokens = 0;
  int64_t hang_after_tokens = 0;
  int64_t oom_above_batch = 0;
  // The MindIE build whose start-up lines to print (startup_lines.h).
  std::string log_style = "2.x";
  bool no_executor_line = false;
  // A curve file to serve instead of the profile's knee (curve_replay.h).
  std::string curve;
};

void AddFlags(CLI::App& app, Flags& flags) {
  app.add_option("--config", flags.config,
                 "config.json (default: $MIES_CONFIG_JSON_PATH, "
                 "$MIES_INSTALL_PATH/conf/config.json, ./conf/config.json)");
  app.add_option("--profile", flags.profile,
                 "profile name or JSON file (default: chosen by modelName)");
  app.add_option("--workload", flags.workload,
                 "output-length distribution of the profile to use (default: the profile's)");
  app.add_option("--time-scale", flags.time_scale, "K: simulate a K-times faster NPU")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "noise seed (default: random)");
  app.add_option("--startup-seconds", flags.startup_seconds,
                 "simulated model-loading time before scaling (default: the profile's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--noise-cv", flags.noise_cv, "run-to-run noise CV (default: the profile's)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--omit-metrics", flags.omit_metrics,
                 "metric names left out of /metrics, standing in for a MindIE build that does "
                 "not publish them")
      ->delimiter(',');
  app.add_option("--fault-crash-after-tokens", flags.crash_after_tokens,
                 "fault injection: abort (SIGABRT) once N tokens were generated")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fault-hang-after-tokens", flags.hang_after_tokens,
                 "fault injection: deliver no token after the first N (requests never finish)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fault-oom-above-batch", flags.oom_above_batch,
                 "fault injection: NPU out of memory at warm-up when maxBatchSize exceeds N")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-style", flags.log_style,
                 "the MindIE build whose start-up lines to print: 2.x (current: one-block "
                 "warm-up cache, the executor's KV cache overview, the serving cache at the "
                 "first request) or 1.0 (a 24-block warm-up cache, end warm_up)")
      ->check([](const std::string& v) {
        absl::StatusOr<LogStyle> style = ParseLogStyle(v);
        return style.ok() ? std::string() : std::string(style.status().message());
      });
  app.add_option("--curve", flags.curve,
                 "serve this curve file (search-bench's format, docs/search.md): step times "
                 "scaled so the benchmark measures its GenerateSpeed at maxBatchSize, its "
                 "preemption counter and npuBlockNum; outside its points no start");
  app.add_flag("--no-executor-line", flags.no_executor_line,
               "2.x: leave out the executor's KV cache overview (as a log level above INFO "
               "for the C++ executor does)");
}

// What start-up read and planned before anything listens. Each phase that
// fills it returns the exit code when the process must end (why is logged),
// as ParseCommandLine does.
struct Startup {
  std::string config_path;
  SimConfig config;
  Profile profile;
  OutputLengthDistribution workload;
  KvCacheLayout kv;
  // --curve: the file and its replay at this maxBatchSize.
  std::optional<crest::ThroughputCurve> curve;
  CurveReplay replay;
};

// config.json, with the container's addresses in place of its own.
std::optional<int> ReadConfig(const Flags& flags, Startup& startup) {
  startup.config_path = FindConfigPath(flags.config, GetEnv);
  Log("INFO", "server", absl::StrCat("Reading config file ", startup.config_path));
  absl::StatusOr<SimConfig> config = LoadConfig(startup.config_path);
  if (!config.ok()) {
    Log("ERROR", "server", absl::StrCat("invalid config: ", config.status().message()));
    return kExitConfig;
  }
  if (auto ip = GetEnv("MIES_CONTAINER_IP"); ip && !ip->empty()) config->server.ip_address = *ip;
  if (auto ip = GetEnv("MIES_CONTAINER_MANAGEMENT_IP"); ip && !ip->empty()) {
    config->server.management_ip_address = *ip;
  }
  startup.config = *std::move(config);
  return std::nullopt;
}

// The profile (named, or chosen by modelName) and its output-length workload.
std::optional<int> ChooseProfile(const Flags& flags, Startup& startup) {
  absl::StatusOr<std::string> share = ShareDir();
  std::string profile_dir = share.ok() ? absl::StrCat(*share, "/profiles") : "profiles";
  absl::StatusOr<Profile> profile =
      FindProfile(profile_dir, flags.profile, startup.config.model_name);
  if (!profile.ok()) {
    Log("ERROR", "server", absl::StrCat("invalid config: ", profile.status().message()));
    return kExitConfig;
  }
  std::string workload_name = flags.workload.empty() ? profile->default_workload : flags.workload;
  auto workload = profile->workloads.find(workload_name);
  if (workload == profile->workloads.end()) {
    Log("ERROR", "server",
        absl::StrCat("--workload ", workload_name, ": not in profile ", profile->name));
    return kExitConfig;
  }
  startup.workload = workload->second;
  startup.profile = *std::move(profile);
  return std::nullopt;
}

// The KV cache the NPU memory leaves; too little of it is an out-of-memory exit.
std::optional<int> PlanKv(Startup& startup) {
  const SimConfig& config = startup.config;
  const Profile& profile = startup.profile;
  Log("INFO", "llm",
      absl::StrCat("Start to load model ", config.model_name, " (profile ", profile.name, " on ",
                   profile.device, "), worldSize ", config.world_size, ", weights ",
                   absl::StrFormat("%.2f", profile.weights_gib), " GiB"));
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(profile, config);
  if (!kv.ok()) {
    Log("ERROR", "llm", std::string(kv.status().message()));
    return kv.status().code() == absl::StatusCode::kResourceExhausted ? kExitRuntime : kExitConfig;
  }
  startup.kv = *kv;
  return std::nullopt;
}

// --curve: the file, and the time per token and counter that replay it at
// this maxBatchSize; the logged block count becomes the file's.
std::optional<int> PlanCurve(const Flags& flags, Startup& startup) {
  if (flags.curve.empty()) return std::nullopt;
  absl::StatusOr<crest::ThroughputCurve> curve = crest::ReadCurveFile(flags.curve);
  if (!curve.ok()) {
    Log("ERROR", "server", absl::StrCat("--curve: ", curve.status().message()));
    return kExitConfig;
  }
  startup.replay = PlanCurveReplay(*curve, startup.config);
  if (curve->npu_block_num) {
    startup.kv.computed_blocks = *curve->npu_block_num;
    startup.kv.usable_blocks = *curve->npu_block_num - 1;
  }
  Log("INFO", "server",
      absl::StrFormat("mindie-sim: serving curve %s (%s): %.6g s per generated token", curve->name,
                      flags.curve, startup.replay.seconds_per_token));
  startup.curve = *std::move(curve);
  return std::nullopt;
}

// The cards, held until the process exits: a card another instance holds
// fails the start, as Ascend's runtime does.
std::optional<int> ClaimNpus(const Startup& startup, std::optional<NpuClaim>& claim) {
  const SimConfig& config = startup.config;
  const Profile& profile = startup.profile;
  std::string install_dir = GetEnv("MIES_INSTALL_PATH").value_or("");
  if (install_dir.empty()) {
    install_dir =
        std::filesystem::absolute(startup.config_path).parent_path().parent_path().string();
  }
  absl::StatusOr<NpuHost> npu_host = NpuHostFromEnv(install_dir, GetEnv);
  if (!npu_host.ok()) {
    Log("ERROR", "llm", std::string(npu_host.status().message()));
    return kExitConfig;
  }
  NpuUse use;
  use.chip = std::string(absl::StripPrefix(profile.device, "Ascend "));
  use.hbm_total_mib = static_cast<uint64_t>(profile.device_memory_gib * 1024);
  use.hbm_used_mib = static_cast<uint64_t>((profile.weights_gib / config.world_size +
                                            profile.runtime_overhead_gib + startup.kv.npu_mem_gib) *
                                           1024);
  absl::StatusOr<NpuClaim> npus = NpuClaim::Acquire(*npu_host, config.npu_device_ids, use);
  if (!npus.ok()) {
    Log("ERROR", "llm", absl::StrCat("cannot open the NPUs: ", npus.status().message()));
    return npus.status().code() == absl::StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
  }
  claim = *std::move(npus);
  Log("INFO", "llm",
      absl::StrCat("NPUs ", absl::StrJoin(config.npu_device_ids, ","), " of ", npu_host->dir, ": ",
                   use.hbm_used_mib, " / ", use.hbm_total_mib, " MB HBM each"));
  return std::nullopt;
}

// The listeners' TLS context when config.json enables https; null otherwise.
std::optional<int> LoadTls(const ServerSettings& server,
                           std::unique_ptr<boost::asio::ssl::context>& tls) {
  if (!server.https_enabled) return std::nullopt;
  auto ctx = MakeServerTlsContext(server.tls_cert, server.tls_key, server.tls_ca_files);
  if (!ctx.ok()) {
    Log("ERROR", "server", absl::StrCat("invalid config: ", ctx.status().message()));
    return kExitConfig;
  }
  tls = std::move(*ctx);
  return std::nullopt;
}

EngineOptions EngineOptionsFor(const Flags& flags, const Startup& startup) {
  const SimConfig& config = startup.config;
  EngineOptions options;
  options.scheduler = {config.max_batch_size,
                       config.max_prefill_batch_size,
                       config.max_prefill_tokens,
                       config.cache_block_size,
                       startup.kv.usable_blocks,
                       config.support_select_batch,
                       static_cast<double>(config.prefill_time_ms_per_req),
                       static_cast<double>(config.decode_time_ms_per_req)};
  options.timing = startup.profile.TimingAt(config.world_size);
  options.time_scale = flags.time_scale;
  if (startup.curve) {
    options.scheduler.num_blocks = startup.replay.scheduler_blocks;
    options.seconds_per_token = startup.replay.seconds_per_token;
    options.preemptions_per_token = startup.replay.preemptions_per_token;
  }
  options.noise_cv =
      flags.noise_cv.value_or(startup.curve ? startup.curve->noise_cv : startup.profile.noise_cv);
  options.seed = flags.seed.value_or(std::random_device{}());
  return options;
}

// --omit-metrics, and the preemption counter a curve has none of.
std::set<std::string> OmittedMetrics(const Flags& flags, const Startup& startup) {
  std::set<std::string> omit(flags.omit_metrics.begin(), flags.omit_metrics.end());
  if (startup.curve && !startup.replay.preemptions_per_token) omit.insert("num_preemptions_total");
  return omit;
}

// The serving daemon, built in the order it starts: engine, HTTP service,
// listeners, signals, then the simulated model loading on the io thread.
class Daemon {
 public:
  Daemon(const Flags& flags, const Startup& startup, boost::asio::ssl::context* tls)
      : flags_(flags),
        startup_(startup),
        tls_(tls),
        metrics_(startup.config.model_name, OmittedMetrics(flags, startup)),
        engine_(EngineOptionsFor(flags, startup), TokenSink(), &metrics_),
        service_(io_, startup.config, startup.profile, startup.workload, &engine_, &metrics_,
                 [this] { boost::asio::post(io_, [this] { io_.stop(); }); }) {
    auto monitor = GetEnv("MIES_SERVICE_MONITOR_MODE");
    service_.SetMonitorMode(monitor && *monitor == "1");
  }

  // Serves until a signal, /stopService or a failed warm-up; the exit code.
  int Run() {
    if (auto rc = OpenListeners()) return *rc;
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.async_wait([this](boost::system::error_code ec, int signo) {
      if (ec) return;
      Log("INFO", "server", absl::StrCat("received signal ", signo, ", stopping"));
      io_.stop();
    });
    LoadModel();
    io_.run();
    engine_.Stop();
    Log("INFO", "server", "stopped");
    return exit_code_;
  }

 private:
  // Tokens go to the service on the io thread, unless a fault injection
  // crashes the process or withholds them (the engine thread runs it).
  Engine::Sink TokenSink() {
    return [this, tokens_generated = int64_t{0}](std::vector<TokenEvent> events) mutable {
      tokens_generated += static_cast<int64_t>(events.size());
      if (flags_.crash_after_tokens > 0 && tokens_generated >= flags_.crash_after_tokens) {
        Log("ERROR", "llm",
            absl::StrCat("fault injection: crashing after ", tokens_generated, " tokens"));
        std::abort();
      }
      if (flags_.hang_after_tokens > 0 && tokens_generated > flags_.hang_after_tokens) return;
      boost::asio::post(io_, [this, events = std::move(events)] { service_.OnTokens(events); });
    };
  }

  // The business, management and metrics ports.
  std::optional<int> OpenListeners() {
    const ServerSettings& s = startup_.config.server;
    auto business = Listen(io_, s.ip_address, s.port, tls_, [this](auto req, auto out) {
      OnBusinessRequest();
      service_.HandleBusiness(req, std::move(out));
    });
    auto management =
        business.ok()
            ? Listen(io_, s.management_ip_address, s.management_port, tls_,
                     [this](auto req, auto out) { service_.HandleManagement(req, std::move(out)); })
            : business;
    auto metrics_port =
        management.ok()
            ? Listen(io_, s.management_ip_address, s.metrics_port, tls_,
                     [this](auto req, auto out) { service_.HandleMetrics(req, std::move(out)); })
            : management;
    if (!metrics_port.ok()) {
      Log("ERROR", "server", std::string(metrics_port.status().message()));
      return kExitRuntime;
    }
    Log("INFO", "server",
        absl::StrCat("mindie-sim: listening business=", s.ip_address, ":", *business,
                     " management=", s.management_ip_address, ":", *management,
                     " metrics=", s.management_ip_address, ":", *metrics_port,
                     " https=", s.https_enabled ? "true" : "false"));
    return std::nullopt;
  }

  // The profile's model-loading time (scaled), then WarmUp.
  void LoadModel() {
    double startup =
        flags_.startup_seconds.value_or(startup_.profile.startup_seconds) / flags_.time_scale;
    Log("INFO", "llm",
        absl::StrFormat("Loading weights (%.1f s simulated model loading, time scale %g)",
                        startup * flags_.time_scale, flags_.time_scale));
    loading_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(startup)));
    loading_.async_wait([this](boost::system::error_code ec) {
      if (!ec) WarmUp();
    });
  }

  // The KV-cache lines the agent reads, then ready: "Daemon start success!".
  void WarmUp() {
    const SimConfig& config = startup_.config;
    const KvCacheLayout& kv = startup_.kv;
    if (flags_.oom_above_batch > 0 && config.max_batch_size > flags_.oom_above_batch) {
      Log("ERROR", "llm",
          absl::StrCat("NPU out of memory: warm-up of maxBatchSize ", config.max_batch_size,
                       " (fault injection: above ", flags_.oom_above_batch, ")"));
      exit_code_ = kExitRuntime;
      io_.stop();
      return;
    }
    if (startup_.replay.infeasible) {
      Log("ERROR", "llm",
          absl::StrCat("NPU out of memory: warm-up of maxBatchSize ", config.max_batch_size,
                       " (--curve: ", *startup_.replay.infeasible, ")"));
      exit_code_ = kExitRuntime;
      io_.stop();
      return;
    }
    Log("INFO", "llm",
        absl::StrFormat("npuMemSize %.0f GiB, cacheBlockSize %d, %d bytes per block, "
                        "npuBlockNum %d (usable %d, one reserved)",
                        kv.npu_mem_gib, config.cache_block_size, kv.bytes_per_block,
                        kv.computed_blocks, kv.usable_blocks));
    // A curve without a block count: the daemon reports none.
    const bool blocks_known = !startup_.curve || startup_.curve->npu_block_num.has_value();
    const StartupLines lines = StartupLinesFor(
        {*ParseLogStyle(flags_.log_style), !flags_.no_executor_line && blocks_known}, config, kv,
        startup_.profile, startup_.config_path, static_cast<int>(getpid()));
    for (const SimLogLine& line : lines.before_success) Print(line);
    engine_.Start();
    service_.SetReady();
    Print(lines.success);
    for (const SimLogLine& line : lines.after_success) Print(line);
    if (blocks_known) first_forward_ = lines.first_forward;
  }

  // The serving cache is logged at the first forward pass, i.e. when the
  // first request after READY arrives, before it is answered.
  void OnBusinessRequest() {
    if (!first_forward_) return;
    Print(*first_forward_);
    first_forward_.reset();
  }

  const Flags& flags_;
  const Startup& startup_;
  boost::asio::ssl::context* const tls_;
  boost::asio::io_context io_{1};
  SimMetrics metrics_;
  Engine engine_;
  Service service_;
  boost::asio::signal_set signals_{io_};  // armed once the ports listen
  boost::asio::steady_timer loading_{io_};
  int exit_code_ = 0;
  // Until the first request after READY: the line it prints (io thread only).
  std::optional<SimLogLine> first_forward_;
};

}  // namespace

int RunDaemon(int argc, char** argv) {
  CLI::App app("mindie-sim: a simulated MindIE Service daemon", "mindie-sim");
  Flags flags;
  AddFlags(app, flags);
  if (auto rc = ParseCommandLine(app, argc, argv)) return *rc;
  Startup startup;
  if (auto rc = ReadConfig(flags, startup)) return *rc;
  if (auto rc = ChooseProfile(flags, startup)) return *rc;
  if (auto rc = PlanKv(startup)) return *rc;
  if (auto rc = PlanCurve(flags, startup)) return *rc;
  std::optional<NpuClaim> npus;
  if (auto rc = ClaimNpus(startup, npus)) return *rc;
  RaiseFileLimit();
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (auto rc = LoadTls(startup.config.server, tls)) return *rc;
  Daemon daemon(flags, startup, tls.get());
  return daemon.Run();
}

}  // namespace crest::sim
