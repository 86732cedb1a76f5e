#include "common/curve_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace crest {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(absl::string_view where, absl::string_view field, absl::string_view expected,
                 const Json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", field, " must be ", expected, ", got ", got.dump()));
}

// An integer >= `min` at `key`, or nullopt when the key is absent.
absl::StatusOr<std::optional<int64_t>> OptionalInt(const Json& j, const char* key,
                                                   absl::string_view where, int64_t min) {
  if (!j.contains(key)) return std::optional<int64_t>();
  const Json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min) {
    return Bad(where, key, absl::StrCat("an integer >= ", min), v);
  }
  return std::optional<int64_t>(v.get<int64_t>());
}

absl::StatusOr<std::string> OptionalText(const Json& j, const char* key, absl::string_view where) {
  if (!j.contains(key)) return std::string();
  if (!j.at(key).is_string()) return Bad(where, key, "a string", j.at(key));
  return j.at(key).get<std::string>();
}

absl::StatusOr<CurvePoint> ParsePoint(const Json& p, absl::string_view where) {
  if (!p.is_object()) return Bad(where, "the point", "an object", p);
  CurvePoint point;
  if (!p.contains("maxBatchSize")) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": maxBatchSize is missing"));
  }
  auto b = OptionalInt(p, "maxBatchSize", where, 1);
  if (!b.ok()) return b.status();
  point.max_batch_size = **b;
  if (!p.contains("GenerateSpeed")) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": GenerateSpeed is missing"));
  }
  const Json& speed = p.at("GenerateSpeed");
  if (!speed.is_number() || !std::isfinite(speed.get<double>()) || speed.get<double>() < 0) {
    return Bad(where, "GenerateSpeed", "a number >= 0 (token/s)", speed);
  }
  point.generate_speed = speed.get<double>();
  auto preemptions = OptionalInt(p, "preemptions", where, 0);
  if (!preemptions.ok()) return preemptions.status();
  point.preemptions = *preemptions;
  return point;
}

absl::Status ParseRange(const Json& j, absl::string_view where, ThroughputCurve& c) {
  if (!j.contains("range")) return absl::OkStatus();
  const Json& r = j.at("range");
  if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer() ||
      r[0].get<int64_t>() < 1 || r[1].get<int64_t>() < r[0].get<int64_t>()) {
    return Bad(where, "range", "[lo, hi], integers with 1 <= lo <= hi", r);
  }
  c.range = {r[0].get<int64_t>(), r[1].get<int64_t>()};
  return absl::OkStatus();
}

// The request shape and block size: required when the block count is given,
// which the auto range and the knee guess are computed from.
absl::Status ParseShape(const Json& j, absl::string_view where, ThroughputCurve& c) {
  struct Field {
    const char* key;
    int64_t* to;
    int64_t min;
  };
  for (const Field& f : {Field{"cacheBlockSize", &c.cache_block_size, 1},
                         Field{"avg_input_tokens", &c.avg_input_tokens, 1},
                         Field{"avg_output_tokens", &c.avg_output_tokens, 1},
                         Field{"max_output_len", &c.max_output_len, 1}}) {
    auto v = OptionalInt(j, f.key, where, f.min);
    if (!v.ok()) return v.status();
    if (*v) {
      *f.to = **v;
    } else if (c.npu_block_num && f.to != &c.cache_block_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", f.key, " is missing; with npuBlockNum it sets the auto range"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePoints(const Json& j, absl::string_view where, ThroughputCurve& c) {
  if (!j.contains("points") || !j.at("points").is_array() || j.at("points").empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": points must be a non-empty array of {maxBatchSize, GenerateSpeed, "
                     "preemptions?}"));
  }
  for (size_t i = 0; i < j.at("points").size(); ++i) {
    auto p = ParsePoint(j.at("points")[i], absl::StrCat(where, ": points[", i, "]"));
    if (!p.ok()) return p.status();
    if (!c.points.empty() && p->max_batch_size <= c.points.back().max_batch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": points[", i, "]: maxBatchSize ", p->max_batch_size,
                       " must be above the previous point's ", c.points.back().max_batch_size,
                       " (points in increasing maxBatchSize, each once)"));
    }
    c.points.push_back(*p);
  }
  return absl::OkStatus();
}

// The index of the segment [points[i], points[i + 1]] holding `b`, or of the
// point itself as a segment of one (i == last); nullopt outside.
std::optional<size_t> SegmentOf(const std::vector<CurvePoint>& points, int64_t b) {
  if (points.empty() || b < points.front().max_batch_size || b > points.back().max_batch_size) {
    return std::nullopt;
  }
  auto it = std::upper_bound(points.begin(), points.end(), b,
                             [](int64_t v, const CurvePoint& p) { return v < p.max_batch_size; });
  return static_cast<size_t>(it - points.begin()) - 1;
}

double Between(const CurvePoint& a, const CurvePoint& b, int64_t at, double va, double vb) {
  const auto t = static_cast<double>(at - a.max_batch_size) /
                 static_cast<double>(b.max_batch_size - a.max_batch_size);
  return va + t * (vb - va);
}

}  // namespace

