// Edits MindIE's config.json the way an operator would with an editor: only
// the values asked for change; formatting, key order and every key Crest does
// not know stay byte-for-byte. The text is parsed (nlohmann::ordered_json) to
// validate it, and the value's byte span is located by a small scanner and
// replaced in place. ConfigJsonFile adds the backup of the original in the
// agent's state directory, so every start edits the original, and stop or a
// restart after a crash puts the original back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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
// parent is an error. INVALID_ARGUMENT when `text` is not valid JSON.
absl::StatusOr<std::string> ApplyJsonEdits(const std::string& text,
                                           const std::vector<JsonEdit>& edits);

// The parts of config.json the agent reads.
struct MindieConfigView {
  std::string ip_address = "127.0.0.1";
  std::string management_ip_address = "127.0.0.2";
  int port = 1025;
  int management_port = 1026;
  int metrics_port = 1027;
  bool https_enabled = true;
  std::string model_name;
  int max_input_token_len = 0;
  // ScheduleConfig values, key -> JSON literal as in the file.
  std::vector<std::pair<std::string, std::string>> schedule;

  std::string BusinessUrl() const;
  std::string ManagementUrl() const;
};
absl::StatusOr<MindieConfigView> ParseMindieConfig(const std::string& text);

// config.json on disk plus its backup in the state directory.
class ConfigJsonFile {
 public:
  ConfigJsonFile(std::string path, std::string state_dir);

  const std::string& path() const { return path_; }
  std::string backup_path() const { return state_dir_ + "/config-json-backup.json"; }

  // The original text: the backup when one exists, else the file.
  absl::StatusOr<std::string> Original() const;
  // Backs the original up (once), then writes original + edits. Returns the
  // written text. Nothing is written when an edit fails.
  absl::StatusOr<std::string> Apply(const std::vector<JsonEdit>& edits);
  // Writes the backup back and removes it; no backup: nothing to do.
  absl::Status Restore();
  bool HasBackup() const;

 private:
  std::string path_;
  std::string state_dir_;
};

}  // namespace crest::agent
