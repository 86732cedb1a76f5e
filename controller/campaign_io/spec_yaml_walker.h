// Walks the YAML tree of a campaign spec for the spec parser
// (spec_parser.h): typed accessors (map with known keys, string, bounded
// integer or number, bool, duration, choice) that record each problem with
// its YAML path and line instead of throwing, and remember every path's line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/duration.pb.h"

#include "controller/campaign_io/spec_parser.h"
#include "controller/campaign_io/spec_problem.h"

namespace crest::controller {

class SpecYamlWalker {
 public:
  explicit SpecYamlWalker(ParsedSpec* out) : out_(out) {}

  // Records a problem at `node`'s line, or `path`'s remembered one.
  void Problem(const std::string& path, const YAML::Node& node, const std::string& message);
  // The line remembered for `path`; 0 when none.
  int LineOf(const std::string& path) const;
  // Remembers `node`'s line as `path`'s.
  void Remember(const std::string& path, const YAML::Node& node);

  // Checks that `node` is a map whose keys are all in `allowed`; calls
  // `field(key, value, path)` for each.
  void Map(
      const YAML::Node& node, const std::string& path, const std::vector<std::string>& allowed,
      const std::function<void(const std::string&, const YAML::Node&, const std::string&)>& field);

  bool String(const YAML::Node& node, const std::string& path, std::string* out,
              const std::string& what = "a string");

  bool Int(const YAML::Node& node, const std::string& path, int64_t lo, int64_t hi, int64_t* out,
           const std::string& what = "an integer");

  template <typename T>
  void UInt(const YAML::Node& node, const std::string& path, int64_t lo, int64_t hi,
            const std::function<void(T)>& set, const std::string& what = "an integer") {
    int64_t v = 0;
    if (Int(node, path, lo, hi, &v, what)) set(static_cast<T>(v));
  }

  bool Double(const YAML::Node& node, const std::string& path, double lo, double hi, double* out,
              const std::string& what = "a number");

  bool Bool(const YAML::Node& node, const std::string& path, bool* out);

  // "90s", "5m", "1h30m" or a number of seconds.
  bool Duration(const YAML::Node& node, const std::string& path, google::protobuf::Duration* out);

  template <typename Enum>
  bool Choice(const YAML::Node& node, const std::string& path,
              const std::vector<std::pair<std::string, Enum>>& choices, Enum* out) {
    std::vector<std::string> names;
    names.reserve(choices.size());
    for (const auto& c : choices) names.push_back(c.first);
    if (node.IsScalar()) {
      std::string s = absl::AsciiStrToLower(node.Scalar());
      for (const auto& c : choices) {
        if (c.first == s) {
          *out = c.second;
          return true;
        }
      }
      std::string hint = ClosestMatch(s, names);
      Problem(path, node,
              absl::StrCat("unknown value '", node.Scalar(), "' (expected one of ",
                           absl::StrJoin(names, ", "), ")",
                           hint.empty() ? "" : absl::StrCat("; did you mean '", hint, "'?")));
      return false;
    }
    Problem(path, node, absl::StrCat("expected one of ", absl::StrJoin(names, ", ")));
    return false;
  }

 private:
  ParsedSpec* out_;
};

}  // namespace crest::controller