std::optional<double> ThroughputCurve::SpeedAt(int64_t max_batch_size) const {
  auto i = SegmentOf(points, max_batch_size);
  if (!i) return std::nullopt;
  if (*i + 1 == points.size() || points[*i].max_batch_size == max_batch_size) {
    return points[*i].generate_speed;
  }
  const CurvePoint& a = points[*i];
  const CurvePoint& b = points[*i + 1];
  return Between(a, b, max_batch_size, a.generate_speed, b.generate_speed);
}

std::optional<int64_t> ThroughputCurve::PreemptionsAt(int64_t max_batch_size) const {
  auto i = SegmentOf(points, max_batch_size);
  if (!i) return std::nullopt;
  const CurvePoint& a = points[*i];
  if (*i + 1 == points.size() || a.max_batch_size == max_batch_size) return a.preemptions;
  const CurvePoint& b = points[*i + 1];
  if (!a.preemptions || !b.preemptions) return std::nullopt;
  return std::llround(Between(a, b, max_batch_size, static_cast<double>(*a.preemptions),
                              static_cast<double>(*b.preemptions)));
}

std::optional<std::pair<int64_t, double>> ThroughputCurve::PeakWithin(int64_t lo,
                                                                      int64_t hi) const {
  std::optional<std::pair<int64_t, double>> best;
  auto consider = [&](int64_t b) {
    if (b < lo || b > hi) return;
    auto v = SpeedAt(b);
    if (v && (!best || *v > best->second)) best = {b, *v};
  };
  for (const CurvePoint& p : points) consider(p.max_batch_size);
  consider(lo);
  consider(hi);
  return best;
}

absl::StatusOr<ThroughputCurve> ParseCurve(absl::string_view json_text, absl::string_view where) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": not a JSON object (a curve file: {\"name\", \"source\", "
                     "\"points\": [...], ...})"));
  }
  ThroughputCurve c;
  if (!j.contains("name") || !j.at("name").is_string() || j.at("name").get<std::string>().empty()) {
    return Bad(where, "name", "a non-empty string", j.value("name", Json()));
  }
  c.name = j.at("name").get<std::string>();
  for (auto [key, to] : {std::pair{"source", &c.source}, std::pair{"rationale", &c.rationale}}) {
    auto text = OptionalText(j, key, where);
    if (!text.ok()) return text.status();
    *to = *text;
  }
  auto blocks = OptionalInt(j, "npuBlockNum", where, 1);
  if (!blocks.ok()) return blocks.status();
  c.npu_block_num = *blocks;
  if (auto st = ParseShape(j, where, c); !st.ok()) return st;
  if (auto st = ParseRange(j, where, c); !st.ok()) return st;
  if (!c.npu_block_num && !c.range) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": give range [lo, hi] or npuBlockNum (the auto range is computed from it)"));
  }
  auto step = OptionalInt(j, "step", where, 1);
  if (!step.ok()) return step.status();
  if (*step) c.step = **step;
  if (j.contains("noise_cv")) {
    const Json& cv = j.at("noise_cv");
    if (!cv.is_number() || cv.get<double>() < 0 || cv.get<double>() > 0.5) {
      return Bad(where, "noise_cv", "a number from 0 to 0.5 (relative noise of one run)", cv);
    }
    c.noise_cv = cv.get<double>();
  }
  if (auto st = ParsePoints(j, where, c); !st.ok()) return st;
  return c;
}

absl::StatusOr<ThroughputCurve> ReadCurveFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the curve file"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseCurve(text.str(), path);
}

std::string CurveJson(const ThroughputCurve& c) {
  Json j = Json::object();
  j["name"] = c.name;
  j["source"] = c.source;
  if (!c.rationale.empty()) j["rationale"] = c.rationale;
  if (c.npu_block_num) j["npuBlockNum"] = *c.npu_block_num;
  j["cacheBlockSize"] = c.cache_block_size;
  if (c.avg_input_tokens > 0) j["avg_input_tokens"] = c.avg_input_tokens;
  if (c.avg_output_tokens > 0) j["avg_output_tokens"] = c.avg_output_tokens;
  if (c.max_output_len > 0) j["max_output_len"] = c.max_output_len;
  if (c.range) j["range"] = {c.range->first, c.range->second};
  j["step"] = c.step;
  j["noise_cv"] = c.noise_cv;
  // One point per line, as the shipped curves are kept.
  std::string head = j.dump(1);
  head.pop_back();  // the closing brace
  while (!head.empty() && head.back() == '\n') head.pop_back();
  std::string out = absl::StrCat(head, ",\n \"points\": [\n");
  for (size_t i = 0; i < c.points.size(); ++i) {
    const CurvePoint& p = c.points[i];
    Json point = {{"maxBatchSize", p.max_batch_size}, {"GenerateSpeed", p.generate_speed}};
    if (p.preemptions) point["preemptions"] = *p.preemptions;
    absl::StrAppend(&out, "  ", point.dump(), i + 1 < c.points.size() ? ",\n" : "\n");
  }
  return out + " ]\n}\n";
}

}  // namespace crest
