#include "agent/agent_config.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

#include "agent/config_json_editor.h"
#include "common/file_util.h"
#include "common/listen_port.h"
#include "common/mindie_limits.h"
#include "common/status.h"

namespace crest::agent {
namespace {

std::string Resolve(const std::string& base, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::path(base) / path).lexically_normal().string();
}

absl::Status CheckKeys(const YAML::Node& node, const std::string& where,
                       const std::set<std::string>& allowed) {
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map"));
  for (const auto& kv : node) {
    auto key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      std::string list;
      for (const std::string& a : allowed) absl::StrAppend(&list, list.empty() ? "" : ", ", a);
      return absl::InvalidArgumentError(absl::StrCat(where.empty() ? "" : where + ".", key,
                                                     ": unknown key (expected one of ", list, ")"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Get(const YAML::Node& parent, const char* key, const std::string& where, T* out) {
  YAML::Node n = parent[key];
  if (!n) return absl::OkStatus();
  try {
    *out = n.as<T>();
  } catch (const YAML::Exception&) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": cannot read \"",
                                                   YAML::Dump(n), "\" as the expected type"));
  }
  return absl::OkStatus();
}

// The binary and config.json relative to the install dir (by default the
// binary's), the log relative to the state dir.
absl::Status ResolveDaemonPaths(const std::string& state_dir, const std::string& exe_dir,
                                AgentConfig* config) {
  if (config->binary.empty()) {
    return absl::InvalidArgumentError("daemon.binary: required when a daemon section is given");
  }
  if (config->install_dir.empty()) {
    config->install_dir =
        std::filesystem::path(Resolve(exe_dir, config->binary)).parent_path().string();
  }
  if (config->install_dir[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("daemon.install_dir: \"", config->install_dir, "\" must be absolute"));
  }
  config->binary = Resolve(config->install_dir, config->binary);
  if (config->config_json.empty()) {
    if (const char* env = std::getenv("MIES_CONFIG_JSON_PATH"); env != nullptr && *env) {
      config->config_json = env;
    } else {
      config->config_json = "conf/config.json";
    }
  }
  config->config_json = Resolve(config->install_dir, config->config_json);
  config->log_file = Resolve(state_dir, config->log_file);
  return absl::OkStatus();
}

// A "daemon" section: the real daemon (or another binary) instead of the
// built-in mindie-sim; relative paths resolved, durations and log sizes checked.
absl::Status ParseDaemonSection(const YAML::Node& d, const std::string& state_dir,
                                const std::string& exe_dir, AgentConfig* config) {
  CREST_RETURN_IF_ERROR(
      CheckKeys(d, "daemon",
                {"binary", "args", "install_dir", "config_json", "env", "start_timeout_s",
                 "stop_grace_s", "log_file", "log_max_bytes", "log_files", "ca_file", "backend"}));
  config->use_builtin_sim = false;
  config->backend = "mindie";
  CREST_RETURN_IF_ERROR(Get(d, "backend", "daemon", &config->backend));
  CREST_RETURN_IF_ERROR(Get(d, "install_dir", "daemon", &config->install_dir));
  CREST_RETURN_IF_ERROR(Get(d, "binary", "daemon", &config->binary));
  CREST_RETURN_IF_ERROR(Get(d, "args", "daemon", &config->args));
  CREST_RETURN_IF_ERROR(Get(d, "config_json", "daemon", &config->config_json));
  CREST_RETURN_IF_ERROR(Get(d, "env", "daemon", &config->env));
  double start_s = absl::ToDoubleSeconds(config->start_timeout);
  double grace_s = absl::ToDoubleSeconds(config->stop_grace);
  CREST_RETURN_IF_ERROR(Get(d, "start_timeout_s", "daemon", &start_s));
  CREST_RETURN_IF_ERROR(Get(d, "stop_grace_s", "daemon", &grace_s));
  CREST_RETURN_IF_ERROR(Get(d, "log_file", "daemon", &config->log_file));
  CREST_RETURN_IF_ERROR(Get(d, "log_max_bytes", "daemon", &config->log_max_bytes));
  CREST_RETURN_IF_ERROR(Get(d, "log_files", "daemon", &config->log_files));
  CREST_RETURN_IF_ERROR(Get(d, "ca_file", "daemon", &config->ca_file));
  CREST_RETURN_IF_ERROR(ResolveDaemonPaths(state_dir, exe_dir, config));
  if (!(start_s > 0) || start_s > 24 * 3600) {
    return absl::InvalidArgumentError("daemon.start_timeout_s: expected (0, 86400] seconds");
  }
  if (grace_s < 0 || grace_s > 3600) {
    return absl::InvalidArgumentError("daemon.stop_grace_s: expected [0, 3600] seconds");
  }
  config->start_timeout = absl::Seconds(start_s);
  config->stop_grace = absl::Seconds(grace_s);
  if (config->log_files < 1 || config->log_files > 100) {
    return absl::InvalidArgumentError("daemon.log_files: expected [1, 100]");
  }
  if (config->log_max_bytes < 4096) {
    return absl::InvalidArgumentError("daemon.log_max_bytes: expected at least 4096");
  }
  return absl::OkStatus();
}

absl::Status ParseSimSection(const YAML::Node& s, SimOptions* sim) {
  CREST_RETURN_IF_ERROR(CheckKeys(s, "sim",
                                  {"port", "management_port", "metrics_port", "model", "profile",
                                   "time_scale", "seed", "args"}));
  CREST_RETURN_IF_ERROR(Get(s, "port", "sim", &sim->port));
  CREST_RETURN_IF_ERROR(Get(s, "management_port", "sim", &sim->management_port));
  CREST_RETURN_IF_ERROR(Get(s, "metrics_port", "sim", &sim->metrics_port));
  CREST_RETURN_IF_ERROR(Get(s, "model", "sim", &sim->model));
  CREST_RETURN_IF_ERROR(Get(s, "profile", "sim", &sim->profile));
  CREST_RETURN_IF_ERROR(Get(s, "time_scale", "sim", &sim->time_scale));
  CREST_RETURN_IF_ERROR(Get(s, "args", "sim", &sim->args));
  if (s["seed"]) {
    uint64_t seed = 0;
    CREST_RETURN_IF_ERROR(Get(s, "seed", "sim", &seed));
    sim->seed = seed;
  }
  // The same ports mindie-sim accepts in its config.json, which the agent writes.
  for (auto [key, p] :
       {std::pair{"port", sim->port}, std::pair{"management_port", sim->management_port},
        std::pair{"metrics_port", sim->metrics_port}}) {
    if (!mindie::IsSimPort(p)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim.", key, ": ", p, " is out of range, expected ", mindie::SimPortRange()));
    }
  }
  if (sim->time_scale < 0) return absl::InvalidArgumentError("sim.time_scale: expected >= 0");
  return absl::OkStatus();
}

// The built-in mindie-sim beside the agent, its install dir in the state dir.
void UseBuiltinSim(const std::string& state_dir, const std::string& exe_dir, AgentConfig* config) {
  config->binary = exe_dir + "/mindie-sim";
  config->install_dir = state_dir + "/sim";
  config->config_json = config->install_dir + "/conf/config.json";
  config->args = {"--config", config->config_json};
  const SimOptions& sim = config->sim;
  if (!sim.profile.empty()) {
    config->args.insert(config->args.end(), {"--profile", sim.profile});
  }
  if (sim.time_scale > 0) {
    config->args.insert(config->args.end(), {"--time-scale", absl::StrCat(sim.time_scale)});
  }
  if (sim.seed) config->args.insert(config->args.end(), {"--seed", absl::StrCat(*sim.seed)});
  config->args.insert(config->args.end(), sim.args.begin(), sim.args.end());
  config->start_timeout = absl::Seconds(120);
  config->stop_grace = absl::Seconds(10);
}

// "limits": narrower ranges than MindIE's for the agent to accept.
absl::Status ParseLimits(const YAML::Node& l, std::vector<ParamLimit>* limits) {
  std::set<std::string> keys;
  for (const ParamLimit& p : *limits) keys.insert(p.key);
  CREST_RETURN_IF_ERROR(CheckKeys(l, "limits", keys));
  for (ParamLimit& p : *limits) {
    YAML::Node n = l[p.key];
    if (!n) continue;
    std::string where = "limits." + p.key;
    if (p.is_bool) return absl::InvalidArgumentError(where + ": a boolean has no range");
    CREST_RETURN_IF_ERROR(CheckKeys(n, where, {"min", "max"}));
    int64_t lo = p.min;
    int64_t hi = p.max;
    CREST_RETURN_IF_ERROR(Get(n, "min", where, &lo));
    CREST_RETURN_IF_ERROR(Get(n, "max", where, &hi));
    if (lo < p.min || hi > p.max || lo > hi) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": [", lo, ", ", hi,
                                                     "] must lie within [", p.min, ", ", p.max,
                                                     "] and min <= max"));
    }
    p.min = lo;
    p.max = hi;
  }
  return absl::OkStatus();
}

