#include "sim/profile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest::sim {
namespace {

using nlohmann::json;

// Reads `key` of `obj` as T, with the key path in the error.
template <typename T>
absl::Status Get(const json& obj, const std::string& path, const std::string& key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::InvalidArgumentError(absl::StrCat(path, key, ": missing"));
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) throw json::type_error::create(302, "expected string", nullptr);
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw json::type_error::create(302, "expected true or false", nullptr);
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer())
        throw json::type_error::create(302, "expected integer", nullptr);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number()) throw json::type_error::create(302, "expected number", nullptr);
    }
    out = it->get<T>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, key, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status Positive(const std::string& path, double value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, ": must be > 0, got ", value));
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Unit(uint64_t& state) {  // in (0, 1)
  return (static_cast<double>(SplitMix(state) >> 11) + 0.5) / 9007199254740992.0;
}

}  // namespace

namespace {

// The fields in coefficient order, once for each struct.
constexpr std::array<double StepCounts::*, kStepCoefficients> kCountFields = {
    &StepCounts::decode_steps,  &StepCounts::decode_seqs,  &StepCounts::decode_context_tokens,
    &StepCounts::prefill_steps, &StepCounts::prefill_seqs, &StepCounts::prefill_tokens,
    &StepCounts::preempted_seqs};
constexpr std::array<double StepTimeModel::*, kStepCoefficients> kCoefficientFields = {
    &StepTimeModel::decode_base_ms,
    &StepTimeModel::decode_per_seq_ms,
    &StepTimeModel::decode_per_context_token_ms,
    &StepTimeModel::prefill_base_ms,
    &StepTimeModel::prefill_per_seq_ms,
    &StepTimeModel::prefill_per_token_ms,
    &StepTimeModel::preempt_overhead_ms};

}  // namespace

StepCounts& StepCounts::operator+=(const StepCounts& o) {
  for (double StepCounts::*f : kCountFields) this->*f += o.*f;
  return *this;
}

StepCounts& StepCounts::operator-=(const StepCounts& o) {
  for (double StepCounts::*f : kCountFields) this->*f -= o.*f;
  return *this;
}

StepCounts& StepCounts::operator*=(double factor) {
  for (double StepCounts::*f : kCountFields) this->*f *= factor;
  return *this;
}

std::array<double, kStepCoefficients> StepCounts::AsArray() const {
  std::array<double, kStepCoefficients> a{};
  for (size_t i = 0; i < kStepCoefficients; ++i) a[i] = this->*kCountFields[i];
  return a;
}

std::array<double, kStepCoefficients> StepTimeModel::AsArray() const {
  std::array<double, kStepCoefficients> a{};
  for (size_t i = 0; i < kStepCoefficients; ++i) a[i] = this->*kCoefficientFields[i];
  return a;
}

StepTimeModel StepTimeModel::FromArray(const std::array<double, kStepCoefficients>& a) {
  StepTimeModel t;
  for (size_t i = 0; i < kStepCoefficients; ++i) t.*kCoefficientFields[i] = a[i];
  return t;
}

StepTimeModel Profile::TimingAt(int world_size) const {
  double f = std::pow(static_cast<double>(reference_world_size) / world_size, tp_scaling_exponent);
  StepTimeModel t = timing;
  t.decode_base_ms *= f;
  t.decode_per_seq_ms *= f;
  t.decode_per_context_token_ms *= f;
  t.prefill_base_ms *= f;
  t.prefill_per_seq_ms *= f;
  t.prefill_per_token_ms *= f;
  t.preempt_overhead_ms *= f;
  return t;
}

