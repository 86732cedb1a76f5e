#include "controller/campaign_io/report_runs.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace crest::controller {
namespace {

using nlohmann::json;

// A number field of trial `i`, or the error that names it.
absl::StatusOr<double> Number(const json& trial, size_t i, const char* key) {
  auto it = trial.find(key);
  if (it == trial.end() || !it->is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("report: trials[", i, "].", key, ": expected a number"));
  }
  return it->get<double>();
}

bool Flag(const json& trial, const char* key) {
  auto it = trial.find(key);
  return it != trial.end() && it->is_boolean() && it->get<bool>();
}

struct Sum {
  sim::MeasuredPoint point;
  double speed = 0, first = 0, decode = 0, preemptions = 0;
  int runs = 0, with_first = 0, with_decode = 0, with_preemptions = 0;
};

}  // namespace

absl::StatusOr<ReportRuns> RunsOfReport(const json& report, const std::string& model) {
  if (!report.is_object() || !report.contains("models") || !report["models"].is_array()) {
    return absl::InvalidArgumentError(
        "report: expected the JSON of `crest campaign report --format json` (an object with "
        "\"models\")");
  }
  const json* chosen = nullptr;
  std::vector<std::string> names;
  for (const json& m : report["models"]) {
    const std::string name = m.value("model", "");
    names.push_back(name);
    if (name == model || (model.empty() && report["models"].size() == 1)) chosen = &m;
  }
  const std::string id = report.value("id", "");
  if (chosen == nullptr) {
    if (model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("campaign ", id, " has ", names.size(),
                                                     " models; name one with --model (",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    return absl::NotFoundError(absl::StrCat("campaign ", id, " has no model \"", model,
                                            "\" (it has: ", absl::StrJoin(names, ", "), ")"));
  }
  ReportRuns out;
  out.campaign = id;
  out.model = chosen->value("model", "");
  const json& trials = chosen->contains("trials") ? (*chosen)["trials"] : json::array();
  if (!trials.is_array()) return absl::InvalidArgumentError("report: trials: expected an array");
  using Key = std::tuple<int, int, int, bool, double, double>;
  std::map<Key, Sum> sums;
  for (size_t i = 0; i < trials.size(); ++i) {
    const json& t = trials[i];
    if (!t.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("report: trials[", i, "]: expected object"));
    }
    if (auto blocks = t.find("npuBlockNum");
        blocks != t.end() && blocks->is_number() && blocks->get<int64_t>() > 0) {
      out.npu_block_num = blocks->get<int64_t>();
    }
    if (t.value("status", "") != "ok" || Flag(t, "calibration") || Flag(t, "rateSearch") ||
        t.contains("flags")) {
      ++out.left_out_runs;
      continue;
    }
    double v[8];
    const char* keys[] = {"maxBatchSize",        "maxPrefillBatchSize", "concurrency",
                          "prefillTimeMsPerReq", "decodeTimeMsPerReq",  "GenerateSpeed",
                          "FirstTokenTime",      "DecodeTime"};
    for (size_t k = 0; k < 8; ++k) {
      absl::StatusOr<double> n = Number(t, i, keys[k]);
      if (!n.ok()) return n.status();
      v[k] = *n;
    }
    const bool select = Flag(t, "supportSelectBatch");
    const Key key{static_cast<int>(v[0]), static_cast<int>(v[1]), static_cast<int>(v[2]), select,
                  select ? v[3] : 0,      select ? v[4] : 0};
    Sum& s = sums[key];
    s.point.max_batch_size = std::get<0>(key);
    s.point.max_prefill_batch_size = std::get<1>(key);
    s.point.concurrency = std::get<2>(key);
    s.point.support_select_batch = select;
    s.point.prefill_time_ms_per_req = std::get<4>(key);
    s.point.decode_time_ms_per_req = std::get<5>(key);
    s.speed += v[5];
    if (v[6] > 0) s.first += v[6], ++s.with_first;
    if (v[7] > 0) s.decode += v[7], ++s.with_decode;
    if (auto p = t.find("preemptions"); p != t.end() && p->is_number()) {
      s.preemptions += p->get<double>();
      ++s.with_preemptions;
    }
    ++s.runs;
    ++out.trusted_runs;
  }
  for (auto& [key, s] : sums) {
    sim::MeasuredPoint p = s.point;
    p.runs = s.runs;
    p.generate_speed = s.speed / p.runs;
    p.first_token_ms = s.with_first > 0 ? s.first / s.with_first : 0;
    p.decode_ms = s.with_decode > 0 ? s.decode / s.with_decode : 0;
    if (s.with_preemptions > 0) p.preemptions = s.preemptions / s.with_preemptions;
    out.points.push_back(p);
  }
  if (out.points.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", id, ", model ", out.model, ": none of its ", trials.size(),
        " runs can be trusted (ok, unflagged, of the search), so there is nothing to fit"));
  }
  return out;
}

}  // namespace crest::controller