absl::Status ParseBenchmarkTool(const YAML::Node& b, const std::string& state_dir,
                                BenchmarkTool* tool) {
  CREST_RETURN_IF_ERROR(
      CheckKeys(b, "benchmark_tool",
                {"kind", "binary", "models", "datasets", "work_dir", "save_path", "model_path"}));
  CREST_RETURN_IF_ERROR(Get(b, "kind", "benchmark_tool", &tool->kind));
  CREST_RETURN_IF_ERROR(Get(b, "binary", "benchmark_tool", &tool->binary));
  CREST_RETURN_IF_ERROR(Get(b, "models", "benchmark_tool", &tool->models));
  CREST_RETURN_IF_ERROR(Get(b, "datasets", "benchmark_tool", &tool->datasets));
  CREST_RETURN_IF_ERROR(Get(b, "work_dir", "benchmark_tool", &tool->work_dir));
  CREST_RETURN_IF_ERROR(Get(b, "save_path", "benchmark_tool", &tool->save_path));
  CREST_RETURN_IF_ERROR(Get(b, "model_path", "benchmark_tool", &tool->model_path));
  if (tool->kind != "crest-bench" && tool->kind != "mindie-benchmark" && tool->kind != "aisbench") {
    return absl::InvalidArgumentError(absl::StrCat("benchmark_tool.kind: \"", tool->kind,
                                                   "\" is not a client; expected crest-bench, "
                                                   "mindie-benchmark or aisbench"));
  }
  if (tool->kind == "crest-bench") {
    tool->kind.clear();
    return absl::OkStatus();
  }
  if (tool->binary.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("benchmark_tool.binary: missing; expected the path of ",
                     tool->kind == "aisbench" ? "ais_bench" : "MindIE's benchmark"));
  }
  if (tool->work_dir.empty()) tool->work_dir = state_dir + "/aisbench";
  if (tool->save_path.empty()) tool->save_path = state_dir + "/mindie-benchmark";
  return absl::OkStatus();
}

