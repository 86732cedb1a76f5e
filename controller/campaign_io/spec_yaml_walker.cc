#include "controller/campaign_io/spec_yaml_walker.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"

namespace crest::controller {

void SpecYamlWalker::Problem(const std::string& path, const YAML::Node& node,
                             const std::string& message) {
  int line = node.IsDefined() ? node.Mark().line + 1 : 0;
  if (line <= 0) line = LineOf(path);
  out_->problems.push_back({path, line, message});
}

int SpecYamlWalker::LineOf(const std::string& path) const {
  auto it = out_->lines.find(path);
  return it == out_->lines.end() ? 0 : it->second;
}

void SpecYamlWalker::Remember(const std::string& path, const YAML::Node& node) {
  if (node.IsDefined() && node.Mark().line >= 0) out_->lines[path] = node.Mark().line + 1;
}

void SpecYamlWalker::Map(
    const YAML::Node& node, const std::string& path, const std::vector<std::string>& allowed,
    const std::function<void(const std::string&, const YAML::Node&, const std::string&)>& field) {
  Remember(path, node);
  if (!node.IsMap()) {
    Problem(path, node, absl::StrCat("expected a map with keys ", absl::StrJoin(allowed, ", ")));
    return;
  }
  for (const auto& kv : node) {
    std::string key;
    if (!kv.first.IsScalar()) {
      Problem(path, kv.first, "keys must be plain names");
      continue;
    }
    key = kv.first.Scalar();
    std::string child = path.empty() ? key : absl::StrCat(path, ".", key);
    Remember(child, kv.first);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string hint = ClosestMatch(key, allowed);
      Problem(child, kv.first,
              absl::StrCat("unknown key '", key, "'",
                           hint.empty() ? absl::StrCat(" (expected one of ",
                                                       absl::StrJoin(allowed, ", "), ")")
                                        : absl::StrCat("; did you mean '", hint, "'?")));
      continue;
    }
    field(key, kv.second, child);
  }
}

bool SpecYamlWalker::String(const YAML::Node& node, const std::string& path, std::string* out,
                            const std::string& what) {
  if (!node.IsScalar()) {
    Problem(path, node, absl::StrCat("expected ", what));
    return false;
  }
  *out = node.Scalar();
  return true;
}

bool SpecYamlWalker::Int(const YAML::Node& node, const std::string& path, int64_t lo, int64_t hi,
                         int64_t* out, const std::string& what) {
  int64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    Problem(path, node,
            absl::StrCat("expected ", what, ", got '", node.IsScalar() ? node.Scalar() : "?", "'"));
    return false;
  }
  if (v < lo || v > hi) {
    Problem(path, node, absl::StrCat("expected ", what, " in [", lo, ", ", hi, "], got ", v));
    return false;
  }
  *out = v;
  return true;
}

bool SpecYamlWalker::Double(const YAML::Node& node, const std::string& path, double lo, double hi,
                            double* out, const std::string& what) {
  double v = 0;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
    Problem(path, node, absl::StrCat("expected ", what));
    return false;
  }
  if (v < lo || v > hi) {
    Problem(path, node, absl::StrCat("expected ", what, " in [", lo, ", ", hi, "], got ", v));
    return false;
  }
  *out = v;
  return true;
}

bool SpecYamlWalker::Bool(const YAML::Node& node, const std::string& path, bool* out) {
  std::string s = node.IsScalar() ? absl::AsciiStrToLower(node.Scalar()) : "";
  if (s == "true" || s == "yes" || s == "on") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "no" || s == "off") {
    *out = false;
    return true;
  }
  Problem(path, node, "expected true or false");
  return false;
}

bool SpecYamlWalker::Duration(const YAML::Node& node, const std::string& path,
                              google::protobuf::Duration* out) {
  absl::Duration d;
  double seconds = 0;
  if (node.IsScalar() && absl::SimpleAtod(node.Scalar(), &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!node.IsScalar() || !absl::ParseDuration(node.Scalar(), &d)) {
    Problem(path, node, "expected a duration such as 90s, 5m or 1h");
    return false;
  }
  if (d <= absl::ZeroDuration() || d > absl::Hours(48)) {
    Problem(path, node, "expected a duration above 0 and at most 48h");
    return false;
  }
  int64_t ms = absl::ToInt64Milliseconds(d);
  out->set_seconds(ms / 1000);
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
  return true;
}

}  // namespace crest::controller
