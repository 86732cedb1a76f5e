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
#include "common/paths.h"
#include "sim/config.h"
#include "sim/engine.h"
#include "sim/http_server.h"
#include "sim/kv_cache.h"
#include "sim/npu_host.h"
#include "sim/profile.h"
#include "sim/service.h"

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
};

}  // namespace

int RunDaemon(int argc, char** argv) {
  CLI::App app("mindie-sim: a simulated MindIE Service daemon", "mindie-sim");
  Flags flags;
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
  if (auto rc = ParseCommandLine(app, argc, argv)) return *rc;

  std::string config_path = FindConfigPath(flags.config, GetEnv);
  Log("INFO", "server", absl::StrCat("Reading config file ", config_path));
  absl::StatusOr<SimConfig> config = LoadConfig(config_path);
  if (!config.ok()) {
    Log("ERROR", "server", absl::StrCat("invalid config: ", config.status().message()));
    return kExitConfig;
  }
  if (auto ip = GetEnv("MIES_CONTAINER_IP"); ip && !ip->empty()) config->server.ip_address = *ip;
  if (auto ip = GetEnv("MIES_CONTAINER_MANAGEMENT_IP"); ip && !ip->empty()) {
    config->server.management_ip_address = *ip;
  }
  absl::StatusOr<std::string> share = ShareDir();
  std::string profile_dir = share.ok() ? absl::StrCat(*share, "/profiles") : "profiles";
  absl::StatusOr<Profile> profile = FindProfile(profile_dir, flags.profile, config->model_name);
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
  Log("INFO", "llm",
      absl::StrCat("Start to load model ", config->model_name, " (profile ", profile->name, " on ",
                   profile->device, "), worldSize ", config->world_size, ", weights ",
                   absl::StrFormat("%.2f", profile->weights_gib), " GiB"));
  absl::StatusOr<KvCacheLayout> kv = PlanKvCache(*profile, *config);
  if (!kv.ok()) {
    Log("ERROR", "llm", std::string(kv.status().message()));
    return kv.status().code() == absl::StatusCode::kResourceExhausted ? kExitRuntime : kExitConfig;
  }
  // The cards, held until the process exits: a card another instance holds
  // fails the start, as Ascend's runtime does.
  std::string install_dir = GetEnv("MIES_INSTALL_PATH").value_or("");
  if (install_dir.empty()) {
    install_dir = std::filesystem::absolute(config_path).parent_path().parent_path().string();
  }
  absl::StatusOr<NpuHost> npu_host = NpuHostFromEnv(install_dir, GetEnv);
  if (!npu_host.ok()) {
    Log("ERROR", "llm", std::string(npu_host.status().message()));
    return kExitConfig;
  }
  NpuUse use;
  use.chip = std::string(absl::StripPrefix(profile->device, "Ascend "));
  use.hbm_total_mib = static_cast<uint64_t>(profile->device_memory_gib * 1024);
  use.hbm_used_mib = static_cast<uint64_t>((profile->weights_gib / config->world_size +
                                            profile->runtime_overhead_gib + kv->npu_mem_gib) *
                                           1024);
  absl::StatusOr<NpuClaim> npus = NpuClaim::Acquire(*npu_host, config->npu_device_ids, use);
  if (!npus.ok()) {
    Log("ERROR", "llm", absl::StrCat("cannot open the NPUs: ", npus.status().message()));
    return npus.status().code() == absl::StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
  }
  Log("INFO", "llm",
      absl::StrCat("NPUs ", absl::StrJoin(config->npu_device_ids, ","), " of ", npu_host->dir, ": ",
                   use.hbm_used_mib, " / ", use.hbm_total_mib, " MB HBM each"));
  RaiseFileLimit();

  std::unique_ptr<boost::asio::ssl::context> tls;
  if (config->server.https_enabled) {
    auto ctx = MakeServerTlsContext(config->server.tls_cert, config->server.tls_key,
                                    config->server.tls_ca_files);
    if (!ctx.ok()) {
      Log("ERROR", "server", absl::StrCat("invalid config: ", ctx.status().message()));
      return kExitConfig;
    }
    tls = std::move(*ctx);
  }

  boost::asio::io_context io(1);
  SimMetrics metrics(config->model_name,
                     std::set<std::string>(flags.omit_metrics.begin(), flags.omit_metrics.end()));
  EngineOptions engine_options;
  engine_options.scheduler = {config->max_batch_size,
                              config->max_prefill_batch_size,
                              config->max_prefill_tokens,
                              config->cache_block_size,
                              kv->usable_blocks,
                              config->support_select_batch,
                              static_cast<double>(config->prefill_time_ms_per_req),
                              static_cast<double>(config->decode_time_ms_per_req)};
  engine_options.timing = profile->TimingAt(config->world_size);
  engine_options.time_scale = flags.time_scale;
  engine_options.noise_cv = flags.noise_cv.value_or(profile->noise_cv);
  engine_options.seed = flags.seed.value_or(std::random_device{}());
  Service* service_ptr = nullptr;
  int64_t tokens_generated = 0;  // engine thread only
  Engine engine(
      engine_options,
      [&io, &service_ptr, &flags, &tokens_generated](std::vector<TokenEvent> events) {
        tokens_generated += static_cast<int64_t>(events.size());
        if (flags.crash_after_tokens > 0 && tokens_generated >= flags.crash_after_tokens) {
          Log("ERROR", "llm",
              absl::StrCat("fault injection: crashing after ", tokens_generated, " tokens"));
          std::abort();
        }
        if (flags.hang_after_tokens > 0 && tokens_generated > flags.hang_after_tokens) return;
        boost::asio::post(
            io, [&service_ptr, events = std::move(events)] { service_ptr->OnTokens(events); });
      },
      &metrics);
  int exit_code = 0;
  Service service(io, *config, *profile, workload->second, &engine, &metrics,
                  [&io] { boost::asio::post(io, [&io] { io.stop(); }); });
  service_ptr = &service;
  auto monitor = GetEnv("MIES_SERVICE_MONITOR_MODE");
  service.SetMonitorMode(monitor && *monitor == "1");

  const ServerSettings& s = config->server;
  auto business = Listen(io, s.ip_address, s.port, tls.get(), [&service](auto req, auto out) {
    service.HandleBusiness(req, std::move(out));
  });
  auto management = business.ok()
                        ? Listen(io, s.management_ip_address, s.management_port, tls.get(),
                                 [&service](auto req, auto out) {
                                   service.HandleManagement(req, std::move(out));
                                 })
                        : business;
  auto metrics_port =
      management.ok()
          ? Listen(io, s.management_ip_address, s.metrics_port, tls.get(),
                   [&service](auto req, auto out) { service.HandleMetrics(req, std::move(out)); })
          : management;
  if (!metrics_port.ok()) {
    Log("ERROR", "server", std::string(metrics_port.status().message()));
    return kExitRuntime;
  }
  Log("INFO", "server",
      absl::StrCat("mindie-sim: listening business=", s.ip_address, ":", *business, " management=",
                   s.management_ip_address, ":", *management, " metrics=", s.management_ip_address,
                   ":", *metrics_port, " https=", s.https_enabled ? "true" : "false"));

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&io](boost::system::error_code ec, int signo) {
    if (ec) return;
    Log("INFO", "server", absl::StrCat("received signal ", signo, ", stopping"));
    io.stop();
  });

  double startup = flags.startup_seconds.value_or(profile->startup_seconds) / flags.time_scale;
  Log("INFO", "llm",
      absl::StrFormat("Loading weights (%.1f s simulated model loading, time scale %g)",
                      startup * flags.time_scale, flags.time_scale));
  boost::asio::steady_timer loading(io,
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(startup)));
  loading.async_wait([&](boost::system::error_code ec) {
    if (ec) return;
    if (flags.oom_above_batch > 0 && config->max_batch_size > flags.oom_above_batch) {
      Log("ERROR", "llm",
          absl::StrCat("NPU out of memory: warm-up of maxBatchSize ", config->max_batch_size,
                       " (fault injection: above ", flags.oom_above_batch, ")"));
      exit_code = kExitRuntime;
      io.stop();
      return;
    }
    Log("INFO", "llm",
        absl::StrFormat("npuMemSize %.0f GiB, cacheBlockSize %d, %d bytes per block, "
                        "npuBlockNum %d (usable %d, one reserved)",
                        kv->npu_mem_gib, config->cache_block_size, kv->bytes_per_block,
                        kv->computed_blocks, kv->usable_blocks));
    Log("INFO", "llm",
        absl::StrFormat("<<<<<<< ori k_caches[0].shape=torch.Size([%d, %d, %d, %d])",
                        kv->computed_blocks, config->cache_block_size, kv->kv_heads_per_card,
                        profile->head_dim));
    engine.Start();
    service.SetReady();
    std::fputs("Daemon start success!\n", stdout);
    std::fflush(stdout);
  });

  io.run();
  engine.Stop();
  Log("INFO", "server", "stopped");
  return exit_code;
}

}  // namespace crest::sim
