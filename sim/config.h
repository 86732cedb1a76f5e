// The subset of MindIE Service's config.json that mindie-sim reads, parsed
// and range-checked the way the real daemon does, plus the real daemon's rule
// for finding the file. Errors name the full key path.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crest::sim {

struct ServerSettings {
  std::string ip_address;
  std::string management_ip_address;
  int port = 0;  // 0: the OS picks (a mindie-sim extension for tests)
  int management_port = 0;
  int metrics_port = 0;
  bool https_enabled = false;
  int max_link_num = 1000;
  // TLS material (MindIE key names tlsCert, tlsPk, tlsCaPath + tlsCaFile),
  // already resolved to absolute paths against the install directory.
  std::string tls_cert;
  std::string tls_key;
  std::vector<std::string> tls_ca_files;
};

struct SimConfig {
  ServerSettings server;
  // BackendConfig.ModelDeployConfig
  int max_seq_len = 2560;
  int max_input_token_len = 2048;  // already min(maxInputTokenLen, maxSeqLen - 1)
  std::string model_name;
  int world_size = 1;
  // BackendConfig.npuDeviceIds[0]: the cards of the (first) model instance,
  // as many as worldSize.
  std::vector<int> npu_device_ids;
  int npu_mem_size_gb = -1;  // -1: automatic
  // BackendConfig.ScheduleConfig
  int cache_block_size = 128;
  int max_prefill_batch_size = 50;
  int max_prefill_tokens = 8192;
  int max_batch_size = 200;
  int max_iter_times = 512;
  bool support_select_batch = false;
  int prefill_time_ms_per_req = 150;
  int decode_time_ms_per_req = 50;
};

// Parses config.json text. Relative TLS paths are resolved against
// `install_dir` (MindIE resolves them against $MIES_INSTALL_PATH).
// INVALID_ARGUMENT names the key path: "BackendConfig.ScheduleConfig.maxBatchSize:
// expected integer, got string".
absl::StatusOr<SimConfig> ParseConfig(const std::string& json_text, const std::string& install_dir);

// Reads and parses `path`; the install dir is the parent of the file's folder
// (<install>/conf/config.json).
absl::StatusOr<SimConfig> LoadConfig(const std::string& path);

// The real daemon's lookup: `flag` if set, else $MIES_CONFIG_JSON_PATH, else
// $MIES_INSTALL_PATH/conf/config.json, else ./conf/config.json. `getenv` is
// a seam for tests.
std::string FindConfigPath(
    const std::string& flag,
    const std::function<std::optional<std::string>(const std::string&)>& getenv);

}  // namespace crest::sim
