#include "sim/config.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/file_util.h"
#include "common/mindie_limits.h"
#include "common/status.h"

namespace crest::sim {
namespace {

using nlohmann::json;

std::string TypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

// Walks a JSON document remembering where it is, so every error names the
// full key path.
class Reader {
 public:
  Reader(const json& node, std::string path) : node_(node), path_(std::move(path)) {}

  absl::StatusOr<Reader> Object(const std::string& key) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_object()) return TypeError(key, "object", *child);
    return Reader(*child, Path(key));
  }

  // The first element of an array of objects (ModelConfig[0]).
  absl::StatusOr<Reader> FirstOfArray(const std::string& key) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_array()) return TypeError(key, "array", *child);
    if (child->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Path(key), ": expected at least one element, got an empty array"));
    }
    const json& first = (*child)[0];
    std::string path = absl::StrCat(Path(key), "[0]");
    if (!first.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected object, got ", TypeName(first)));
    }
    return Reader(first, path);
  }

  absl::StatusOr<int> Int(const std::string& key, int64_t min, int64_t max) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_number_integer()) return TypeError(key, "integer", *child);
    int64_t value = child->get<int64_t>();
    if (value < min || value > max) {
      return absl::InvalidArgumentError(absl::StrCat(
          Path(key), ": ", value, " is out of range, expected [", min, ", ", max, "]"));
    }
    return static_cast<int>(value);
  }

  absl::StatusOr<bool> Bool(const std::string& key) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_boolean()) return TypeError(key, "boolean", *child);
    return child->get<bool>();
  }

  absl::StatusOr<std::string> String(const std::string& key) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_string()) return TypeError(key, "string", *child);
    return child->get<std::string>();
  }

  // Optional keys: absent -> `fallback`; present -> must have the right type.
  absl::StatusOr<std::string> OptionalString(const std::string& key,
                                             const std::string& fallback) const {
    if (!node_.contains(key)) return fallback;
    return String(key);
  }
  absl::StatusOr<int> OptionalInt(const std::string& key, int fallback, int64_t min,
                                  int64_t max) const {
    if (!node_.contains(key)) return fallback;
    return Int(key, min, max);
  }
  absl::StatusOr<std::vector<std::string>> OptionalStringList(const std::string& key) const {
    std::vector<std::string> out;
    if (!node_.contains(key)) return out;
    const json& child = node_.at(key);
    if (!child.is_array()) return TypeError(key, "array of strings", child);
    for (size_t i = 0; i < child.size(); ++i) {
      if (!child[i].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Path(key), "[", i, "]: expected string, got ", TypeName(child[i])));
      }
      out.push_back(child[i].get<std::string>());
    }
    return out;
  }

  // An array of arrays of integers in [min, max] (npuDeviceIds).
  absl::StatusOr<std::vector<std::vector<int>>> IntListList(const std::string& key, int64_t min,
                                                            int64_t max) const {
    CREST_ASSIGN_OR_RETURN(const json* child, Child(key));
    if (!child->is_array()) return TypeError(key, "array of arrays of integers", *child);
    std::vector<std::vector<int>> out;
    for (size_t i = 0; i < child->size(); ++i) {
      const json& inner = (*child)[i];
      const std::string at = absl::StrCat(Path(key), "[", i, "]");
      if (!inner.is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": expected array of integers, got ", TypeName(inner)));
      }
      if (inner.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": expected at least one device id, got an empty array"));
      }
      std::vector<int>& row = out.emplace_back();
      for (size_t j = 0; j < inner.size(); ++j) {
        const json& v = inner[j];
        if (!v.is_number_integer()) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, "[", j, "]: expected integer, got ", TypeName(v)));
        }
        const auto n = v.get<int64_t>();
        if (n < min || n > max) {
          return absl::InvalidArgumentError(absl::StrCat(
              at, "[", j, "]: ", n, " is out of range, expected [", min, ", ", max, "]"));
        }
        row.push_back(static_cast<int>(n));
      }
    }
    return out;
  }

  std::string Path(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

 private:
  absl::StatusOr<const json*> Child(const std::string& key) const {
    auto it = node_.find(key);
    if (it == node_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(Path(key), ": missing"));
    }
    return &*it;
  }

  absl::Status TypeError(const std::string& key, const std::string& expected,
                         const json& got) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Path(key), ": expected ", expected, ", got ", TypeName(got)));
  }

  const json& node_;
  std::string path_;
};

absl::Status RangeError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

std::string Resolve(const std::string& install_dir, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(install_dir) / path).lexically_normal().string();
}

