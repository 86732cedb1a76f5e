#include "agent/config_json_editor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

#include "common/file_util.h"
#include "common/mindie_limits.h"
#include "common/status.h"

namespace crest::agent {
namespace {

// Where a path's value lies in the text, or where it would be inserted.
struct Location {
  bool found = false;
  size_t begin = 0;  // value span when found
  size_t end = 0;
  bool parent_found = false;
  size_t parent_close = 0;  // index of the parent object's '}'
  bool parent_empty = true;
  size_t last_member_end = 0;    // just after the parent's last value
  std::string member_separator;  // whitespace before the parent's last key
  std::string key_value_separator = ": ";
};

// A scanner over text already validated as JSON; it only skips and matches.
class Scanner {
 public:
  explicit Scanner(const std::string& text) : t_(text) {}

  void SkipWs() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) {
      ++i_;
    }
  }
  // At '"': returns the raw contents and moves past the closing quote.
  std::string String() {
    size_t start = ++i_;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\') ++i_;
      ++i_;
    }
    std::string raw = t_.substr(start, i_ - start);
    ++i_;
    return raw;
  }
  void Value() {
    SkipWs();
    if (i_ >= t_.size()) return;
    char c = t_[i_];
    if (c == '"') {
      String();
    } else if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i_;
      SkipWs();
      if (i_ < t_.size() && t_[i_] == close) {
        ++i_;
        return;
      }
      while (i_ < t_.size()) {
        if (c == '{') {
          SkipWs();
          String();
          SkipWs();
          ++i_;  // ':'
        }
        Value();
        SkipWs();
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          continue;
        }
        ++i_;  // close
        return;
      }
    } else {
      static constexpr absl::string_view kEnd = ",}] \t\r\n";
      while (i_ < t_.size() && kEnd.find(t_[i_]) == absl::string_view::npos) {
        ++i_;
      }
    }
  }

  // From a value start, follows `path` from `depth`.
  void Find(const std::vector<std::string>& path, size_t depth, Location* loc) {
    SkipWs();
    if (depth == path.size()) {
      loc->found = true;
      loc->begin = i_;
      Value();
      loc->end = i_;
      return;
    }
    if (i_ < t_.size() && t_[i_] == '[' && absl::StartsWith(path[depth], "[")) {
      // "[N]": the N-th element of an array.
      size_t index = 0;
      if (!absl::SimpleAtoi(absl::string_view(path[depth]).substr(1, path[depth].size() - 2),
                            &index)) {
        return;
      }
      ++i_;
      for (size_t k = 0;; ++k) {
        SkipWs();
        if (i_ >= t_.size() || t_[i_] == ']') return;
        if (k == index) {
          Find(path, depth + 1, loc);
          return;
        }
        Value();
        SkipWs();
        if (i_ < t_.size() && t_[i_] == ',') ++i_;
      }
    }
    if (i_ >= t_.size() || t_[i_] != '{') return;
    ++i_;
    bool is_parent = depth + 1 == path.size();
    bool empty = true;
    while (true) {
      size_t before_ws = i_;
      SkipWs();
      if (i_ >= t_.size()) return;
      if (t_[i_] == '}') {
        if (is_parent) {
          loc->parent_found = true;
          loc->parent_close = i_;
          loc->parent_empty = empty;
        }
        return;
      }
      std::string member_ws = t_.substr(before_ws, i_ - before_ws);
      std::string key = String();
      size_t after_key = i_;
      SkipWs();
      ++i_;  // ':'
      SkipWs();
      if (is_parent) {
        loc->member_separator = member_ws;
        loc->key_value_separator = t_.substr(after_key, i_ - after_key);
      }
      empty = false;
      if (key == path[depth]) {
        Find(path, depth + 1, loc);
        return;
      }
      Value();
      if (is_parent) loc->last_member_end = i_;
      SkipWs();
      if (i_ < t_.size() && t_[i_] == ',') ++i_;
    }
  }

 private:
  const std::string& t_;
  size_t i_ = 0;
};