absl::StatusOr<Profile> ParseProfile(const std::string& json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("profile: not a JSON object");
  }
  Profile p;
  CREST_RETURN_IF_ERROR(Get(doc, "", "name", p.name));
  auto names = doc.find("model_names");
  if (names == doc.end() || !names->is_array() || names->empty()) {
    return absl::InvalidArgumentError("model_names: expected a non-empty array of strings");
  }
  for (const json& n : *names) {
    if (!n.is_string()) return absl::InvalidArgumentError("model_names: expected strings");
    p.model_names.push_back(n.get<std::string>());
  }
  for (const char* section : {"hardware", "model", "timing", "tokenizer", "workloads"}) {
    if (!doc.contains(section) || !doc[section].is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(section, ": expected object"));
    }
  }
  const json& hw = doc["hardware"];
  CREST_RETURN_IF_ERROR(Get(hw, "hardware.", "device", p.device));
  CREST_RETURN_IF_ERROR(Get(hw, "hardware.", "memory_gib", p.device_memory_gib));
  CREST_RETURN_IF_ERROR(Get(hw, "hardware.", "runtime_overhead_gib", p.runtime_overhead_gib));
  const json& m = doc["model"];
  CREST_RETURN_IF_ERROR(Get(m, "model.", "num_layers", p.num_layers));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "num_kv_heads", p.num_kv_heads));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "head_dim", p.head_dim));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "kv_dtype_bytes", p.kv_dtype_bytes));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "weights_gib", p.weights_gib));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "min_world_size", p.min_world_size));
  CREST_RETURN_IF_ERROR(Get(m, "model.", "max_world_size", p.max_world_size));
  for (auto [key, flag] :
       {std::pair{"kv_cache_int8", &p.kv_cache_int8}, std::pair{"multimodal", &p.multimodal}}) {
    if (m.contains(key)) CREST_RETURN_IF_ERROR(Get(m, "model.", key, *flag));
  }
  if (m.contains("kv_block_scale")) {
    CREST_RETURN_IF_ERROR(Get(m, "model.", "kv_block_scale", p.kv_block_scale));
    CREST_RETURN_IF_ERROR(Positive("model.kv_block_scale", p.kv_block_scale));
  }
  const json& t = doc["timing"];
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "reference_world_size", p.reference_world_size));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "tp_scaling_exponent", p.tp_scaling_exponent));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "decode_base_ms", p.timing.decode_base_ms));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "decode_per_seq_ms", p.timing.decode_per_seq_ms));
  CREST_RETURN_IF_ERROR(
      Get(t, "timing.", "decode_per_context_token_ms", p.timing.decode_per_context_token_ms));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "prefill_base_ms", p.timing.prefill_base_ms));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "prefill_per_seq_ms", p.timing.prefill_per_seq_ms));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "prefill_per_token_ms", p.timing.prefill_per_token_ms));
  CREST_RETURN_IF_ERROR(Get(t, "timing.", "preempt_overhead_ms", p.timing.preempt_overhead_ms));
  CREST_RETURN_IF_ERROR(Get(doc, "", "startup_seconds", p.startup_seconds));
  CREST_RETURN_IF_ERROR(Get(doc, "", "noise_cv", p.noise_cv));
  CREST_RETURN_IF_ERROR(
      Get(doc["tokenizer"], "tokenizer.", "prompt_template_tokens", p.prompt_template_tokens));
  CREST_RETURN_IF_ERROR(Get(doc, "", "default_workload", p.default_workload));
  for (const auto& [name, w] : doc["workloads"].items()) {
    std::string path = absl::StrCat("workloads.", name, ".");
    OutputLengthDistribution d;
    CREST_RETURN_IF_ERROR(Get(w, path, "output_median", d.median));
    CREST_RETURN_IF_ERROR(Get(w, path, "output_sigma", d.sigma));
    CREST_RETURN_IF_ERROR(Get(w, path, "output_min", d.min));
    CREST_RETURN_IF_ERROR(Positive(path + "output_median", d.median));
    p.workloads[name] = d;
  }
  CREST_RETURN_IF_ERROR(Positive("model.num_layers", p.num_layers));
  CREST_RETURN_IF_ERROR(Positive("model.num_kv_heads", p.num_kv_heads));
  CREST_RETURN_IF_ERROR(Positive("model.head_dim", p.head_dim));
  CREST_RETURN_IF_ERROR(Positive("model.kv_dtype_bytes", p.kv_dtype_bytes));
  CREST_RETURN_IF_ERROR(Positive("hardware.memory_gib", p.device_memory_gib));
  CREST_RETURN_IF_ERROR(Positive("timing.reference_world_size", p.reference_world_size));
  if (p.min_world_size < 1 || p.max_world_size < p.min_world_size) {
    return absl::InvalidArgumentError(
        "model.min_world_size/max_world_size: expected 1 <= min <= max");
  }
  if (p.noise_cv < 0) return absl::InvalidArgumentError("noise_cv: must be >= 0");
  if (!p.workloads.contains(p.default_workload)) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_workload: \"", p.default_workload, "\" is not in workloads"));
  }
  return p;
}