absl::Status ParseServer(const Reader& root, const std::string& install_dir, SimConfig& c) {
  CREST_ASSIGN_OR_RETURN(Reader s, root.Object("ServerConfig"));
  ServerSettings& out = c.server;
  CREST_ASSIGN_OR_RETURN(out.ip_address, s.String("ipAddress"));
  CREST_ASSIGN_OR_RETURN(out.management_ip_address, s.String("managementIpAddress"));
  for (auto [key, field] :
       {std::pair{"port", &out.port}, std::pair{"managementPort", &out.management_port},
        std::pair{"metricsPort", &out.metrics_port}}) {
    CREST_ASSIGN_OR_RETURN(*field, s.Int(key, 0, mindie::kPort.max));
    if (!mindie::IsSimPort(*field)) {
      return RangeError(
          s.Path(key), absl::StrCat(*field, " is out of range, expected ", mindie::SimPortRange()));
    }
  }
  bool same_ip = out.ip_address == out.management_ip_address;
  if (out.port != 0 && same_ip && out.port == out.management_port) {
    return RangeError(s.Path("managementPort"), "must differ from port on the same address");
  }
  if (out.metrics_port != 0 && same_ip &&
      (out.metrics_port == out.port || out.metrics_port == out.management_port)) {
    return RangeError(s.Path("metricsPort"), "must differ from port and managementPort");
  }
  CREST_ASSIGN_OR_RETURN(out.https_enabled, s.Bool("httpsEnabled"));
  CREST_ASSIGN_OR_RETURN(
      out.max_link_num,
      s.OptionalInt("maxLinkNum", 1000, mindie::kMaxLinkNum.min, mindie::kMaxLinkNum.max));
  CREST_ASSIGN_OR_RETURN(std::string cert, s.OptionalString("tlsCert", ""));
  CREST_ASSIGN_OR_RETURN(std::string key, s.OptionalString("tlsPk", ""));
  CREST_ASSIGN_OR_RETURN(std::string ca_path, s.OptionalString("tlsCaPath", ""));
  CREST_ASSIGN_OR_RETURN(std::vector<std::string> ca_files, s.OptionalStringList("tlsCaFile"));
  if (out.https_enabled) {
    if (cert.empty()) return RangeError(s.Path("tlsCert"), "required when httpsEnabled is true");
    if (key.empty()) return RangeError(s.Path("tlsPk"), "required when httpsEnabled is true");
  }
  out.tls_cert = Resolve(install_dir, cert);
  out.tls_key = Resolve(install_dir, key);
  std::string ca_dir = Resolve(install_dir, ca_path);
  for (const std::string& f : ca_files) {
    out.tls_ca_files.push_back(
        f.front() == '/' ? f : Resolve(ca_dir.empty() ? install_dir : ca_dir, f));
  }
  return absl::OkStatus();
}

// npuDeviceIds: one list of card ids per model instance; the simulator runs
// the first. MindIE loads a model on exactly worldSize cards.
absl::Status ParseDeviceIds(const Reader& backend, const Reader& model, SimConfig& c) {
  CREST_ASSIGN_OR_RETURN(
      std::vector<std::vector<int>> ids,
      backend.IntListList("npuDeviceIds", mindie::kNpuDeviceId.min, mindie::kNpuDeviceId.max));
  const std::string path = absl::StrCat(backend.Path("npuDeviceIds"), "[0]");
  if (ids.empty()) {
    return RangeError(backend.Path("npuDeviceIds"),
                      "expected at least one list of device ids, got an empty array");
  }
  c.npu_device_ids = ids[0];
  std::set<int> seen;
  for (int id : c.npu_device_ids) {
    if (!seen.insert(id).second) {
      return RangeError(path, absl::StrCat("device ", id, " is listed twice"));
    }
  }
  if (static_cast<int>(c.npu_device_ids.size()) != c.world_size) {
    return RangeError(
        path, absl::StrCat(c.npu_device_ids.size(), " devices, but ", model.Path("worldSize"),
                           " is ", c.world_size, ": expected one device per card of worldSize"));
  }
  return absl::OkStatus();
}