absl::StatusOr<std::string> ApplyOne(const std::string& text, const JsonEdit& edit) {
  if (edit.path.empty()) return absl::InvalidArgumentError("empty JSON path");
  Location loc;
  Scanner(text).Find(edit.path, 0, &loc);
  std::string dotted = absl::StrJoin(edit.path, ".");
  if (loc.found) {
    return absl::StrCat(text.substr(0, loc.begin), edit.literal, text.substr(loc.end));
  }
  if (!loc.parent_found) {
    return absl::NotFoundError(absl::StrCat("config.json has no object for ", dotted));
  }
  std::string member =
      absl::StrCat("\"", edit.path.back(), "\"", loc.key_value_separator, edit.literal);
  if (loc.parent_empty) {
    return absl::StrCat(text.substr(0, loc.parent_close), member, text.substr(loc.parent_close));
  }
  return absl::StrCat(text.substr(0, loc.last_member_end), ",", loc.member_separator, member,
                      text.substr(loc.last_member_end));
}

// The typed form of a ScheduleConfig value; nullopt for arrays, objects, null.
std::optional<ConfigValue> ToConfigValue(const nlohmann::ordered_json& v) {
  if (v.is_boolean()) return ConfigValue(v.get<bool>());
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return ConfigValue(v.get<double>());
  }
  if (v.is_number_integer()) return ConfigValue(v.get<int64_t>());
  if (v.is_number_float()) return ConfigValue(v.get<double>());
  if (v.is_string()) return ConfigValue(v.get<std::string>());
  return std::nullopt;
}

// Finds the first key that appears twice in one object. JSON parsers keep one
// of the two (nlohmann the last) while the in-place scanner would edit the
// first: with a duplicate the file has no one meaning, so it is refused.
class DuplicateKeyFinder final : public nlohmann::json_sax<nlohmann::ordered_json> {
 public:
  // "/BackendConfig/ScheduleConfig" and the key; empty when there is none.
  const std::string& duplicate() const { return duplicate_; }
  const std::string& where() const { return where_; }

  bool null() override { return Value(); }
  bool boolean(bool /*val*/) override { return Value(); }
  bool number_integer(number_integer_t /*val*/) override { return Value(); }
  bool number_unsigned(number_unsigned_t /*val*/) override { return Value(); }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return Value(); }
  bool string(string_t& /*val*/) override { return Value(); }
  bool binary(binary_t& /*val*/) override { return Value(); }
  bool start_object(std::size_t /*elements*/) override {
    Value();
    frames_.push_back({true, {}, ""});
    return true;
  }
  bool key(string_t& val) override {
    Frame& f = frames_.back();
    if (!f.keys.insert(val).second) {
      duplicate_ = val;
      where_ = Path();
      return false;  // stops the parse
    }
    f.current = val;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    Value();
    frames_.push_back({false, {}, "", -1});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    return false;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string current;
    int64_t index = -1;
  };
  // A value starts: in an array it is the next element.
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      absl::StrAppend(&path, "/", f.object ? f.current : absl::StrCat(f.index));
    }
    return path.empty() ? "/" : path;
  }

  std::vector<Frame> frames_;
  std::string duplicate_;
  std::string where_;
};

absl::Status CheckNoDuplicateKeys(const std::string& text) {
  DuplicateKeyFinder finder;
  nlohmann::ordered_json::sax_parse(text, &finder);
  if (finder.duplicate().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: key \"", finder.duplicate(), "\" appears twice in the object at ",
                   finder.where(), "; keep one of them (a parser keeps only one)"));
}

absl::Status Validate(const std::string& text) {
  try {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    if (!j.is_object())
      return absl::InvalidArgumentError("config.json: top level is not an object");
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config.json is not valid JSON: ", e.what()));
  }
  return CheckNoDuplicateKeys(text);
}