absl::StatusOr<Profile> LoadProfileFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return Annotate(text.status(), absl::StrCat("reading profile ", path));
  absl::StatusOr<Profile> p = ParseProfile(*text);
  if (!p.ok()) return Annotate(p.status(), absl::StrCat("profile ", path));
  return p;
}

absl::StatusOr<Profile> FindProfile(const std::string& dir, const std::string& name_or_file,
                                    const std::string& model_name) {
  if (absl::StrContains(name_or_file, "/") || absl::EndsWith(name_or_file, ".json")) {
    return LoadProfileFile(name_or_file);
  }
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  if (ec) {
    return absl::NotFoundError(absl::StrCat("profile directory ", dir, ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> known;
  for (const std::string& f : files) {
    CREST_ASSIGN_OR_RETURN(Profile p, LoadProfileFile(f));
    if (!name_or_file.empty()) {
      if (absl::EqualsIgnoreCase(p.name, name_or_file)) return p;
      known.push_back(p.name);
      continue;
    }
    for (const std::string& n : p.model_names) {
      if (absl::EqualsIgnoreCase(n, model_name)) return p;
    }
    known.push_back(absl::StrCat(p.name, " (", absl::StrJoin(p.model_names, ", "), ")"));
  }
  if (!name_or_file.empty()) {
    return absl::NotFoundError(absl::StrCat("--profile ", name_or_file, ": no such profile in ",
                                            dir, "; known: ", absl::StrJoin(known, ", ")));
  }
  return absl::NotFoundError(absl::StrCat(
      "BackendConfig.ModelDeployConfig.ModelConfig[0].modelName: no profile for \"", model_name,
      "\" in ", dir, " (use --profile); known: ", absl::StrJoin(known, "; ")));
}

int CountPromptTokens(const std::string& text, int template_tokens) {
  int tokens = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c) != 0) {
      ++i;
    } else if (std::isalpha(c) != 0 || c >= 0x80) {
      size_t j = i;
      while (j < n && (std::isalpha(static_cast<unsigned char>(text[j])) != 0 ||
                       static_cast<unsigned char>(text[j]) >= 0x80)) {
        ++j;
      }
      tokens += static_cast<int>((j - i + 6) / 7);
      i = j;
    } else if (std::isdigit(c) != 0) {
      size_t j = i;
      while (j < n && std::isdigit(static_cast<unsigned char>(text[j])) != 0) ++j;
      tokens += static_cast<int>((j - i + 2) / 3);
      i = j;
    } else {
      ++tokens;
      ++i;
    }
  }
  return tokens + template_tokens;
}

int NaturalOutputLength(const OutputLengthDistribution& dist, const std::string& prompt) {
  uint64_t state = Fnv1a(prompt);
  double u1 = Unit(state);
  double u2 = Unit(state);
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  double len = std::round(dist.median * std::exp(dist.sigma * z));
  return std::max(dist.min, static_cast<int>(std::min(len, 1e9)));
}

}  // namespace crest::sim