absl::Status ParseInner(const YAML::Node& root, const std::string& state_dir,
                        const std::string& exe_dir, AgentConfig* config) {
  CREST_RETURN_IF_ERROR(CheckKeys(
      root, "",
      {"daemon", "sim", "limits", "labels", "daemon_metrics_period_s", "slots", "benchmark_tool"}));
  config->log_file = state_dir + "/daemon.log";
  if (YAML::Node d = root["daemon"]) {
    CREST_RETURN_IF_ERROR(ParseDaemonSection(d, state_dir, exe_dir, config));
  }
  if (YAML::Node s = root["sim"]) CREST_RETURN_IF_ERROR(ParseSimSection(s, &config->sim));
  if (config->use_builtin_sim) UseBuiltinSim(state_dir, exe_dir, config);
  config->limits = DefaultParamLimits();
  if (YAML::Node l = root["limits"]) CREST_RETURN_IF_ERROR(ParseLimits(l, &config->limits));
  CREST_RETURN_IF_ERROR(Get(root, "labels", "", &config->labels));
  double period_s = absl::ToDoubleSeconds(config->daemon_metrics_period);
  CREST_RETURN_IF_ERROR(Get(root, "daemon_metrics_period_s", "", &period_s));
  if (!(period_s >= 0) || period_s > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("daemon_metrics_period_s: ", period_s, " is out of range [0, 3600] seconds"));
  }
  config->daemon_metrics_period = absl::Seconds(period_s);
  if (YAML::Node slots = root["slots"]) {
    CREST_ASSIGN_OR_RETURN(config->slots, ParseSlotsSpec(slots, "slots"));
  }
  if (YAML::Node b = root["benchmark_tool"]) {
    CREST_RETURN_IF_ERROR(ParseBenchmarkTool(b, state_dir, &config->benchmark_tool));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<ParamLimit>& DefaultParamLimits() {
  // MindIE's documented ranges, from their one home (common/mindie_limits.h).
  static const auto* const limits = new std::vector<ParamLimit>{
      {"maxBatchSize", false, mindie::kMaxBatchSize.min, mindie::kMaxBatchSize.max},
      {"maxPrefillBatchSize", false, mindie::kMaxPrefillBatchSize.min,
       mindie::kMaxPrefillBatchSize.max},
      {"maxPrefillTokens", false, mindie::kMaxPrefillTokens.min, mindie::kMaxPrefillTokens.max},
      {"supportSelectBatch", true, 0, 1},
      {"prefillTimeMsPerReq", false, mindie::kSelectBatchTimeMs.min,
       mindie::kSelectBatchTimeMs.max},
      {"decodeTimeMsPerReq", false, mindie::kSelectBatchTimeMs.min, mindie::kSelectBatchTimeMs.max},
  };
  return *limits;
}

const ParamLimit* AgentConfig::FindLimit(const std::string& key) const {
  for (const ParamLimit& p : limits) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

absl::StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml, const std::string& state_dir,
                                             const std::string& exe_dir) {
  AgentConfig config;
  try {
    YAML::Node root = YAML::Load(yaml);
    if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    CREST_RETURN_IF_ERROR(ParseInner(root, state_dir, exe_dir, &config));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("agent config: ", e.what()));
  }
  return config;
}

absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, const std::string& state_dir,
                                            const std::string& exe_dir) {
  std::string text;
  if (!path.empty()) {
    CREST_ASSIGN_OR_RETURN(text, ReadFileToString(path));
  }
  auto config = ParseAgentConfig(text, state_dir, exe_dir);
  if (!config.ok() && !path.empty()) return Annotate(config.status(), path);
  return config;
}

absl::StatusOr<std::vector<PortReservation>> PrepareSimConfigJson(
    const AgentConfig& config, const std::string& template_path) {
  std::vector<PortReservation> reserved;
  if (::access(config.config_json.c_str(), F_OK) == 0) return reserved;
  auto text = ReadFileToString(template_path);
  if (!text.ok()) {
    return Annotate(text.status(), "reading the simulator's config.json template");
  }
  const SimOptions& sim = config.sim;
  std::vector<JsonEdit> edits;
  auto port = [&](int configured, const char* key) -> absl::Status {
    int p = configured;
    if (p == 0) {
      CREST_ASSIGN_OR_RETURN(p, ReserveListenPortInto(reserved));
    }
    edits.push_back({{"ServerConfig", key}, absl::StrCat(p)});
    return absl::OkStatus();
  };
  CREST_RETURN_IF_ERROR(port(sim.port, "port"));
  CREST_RETURN_IF_ERROR(port(sim.management_port, "managementPort"));
  CREST_RETURN_IF_ERROR(port(sim.metrics_port, "metricsPort"));
  edits.push_back({{"ServerConfig", "httpsEnabled"}, "false"});
  if (!sim.model.empty()) {
    edits.push_back({{"BackendConfig", "ModelDeployConfig", "ModelConfig", "[0]", "modelName"},
                     nlohmann::json(sim.model).dump()});
  }
  CREST_ASSIGN_OR_RETURN(std::string edited, ApplyJsonEdits(*text, edits));
  CREST_RETURN_IF_ERROR(MakeDirectories(config.install_dir + "/conf"));
  CREST_RETURN_IF_ERROR(WriteFileAtomically(config.config_json, edited, 0640));
  return reserved;
}

}  // namespace crest::agent
