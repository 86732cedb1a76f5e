// The agent's local configuration (YAML or JSON, yaml-cpp): which daemon it
// runs and how, and the limits of the parameters the controller may set.
// Nothing here ever comes from the wire.
//
//   daemon:                      # absent: mindie-sim beside crest-agent
//     binary: bin/mindieservice_daemon   # relative to install_dir
//     args: []
//     install_dir: /usr/local/Ascend/mindie/latest/mindie-service
//     config_json: conf/config.json      # relative to install_dir
//     env: {MINDIE_LOG_TO_STDOUT: "1"}
//     start_timeout_s: 600
//     stop_grace_s: 30
//     log_file: /var/lib/crest/daemon.log  # default <state-dir>/daemon.log
//     log_max_bytes: 10485760
//     log_files: 3
//     ca_file: ""                 # CA for an https daemon (empty: no verification)
//   sim: {port: 0, management_port: 0, metrics_port: 0, model: LLaMa3-8B,
//         profile: "", time_scale: 1, seed: 1, args: []}
//   limits: {maxBatchSize: {min: 1, max: 2048}}
//   labels: {npu: 910B3}
//   daemon_metrics_period_s: 1   # sampling of the daemon's /metrics in a run; 0: off
//   slots: 4                     # or auto, or [{npus: [0, 1]}, {npus: [2, 3]}] (slots.h);
//                                # absent: one daemon on the original config.json
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "agent/slots.h"
#include "common/listen_port.h"

namespace crest::agent {

// Range of one ScheduleConfig parameter the agent accepts.
struct ParamLimit {
  std::string key;
  bool is_bool = false;
  int64_t min = 0;
  int64_t max = 0;
};

// The fixed set of overridable ScheduleConfig keys with their built-in ranges.
const std::vector<ParamLimit>& DefaultParamLimits();

struct SimOptions {
  int port = 0;  // 0: the agent picks a free port when it creates config.json
  int management_port = 0;
  int metrics_port = 0;
  std::string model;
  std::string profile;
  double time_scale = 0;  // 0: the simulator's default
  std::optional<uint64_t> seed;
  std::vector<std::string> args;
};

// The benchmark client the agent runs (docs/agent.md): crest-bench's own,
// in process, unless `kind` names an external tool.
struct BenchmarkTool {
  std::string kind;    // "" (crest-bench), "mindie-benchmark" or "aisbench"
  std::string binary;  // the tool, an absolute path or a name on PATH
  // aisbench: its model and dataset configs and work dir.
  std::string models = "vllm_api_stream_chat";
  std::string datasets = "gsm8k_gen_0_shot_cot_str_perf";
  std::string work_dir;  // default: <state-dir>/aisbench
  // mindie-benchmark: its --SavePath and --ModelPath (tokenizer).
  std::string save_path;  // default: <state-dir>/mindie-benchmark
  std::string model_path;
};

struct AgentConfig {
  // "mindie-sim" when the agent runs the simulator, else "mindie".
  std::string backend = "mindie-sim";
  bool use_builtin_sim = true;  // no daemon section
  std::string binary;           // absolute after loading
  std::vector<std::string> args;
  std::string install_dir;  // absolute; the daemon's working directory
  std::string config_json;  // absolute
  std::map<std::string, std::string> env;
  absl::Duration start_timeout = absl::Seconds(600);
  absl::Duration stop_grace = absl::Seconds(30);
  std::string log_file;
  uint64_t log_max_bytes = uint64_t{10} * 1024 * 1024;
  int log_files = 3;
  std::string ca_file;
  SimOptions sim;
  std::vector<ParamLimit> limits;  // DefaultParamLimits() narrowed by `limits:`
  std::map<std::string, std::string> labels;
  // Time between samples of the daemon's /metrics during a benchmark (zero:
  // only the scrapes before and after it).
  absl::Duration daemon_metrics_period = absl::Seconds(1);
  // Daemon slots; absent: one, on the original config.json.
  std::optional<SlotsSpec> slots;
  BenchmarkTool benchmark_tool;

  const ParamLimit* FindLimit(const std::string& key) const;
};

// Parses the YAML text. Relative paths resolve against install_dir;
// `exe_dir` locates the default mindie-sim, `state_dir` the default files.
// Unknown keys are errors (a typo must not silently change behaviour).
absl::StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml, const std::string& state_dir,
                                             const std::string& exe_dir);

// Reads `path` (empty: no file, all defaults) and parses it.
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path, const std::string& state_dir,
                                            const std::string& exe_dir);

// For the built-in simulator: creates config.json from the shipped template
// at `template_path` (if it does not exist yet) with the configured ports
// (free ones picked when 0), model name and plain HTTP. The picked ports come
// back reserved (ReserveListenPort): held for the agent's life, no other
// agent starting on the host can pick them while this one's daemon is down.
absl::StatusOr<std::vector<PortReservation>> PrepareSimConfigJson(const AgentConfig& config,
                                                                  const std::string& template_path);

}  // namespace crest::agent