// A whole-number field of `object` in [lo, hi], or `fallback` when absent.
// nlohmann would convert 1e28 or 80.5 to int with undefined behaviour or a
// silent truncation (config_json_fuzzer), so anything else is an error.
absl::StatusOr<int> WholeNumberField(const nlohmann::ordered_json& object, absl::string_view where,
                                     const char* key, int fallback, int lo, int hi) {
  if (!object.is_object() || !object.contains(key)) return fallback;
  const nlohmann::ordered_json& v = object.at(key);
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      (!v.is_number_unsigned() && (v.get<int64_t>() < lo || v.get<int64_t>() > hi))) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", where, ".", key, " is ",
                                                   v.dump(), "; expected a whole number in [", lo,
                                                   ", ", hi, "]"));
  }
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

absl::StatusOr<std::string> ApplyJsonEdits(const std::string& text,
                                           const std::vector<JsonEdit>& edits) {
  CREST_RETURN_IF_ERROR(Validate(text));
  std::string out = text;
  for (const JsonEdit& edit : edits) {
    CREST_ASSIGN_OR_RETURN(out, ApplyOne(out, edit));
  }
  // The result must still parse: a bad literal never reaches the disk.
  absl::Status check = Validate(out);
  if (!check.ok())
    return absl::InternalError(absl::StrCat("edit broke config.json: ", check.message()));
  return out;
}

std::string ToJsonLiteral(const ConfigValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&value)) return nlohmann::json(*d).dump();
  return nlohmann::json(std::get<std::string>(value)).dump();
}

const ConfigValue* MindieConfigView::FindSchedule(const std::string& key) const {
  for (const auto& [k, v] : schedule) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string MindieConfigView::BusinessUrl() const {
  return absl::StrCat(https_enabled ? "https://" : "http://", ip_address, ":", port);
}

std::string MindieConfigView::ManagementUrl() const {
  return absl::StrCat(https_enabled ? "https://" : "http://", management_ip_address, ":",
                      management_port);
}

std::string MindieConfigView::MetricsUrl() const {
  return absl::StrCat(https_enabled ? "https://" : "http://", management_ip_address, ":",
                      metrics_port, "/metrics");
}

const ConfigPaths& PathsOf(ConfigFormat format) {
  static const auto* server_backend =
      new ConfigPaths{"MindIE 1.0.0 and later (ServerConfig, BackendConfig)",
                      {"ServerConfig"},
                      {"BackendConfig", "ModelDeployConfig"},
                      "ModelConfig",
                      {"BackendConfig", "npuDeviceIds"},
                      {"BackendConfig", "ScheduleConfig"}};
  static const auto* other_param =
      new ConfigPaths{"MindIE 1.0.RC1 (OtherParam, ModelDeployParam, ScheduleParam)",
                      {"OtherParam", "ServeParam"},
                      {"ModelDeployParam"},
                      "ModelParam",
                      {"ModelDeployParam", "npuDeviceIds"},
                      {"ScheduleParam"}};
  return format == ConfigFormat::kOtherParam ? *other_param : *server_backend;
}

std::vector<std::string> Under(const std::vector<std::string>& path, const std::string& key) {
  std::vector<std::string> out = path;
  out.push_back(key);
  return out;
}

namespace {

// The object at `path` of `j`; nullptr when a step is missing or no object.
const nlohmann::ordered_json* ObjectAt(const nlohmann::ordered_json& j,
                                       const std::vector<std::string>& path) {
  const nlohmann::ordered_json* at = &j;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at->is_object() ? at : nullptr;
}

absl::StatusOr<ConfigFormat> FormatOf(const nlohmann::ordered_json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  if (j.contains("mindie_server_prefill_config") || j.contains("mindie_server_decode_config")) {
    return absl::InvalidArgumentError(
        "config.json: this is a MindIE-Motor user_config.json (a prefill/decode deployment: "
        "mindie_server_prefill_config, mindie_server_decode_config), not one daemon's "
        "config.json; point the agent at the config.json MindIE-Motor writes for the daemon to "
        "tune");
  }
  if (j.contains("ServerConfig") || j.contains("BackendConfig")) {
    return ConfigFormat::kServerBackend;
  }
  if (j.contains("OtherParam") || j.contains("ScheduleParam")) return ConfigFormat::kOtherParam;
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  return absl::InvalidArgumentError(absl::StrCat(
      "config.json: not a MindIE config.json: expected ServerConfig and BackendConfig at the "
      "top level (",
      PathsOf(ConfigFormat::kServerBackend).name,
      ") or OtherParam, "
      "ModelDeployParam and ScheduleParam (",
      PathsOf(ConfigFormat::kOtherParam).name,
      "); its top-level keys are: ", keys.empty() ? "none" : absl::StrJoin(keys, ", ")));
}

// The object at `path`, or an error naming it and the format.
absl::StatusOr<const nlohmann::ordered_json*> Required(const nlohmann::ordered_json& j,
                                                       const std::vector<std::string>& path,
                                                       const ConfigPaths& paths) {
  const nlohmann::ordered_json* at = ObjectAt(j, path);
  if (at == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: ", absl::StrJoin(path, "."),
                     " is missing or not an object (format: ", paths.name, ")"));
  }
  return at;
}

