// Edits MindIE's config.json the way an operator would with an editor: only
// the values asked for change; formatting, key order and every key Crest does
// not know stay byte-for-byte. The text is parsed (nlohmann::ordered_json) to
// validate it, and the value's byte span is located by a small scanner and
// replaced in place. MindieConfig is the one parse of config.json per daemon
// start: a typed view that ScheduleConfig values are set on together with the
// text, so the edited text is never parsed again. ConfigJsonFile adds the
// backup of the original in the agent's state directory, so every start edits
// the original, and stop or a restart after a crash puts the original back.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace crest::agent {

// One value to set: a path of object keys and the JSON literal to write.
struct JsonEdit {
  std::vector<std::string> path;
  std::string literal;  // e.g. "400", "true", "\"name\""
};

// Returns `text` with every edit applied. A missing last key is appended to
// its parent object, formatted like the parent's last member; a missing
// parent is an error. INVALID_ARGUMENT when `text` is not valid JSON, or when
// one of its objects has a key twice (which of the two counts is up to the
// parser, so the file has no one meaning).
absl::StatusOr<std::string> ApplyJsonEdits(const std::string& text,
                                           const std::vector<JsonEdit>& edits);

// A ScheduleConfig value as typed in config.json. The agent validates,
// applies and reports values in this form; the JSON literal is rendered only
// when the text is edited.
using ConfigValue = std::variant<int64_t, double, bool, std::string>;

// The JSON literal of a value: 400, 2.5, true, "Standard".
std::string ToJsonLiteral(const ConfigValue& value);

// One BackendConfig.ScheduleConfig key and its value.
struct ScheduleValue {
  std::string key;
  ConfigValue value;
};

// Where a config.json format keeps what the agent reads and edits
// (tests/data/real/config, FINDINGS-configs-logs-metrics.md section 1).
enum class ConfigFormat {
  // MindIE 1.0.0 and later ("Version", ServerConfig, BackendConfig).
  kServerBackend,
  // MindIE 1.0.RC1: OtherParam.ServeParam, ModelDeployParam.ModelParam[],
  // npuDeviceIds in ModelDeployParam, ScheduleParam at the top level.
  kOtherParam,
};
struct ConfigPaths {
  const char* name;  // as an error or a log names the format
  std::vector<std::string> server;
  std::vector<std::string> deploy;      // holds maxInputTokenLen and the model list
  std::string models;                   // the model list's key in `deploy`
  std::vector<std::string> device_ids;  // npuDeviceIds
  std::vector<std::string> schedule;
};
const ConfigPaths& PathsOf(ConfigFormat format);
// `path` + `key`, as an edit takes it.
std::vector<std::string> Under(const std::vector<std::string>& path, const std::string& key);

// The parts of config.json the agent reads.
struct MindieConfigView {
  ConfigFormat format = ConfigFormat::kServerBackend;
  std::string ip_address = "127.0.0.1";
  std::string management_ip_address = "127.0.0.2";
  int port = 1025;
  int management_port = 1026;
  int metrics_port = 1027;
  bool https_enabled = true;
  std::string model_name;
  int world_size = 1;  // ModelConfig[0].worldSize: cards per daemon
  int max_input_token_len = 0;
  // ScheduleConfig's numbers, booleans and strings in file order (arrays,
  // objects and null are left out). An integer beyond int64 is a double.
  std::vector<std::pair<std::string, ConfigValue>> schedule;

  // The value of a ScheduleConfig key; nullptr when absent.
  const ConfigValue* FindSchedule(const std::string& key) const;
  std::string BusinessUrl() const;
  std::string ManagementUrl() const;
  // GET /metrics here: metricsPort on the management address, https when
  // httpsEnabled (MindIE serves it with MIES_SERVICE_MONITOR_MODE=1).
  std::string MetricsUrl() const;
};
// INVALID_ARGUMENT naming the key path for a value out of its range, and
// naming both formats for a file that is neither.
absl::StatusOr<MindieConfigView> ParseMindieConfig(const std::string& text);

// config.json for one daemon start: the original text parsed once, then
// ScheduleConfig values set on the text (in place, the literal rendered from
// the typed value) and on the typed view alike, so view() always describes
// text() without parsing it again.
class MindieConfig {
 public:
  // The one parse. INVALID_ARGUMENT when `text` is not a MindIE config.json
  // (or has a key twice in one object).
  static absl::StatusOr<MindieConfig> Parse(std::string text);

  const std::string& original() const { return original_; }  // as parsed
  const std::string& text() const { return text_; }          // with the values set
  const MindieConfigView& view() const { return view_; }     // of text()

  // Sets the schedule's <key> (BackendConfig.ScheduleConfig, or ScheduleParam
  // in the 1.0.RC1 format), appended like its neighbours when absent;
  // NOT_FOUND (nothing changed) without that object.
  absl::Status SetSchedule(const ScheduleValue& value);

 private:
  MindieConfig(std::string text, MindieConfigView view);

  std::string original_;
  std::string text_;
  MindieConfigView view_;
};

// config.json on disk plus its backup in the state directory.
class ConfigJsonFile {
 public:
  ConfigJsonFile(std::string path, std::string state_dir);

  const std::string& path() const { return path_; }
  std::string backup_path() const { return state_dir_ + "/config-json-backup.json"; }

  // The original text: the backup when one exists, else the file.
  absl::StatusOr<std::string> Original() const;
  // The original, parsed (MindieConfig::Parse).
  absl::StatusOr<MindieConfig> Load() const;
  // Backs config.original() up (once), then writes config.text() with the
  // file's mode.
  absl::Status Write(const MindieConfig& config);
  // Writes the backup back and removes it; no backup: nothing to do.
  absl::Status Restore();
  bool HasBackup() const;

 private:
  std::string path_;
  std::string state_dir_;
};

}  // namespace crest::agent
