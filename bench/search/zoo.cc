#include "bench/search/zoo.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "common/curve_file.h"

namespace crest::bench {
namespace {

// The zoo's targets for the default strategy on 1 node (docs/search.md).
constexpr double kMedianTarget = 0.99;
constexpr double kWorstTarget = 0.97;
constexpr double kRunsTarget = 12;
constexpr double kBelowPracticeAtMost = 0.005;

std::vector<double> Runs(const std::vector<Play>& plays) {
  std::vector<double> v;
  v.reserve(plays.size());
  for (const Play& p : plays) v.push_back(static_cast<double>(p.runs));
  return v;
}

std::vector<double> Rounds(const std::vector<Play>& plays) {
  std::vector<double> v;
  v.reserve(plays.size());
  for (const Play& p : plays) v.push_back(static_cast<double>(p.rounds));
  return v;
}

// "measured 14, knee-fit 6": how often each basis answered.
std::string Bases(const std::vector<Play>& plays) {
  std::map<std::string, int> count;
  for (const Play& p : plays) ++count[p.basis.empty() ? "-" : p.basis];
  std::vector<std::pair<int, std::string>> order;
  order.reserve(count.size());
  for (const auto& [basis, n] : count) order.emplace_back(-n, basis);
  std::sort(order.begin(), order.end());
  std::vector<std::string> parts;
  parts.reserve(order.size());
  for (const auto& [n, basis] : order) parts.push_back(absl::StrCat(basis, " ", -n));
  return absl::StrJoin(parts, ", ");
}

CurveResult PlayOneCurve(const Case& c, const std::vector<Strategy>& strategies, int first_seed,
                         int seeds) {
  Bench bench(c);
  CurveResult r;
  r.name = CaseName(c);
  std::tie(r.peak_at, r.peak) = bench.Peak();
  r.plays.resize(strategies.size());
  r.shares.resize(strategies.size());
  for (size_t k = 0; k < strategies.size(); ++k) {
    const Strategy& st = strategies[k];
    const auto space = st.adjust(c.space);
    for (size_t n = 0; n < kCurveNodes.size(); ++n) {
      for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
        Play p =
            PlayOut(*st.impl, space, bench, static_cast<uint64_t>(seed), kCurveNodes[n], st.signal);
        r.shares[k][n].push_back(p.found > 0 && r.peak > 0 ? bench.Truth(p.found) / r.peak : 0);
        r.plays[k][n].push_back(std::move(p));
      }
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<Case>> LoadCurveCases(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> in_dir;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      if (e.path().extension() == ".json") in_dir.push_back(e.path().string());
    }
    if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
    if (in_dir.empty()) return absl::NotFoundError(absl::StrCat(path, ": no *.json curve file"));
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  std::vector<Case> cases;
  for (const std::string& file : files) {
    auto curve = crest::ReadCurveFile(file);
    if (!curve.ok()) return curve.status();
    Case c = CurveCase(*curve);
    if (!c.curve->PeakWithin(c.space.lo, c.space.hi)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": no point lies in the searched range [", c.space.lo, ", ", c.space.hi, "]"));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<CurveResult> PlayCurves(const std::vector<Case>& cases,
                                    const std::vector<Strategy>& strategies, int first_seed,
                                    int seeds, int threads) {
  std::vector<CurveResult> results(cases.size());
  // Each index is written by one worker only.
  PlayEach(cases.size(), threads,
           [&](size_t i) { results[i] = PlayOneCurve(cases[i], strategies, first_seed, seeds); });
  return results;
}

ZooTable ZooTableOf(const std::vector<CurveResult>& results,
                    const std::vector<Strategy>& strategies) {
  ZooTable t;
  t.header = {"curve",           "true peak",      "default: found/peak, 1 node", "runs",
              "rounds, 4 nodes", "answer's basis", "found/peak, 4 nodes"};
  size_t practice = strategies.size();
  for (size_t k = 0; k < strategies.size(); ++k) {
    if (strategies[k].key == "practice") practice = k;
    if (k > 0) t.header.push_back(absl::StrCat(strategies[k].label, ", 1 node"));
  }
  t.header.emplace_back("targets");
  std::vector<std::string> missed;
  for (const CurveResult& r : results) {
    const auto& one = r.shares[0][0];
    const double median = Quantile(one, 0.5);
    std::vector<std::string> misses;
    if (median < kMedianTarget) misses.emplace_back("median");
    if (Quantile(one, 0) < kWorstTarget) misses.emplace_back("worst");
    if (Quantile(Runs(r.plays[0][0]), 1) > kRunsTarget) misses.emplace_back("runs");
    if (practice < strategies.size() &&
        median < Quantile(r.shares[practice][0], 0.5) - kBelowPracticeAtMost) {
      misses.emplace_back("below the practice");
    }
    std::vector<std::string> row = {
        r.name,
        absl::StrFormat("%d (%.4g tok/s)", r.peak_at, r.peak),
        MedianWorst(one),
        absl::StrFormat("%.0f / %.0f", Quantile(Runs(r.plays[0][0]), 0.5),
                        Quantile(Runs(r.plays[0][0]), 1)),
        absl::StrFormat("%.0f", Quantile(Rounds(r.plays[0][2]), 1)),
        Bases(r.plays[0][0]),
        MedianWorst(r.shares[0][2])};
    for (size_t k = 1; k < strategies.size(); ++k) row.push_back(MedianWorst(r.shares[k][0]));
    row.push_back(misses.empty() ? "met" : absl::StrCat("NOT MET: ", absl::StrJoin(misses, ", ")));
    if (!misses.empty()) missed.push_back(r.name);
    t.rows.push_back(std::move(row));
  }
  t.all_met = missed.empty();
  t.after.push_back(absl::StrFormat(
      "target for %s on every curve, 1 node: median found/peak >= %.1f%%, worst >= %.1f%%, "
      "runs <= %.0f, median at most %.1f points below the practice's: %s",
      strategies[0].label, 100 * kMedianTarget, 100 * kWorstTarget, kRunsTarget,
      100 * kBelowPracticeAtMost,
      missed.empty() ? "met" : absl::StrCat("NOT MET on ", absl::StrJoin(missed, ", "))));
  return t;
}

std::string CurvesJson(const std::vector<CurveResult>& results,
                       const std::vector<Strategy>& strategies) {
  nlohmann::ordered_json curves = nlohmann::ordered_json::array();
  for (const CurveResult& r : results) {
    nlohmann::ordered_json by_strategy = nlohmann::ordered_json::object();
    for (size_t k = 0; k < strategies.size(); ++k) {
      nlohmann::ordered_json nodes = nlohmann::ordered_json::object();
      for (size_t n = 0; n < kCurveNodes.size(); ++n) {
        nlohmann::ordered_json found = nlohmann::ordered_json::array();
        nlohmann::ordered_json runs = nlohmann::ordered_json::array();
        nlohmann::ordered_json rounds = nlohmann::ordered_json::array();
        nlohmann::ordered_json basis = nlohmann::ordered_json::array();
        for (const Play& p : r.plays[k][n]) {
          found.push_back(p.found);
          runs.push_back(p.runs);
          rounds.push_back(p.rounds);
          basis.push_back(p.basis);
        }
        nodes[std::to_string(kCurveNodes[n])] = {
            {"found", found}, {"runs", runs}, {"rounds", rounds}, {"basis", basis}};
      }
      by_strategy[strategies[k].key] = {{"nodes", nodes}};
    }
    curves.push_back({{"name", r.name},
                      {"peak", {{"maxBatchSize", r.peak_at}, {"GenerateSpeed", r.peak}}},
                      {"strategies", by_strategy}});
  }
  nlohmann::ordered_json out = {{"curves", curves}};
  return out.dump(1) + "\n";
}

}  // namespace crest::bench