absl::Status ParseBackend(const Reader& root, SimConfig& c) {
  CREST_ASSIGN_OR_RETURN(Reader backend, root.Object("BackendConfig"));
  CREST_ASSIGN_OR_RETURN(Reader deploy, backend.Object("ModelDeployConfig"));
  CREST_ASSIGN_OR_RETURN(c.max_seq_len,
                         deploy.Int("maxSeqLen", mindie::kMaxSeqLen.min, mindie::kMaxSeqLen.max));
  CREST_ASSIGN_OR_RETURN(
      int max_input,
      deploy.Int("maxInputTokenLen", mindie::kMaxInputTokenLen.min, mindie::kMaxInputTokenLen.max));
  c.max_input_token_len = std::max(1, std::min(max_input, c.max_seq_len - 1));
  CREST_ASSIGN_OR_RETURN(Reader model, deploy.FirstOfArray("ModelConfig"));
  CREST_ASSIGN_OR_RETURN(c.model_name, model.String("modelName"));
  if (c.model_name.empty()) return RangeError(model.Path("modelName"), "must not be empty");
  CREST_ASSIGN_OR_RETURN(c.world_size,
                         model.Int("worldSize", mindie::kWorldSize.min, mindie::kWorldSize.max));
  CREST_RETURN_IF_ERROR(ParseDeviceIds(backend, model, c));
  CREST_ASSIGN_OR_RETURN(c.npu_mem_size_gb, model.Int("npuMemSize", -1, mindie::kNpuMemSizeGb.max));
  if (c.npu_mem_size_gb == 0) {
    return RangeError(model.Path("npuMemSize"), "0 is out of range, expected -1 (auto) or >= 1");
  }

  CREST_ASSIGN_OR_RETURN(Reader sched, backend.Object("ScheduleConfig"));
  CREST_ASSIGN_OR_RETURN(
      c.cache_block_size,
      sched.Int("cacheBlockSize", mindie::kCacheBlockSize.min, mindie::kCacheBlockSize.max));
  if ((c.cache_block_size & (c.cache_block_size - 1)) != 0) {
    return RangeError(sched.Path("cacheBlockSize"),
                      absl::StrCat(c.cache_block_size, " is not a power of two"));
  }
  CREST_ASSIGN_OR_RETURN(c.max_batch_size, sched.Int("maxBatchSize", mindie::kMaxBatchSize.min,
                                                     mindie::kMaxBatchSize.max));
  CREST_ASSIGN_OR_RETURN(
      c.max_prefill_batch_size,
      sched.Int("maxPrefillBatchSize", mindie::kMaxPrefillBatchSize.min,
                std::min<int64_t>(c.max_batch_size, mindie::kMaxPrefillBatchSize.max)));
  CREST_ASSIGN_OR_RETURN(
      c.max_prefill_tokens,
      sched.Int("maxPrefillTokens", mindie::kMaxPrefillTokens.min, mindie::kMaxPrefillTokens.max));
  if (c.max_prefill_tokens < c.max_input_token_len) {
    return RangeError(sched.Path("maxPrefillTokens"),
                      absl::StrCat(c.max_prefill_tokens, " is below maxInputTokenLen (",
                                   c.max_input_token_len, ")"));
  }
  CREST_ASSIGN_OR_RETURN(c.max_iter_times, sched.Int("maxIterTimes", mindie::kMaxIterTimes.min,
                                                     mindie::kMaxIterTimes.max));
  CREST_ASSIGN_OR_RETURN(c.support_select_batch, sched.Bool("supportSelectBatch"));
  CREST_ASSIGN_OR_RETURN(c.prefill_time_ms_per_req,
                         sched.Int("prefillTimeMsPerReq", mindie::kSelectBatchTimeMs.min,
                                   mindie::kSelectBatchTimeMs.max));
  CREST_ASSIGN_OR_RETURN(c.decode_time_ms_per_req,
                         sched.Int("decodeTimeMsPerReq", mindie::kSelectBatchTimeMs.min,
                                   mindie::kSelectBatchTimeMs.max));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimConfig> ParseConfig(const std::string& json_text,
                                      const std::string& install_dir) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()));
  }
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("top level: expected object, got ", TypeName(doc)));
  }
  Reader root(doc, "");
  SimConfig config;
  CREST_RETURN_IF_ERROR(ParseServer(root, install_dir, config));
  CREST_RETURN_IF_ERROR(ParseBackend(root, config));
  return config;
}

absl::StatusOr<SimConfig> LoadConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return Annotate(text.status(), absl::StrCat("reading config ", path));
  std::filesystem::path install =
      std::filesystem::absolute(std::filesystem::path(path)).parent_path().parent_path();
  absl::StatusOr<SimConfig> config = ParseConfig(*text, install.string());
  if (!config.ok()) return Annotate(config.status(), path);
  return config;
}

std::string FindConfigPath(
    const std::string& flag,
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  if (!flag.empty()) return flag;
  if (auto p = getenv("MIES_CONFIG_JSON_PATH"); p && !p->empty()) return *p;
  if (auto p = getenv("MIES_INSTALL_PATH"); p && !p->empty()) {
    return (std::filesystem::path(*p) / "conf" / "config.json").string();
  }
  return "conf/config.json";
}

}  // namespace crest::sim