absl::Status ReadServer(const nlohmann::ordered_json& server, const std::string& where,
                        MindieConfigView& view) {
  view.ip_address = server.value("ipAddress", view.ip_address);
  view.management_ip_address = server.value("managementIpAddress", view.management_ip_address);
  CREST_ASSIGN_OR_RETURN(view.port, WholeNumberField(server, where, "port", view.port, 1, 65535));
  CREST_ASSIGN_OR_RETURN(view.management_port, WholeNumberField(server, where, "managementPort",
                                                                view.management_port, 1, 65535));
  CREST_ASSIGN_OR_RETURN(view.metrics_port, WholeNumberField(server, where, "metricsPort",
                                                             view.metrics_port, 1, 65535));
  view.https_enabled = server.value("httpsEnabled", view.https_enabled);
  return absl::OkStatus();
}

absl::Status ReadDeploy(const nlohmann::ordered_json& deploy, const std::string& where,
                        const std::string& models, MindieConfigView& view) {
  CREST_ASSIGN_OR_RETURN(
      view.max_input_token_len,
      WholeNumberField(deploy, where, "maxInputTokenLen", 0, 0, std::numeric_limits<int>::max()));
  if (deploy.contains(models) && deploy[models].is_array() && !deploy[models].empty()) {
    view.model_name = deploy[models][0].value("modelName", "");
    CREST_ASSIGN_OR_RETURN(
        view.world_size,
        WholeNumberField(deploy[models][0], absl::StrCat(where, ".", models, "[0]"), "worldSize", 1,
                         1, mindie::kWorldSize.max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MindieConfigView> ParseMindieConfig(const std::string& text) {
  MindieConfigView view;
  CREST_RETURN_IF_ERROR(CheckNoDuplicateKeys(text));
  try {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    CREST_ASSIGN_OR_RETURN(view.format, FormatOf(j));
    const ConfigPaths& paths = PathsOf(view.format);
    CREST_ASSIGN_OR_RETURN(const nlohmann::ordered_json* server, Required(j, paths.server, paths));
    CREST_RETURN_IF_ERROR(ReadServer(*server, absl::StrJoin(paths.server, "."), view));
    if (view.format == ConfigFormat::kServerBackend) {
      CREST_RETURN_IF_ERROR(Required(j, {"BackendConfig"}, paths).status());
    }
    if (const nlohmann::ordered_json* deploy = ObjectAt(j, paths.deploy)) {
      CREST_RETURN_IF_ERROR(
          ReadDeploy(*deploy, absl::StrJoin(paths.deploy, "."), paths.models, view));
    }
    if (const nlohmann::ordered_json* schedule = ObjectAt(j, paths.schedule)) {
      for (const auto& [k, v] : schedule->items()) {
        if (std::optional<ConfigValue> value = ToConfigValue(v)) {
          view.schedule.emplace_back(k, *std::move(value));
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", e.what()));
  }
  return view;
}

absl::StatusOr<MindieConfig> MindieConfig::Parse(std::string text) {
  CREST_ASSIGN_OR_RETURN(MindieConfigView view, ParseMindieConfig(text));
  return MindieConfig(std::move(text), std::move(view));
}

MindieConfig::MindieConfig(std::string text, MindieConfigView view)
    : original_(text), text_(std::move(text)), view_(std::move(view)) {}

absl::Status MindieConfig::SetSchedule(const ScheduleValue& value) {
  // text_ parsed as JSON and stays valid: a literal rendered from a typed
  // value is valid JSON, so the text needs no parse after the edit.
  CREST_ASSIGN_OR_RETURN(text_, ApplyOne(text_, {Under(PathsOf(view_.format).schedule, value.key),
                                                 ToJsonLiteral(value.value)}));
  for (auto& [key, current] : view_.schedule) {
    if (key == value.key) {
      current = value.value;
      return absl::OkStatus();
    }
  }
  view_.schedule.emplace_back(value.key, value.value);
  return absl::OkStatus();
}

ConfigJsonFile::ConfigJsonFile(std::string path, std::string state_dir)
    : path_(std::move(path)), state_dir_(std::move(state_dir)) {}

bool ConfigJsonFile::HasBackup() const { return ::access(backup_path().c_str(), F_OK) == 0; }

absl::StatusOr<std::string> ConfigJsonFile::Original() const {
  if (!HasBackup()) return ReadFileToString(path_);
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(backup_path()));
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("path").get<std::string>() != path_) {
      return absl::FailedPreconditionError(
          absl::StrCat(backup_path(), " is the backup of ", j.at("path").get<std::string>(),
                       ", not of ", path_, " (restore or remove it by hand)"));
    }
    return j.at("original").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(backup_path(), ": ", e.what()));
  }
}

absl::StatusOr<MindieConfig> ConfigJsonFile::Load() const {
  absl::StatusOr<std::string> original = Original();
  if (!original.ok()) return Annotate(original.status(), "reading config.json");
  return MindieConfig::Parse(*std::move(original));
}

absl::Status ConfigJsonFile::Write(const MindieConfig& config) {
  struct stat st {};
  int mode = 0640;
  if (::stat(path_.c_str(), &st) == 0) mode = static_cast<int>(st.st_mode & 07777);
  if (!HasBackup()) {
    nlohmann::json backup = {{"path", path_}, {"original", config.original()}, {"mode", mode}};
    CREST_RETURN_IF_ERROR(MakeDirectories(state_dir_));
    CREST_RETURN_IF_ERROR(WriteFileAtomically(backup_path(), backup.dump() + "\n", 0600));
  }
  return WriteFileAtomically(path_, config.text(), mode);
}

absl::Status ConfigJsonFile::Restore() {
  if (!HasBackup()) return absl::OkStatus();
  CREST_ASSIGN_OR_RETURN(std::string original, Original());
  int mode = 0640;
  auto raw = ReadFileToString(backup_path());
  if (raw.ok()) {
    nlohmann::json j = nlohmann::json::parse(*raw, nullptr, false);
    if (j.is_object() && j.contains("mode") && j["mode"].is_number_integer()) mode = j["mode"];
  }
  CREST_RETURN_IF_ERROR(WriteFileAtomically(path_, original, mode));
  std::error_code ec;
  std::filesystem::remove(backup_path(), ec);
  if (ec) return absl::InternalError(absl::StrCat("removing ", backup_path(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace crest::agent
