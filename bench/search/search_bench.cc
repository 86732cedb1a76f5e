// search-bench: plays every search strategy against mindie-sim's model in
// virtual time (SimulateWorkload: MindIE's benchmark, GSM8K, Concurrency =
// maxBatchSize - 1) with the profile's run-to-run noise, over seeds, shipped
// profiles, MaxOutputLen values and npuMemSize values. Truth is the
// noise-free curve on a fine grid. Prints, per strategy, the benchmark runs
// used, the rounds with 1, 2 and 4 nodes, and the found point's true
// throughput as a share of the true peak; --slots-projection and
// --node-spread print the campaign wall-clock with slots and the play of
// nodes that differ (after the table with --table, instead of it without);
// --fit-limit, what the answer rule and the cost fit make of given points
// measured over seeds. --markdown writes what it printed, with the per-case
// tables, as the results file the docs point to (bench/search/RESULTS.md).
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "bench/search/play.h"
#include "bench/search/zoo.h"
#include "common/command_line.h"
#include "common/curve_file.h"
#include "common/paths.h"
#include "controller/search/knee_cost_model.h"
#include "controller/search/knee_reading.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/node_slot.h"
#include "controller/search/schedule_plan.h"
#include "controller/search/search.h"
#include "controller/search/trial_outcomes.h"
#include "sim/kv_cache.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace {

using crest::bench::Bench;
using crest::bench::Case;
using crest::bench::CaseName;
using crest::bench::Cluster;
using crest::bench::MedianWorst;
using crest::bench::Play;
using crest::bench::PlayEach;
using crest::bench::PlayOut;
using crest::bench::Quantile;
using crest::bench::Strategies;
using crest::bench::Strategy;
using crest::controller::Outcomes;
using crest::controller::SearchSpace;
using crest::controller::SearchStrategy;

struct Row {
  std::vector<double> runs1, rounds1, rounds2, rounds4, share1, share2, share4;
};

// Median, worst and the share below `target` of found/peak figures (none
// when no seed gave one).
std::string ShareSummary(const std::vector<double>& shares, double target) {
  if (shares.empty()) return "none";
  const auto below =
      std::count_if(shares.begin(), shares.end(), [&](double v) { return v < target; });
  return absl::StrFormat("%.2f%% / %.2f%% / %.1f%%", 100 * Quantile(shares, 0.5),
                         100 * Quantile(shares, 0),
                         100 * static_cast<double>(below) / static_cast<double>(shares.size()));
}

// "129,134,139": maxBatchSize values in the order they are measured.
absl::StatusOr<std::vector<int64_t>> ParsePoints(const std::string& text) {
  std::vector<int64_t> points;
  for (absl::string_view t : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(t, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t, "' in '", text, "' is not a maxBatchSize (an integer >= 1)"));
    }
    points.push_back(v);
  }
  return points;
}

void Append(Row& to, const Row& from) {
  auto append = [](std::vector<double>& a, const std::vector<double>& b) {
    a.insert(a.end(), b.begin(), b.end());
  };
  append(to.runs1, from.runs1);
  append(to.rounds1, from.rounds1);
  append(to.rounds2, from.rounds2);
  append(to.rounds4, from.rounds4);
  append(to.share1, from.share1);
  append(to.share2, from.share2);
  append(to.share4, from.share4);
}

// One case's true peak and each strategy's plays over the seeds.
struct CaseResult {
  int64_t peak_at = 0;
  double peak = 0;
  std::vector<Row> rows;
};

// "median / max" of counts.
std::string MedianMax(const std::vector<double>& v) {
  return absl::StrFormat("%.0f / %.0f", Quantile(v, 0.5), Quantile(v, 1));
}

const std::vector<std::string> kRowHeader = {
    "strategy",        "runs, 1 node",       "rounds, 1 node",      "rounds, 2 nodes",
    "rounds, 4 nodes", "found/peak, 1 node", "found/peak, 2 nodes", "found/peak, 4 nodes"};

// A strategy's row of the table, over whatever plays `r` holds.
std::vector<std::string> RowCells(const std::string& label, const Row& r) {
  return {label,
          MedianMax(r.runs1),
          MedianMax(r.rounds1),
          MedianMax(r.rounds2),
          MedianMax(r.rounds4),
          MedianWorst(r.share1),
          MedianWorst(r.share2),
          MedianWorst(r.share4)};
}

// One table as the bench prints it: a caption line, a pipe table (Markdown's
// syntax already) and lines after it. stdout and --markdown render the same
// Section, so every figure is computed and formatted once.
struct Section {
  std::string heading;  // --markdown's heading; stdout prints none
  std::string caption;  // the line above the table
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows = {};
  std::vector<std::string> after = {};  // lines after the table
  bool printed = true;                  // false: --markdown only
};

std::string PipeTable(const Section& s) {
  std::string out = absl::StrCat("| ", absl::StrJoin(s.header, " | "), " |\n|");
  for (size_t i = 0; i < s.header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : s.rows) absl::StrAppend(&out, "| ", absl::StrJoin(row, " | "), " |\n");
  return out;
}

void Print(const Section& s) {
  std::string out;
  if (!s.caption.empty()) absl::StrAppend(&out, s.caption, "\n");
  out += PipeTable(s);
  for (const auto& line : s.after) absl::StrAppend(&out, line, "\n");
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

std::string Markdown(const Section& s) {
  std::string out = absl::StrCat("## ", s.heading, "\n\n");
  if (!s.caption.empty()) absl::StrAppend(&out, s.caption, "\n\n");
  out += PipeTable(s);
  if (!s.after.empty()) out += "\n";
  for (const auto& line : s.after) absl::StrAppend(&out, "- ", line, "\n");
  return out + "\n";
}

// The head of the --markdown file: that it is generated, by which command,
// when, where and in how long (`seconds` of wall-clock).
std::string MarkdownHead(int argc, char** argv, double seconds) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &utc);
  struct utsname host {};
  const std::string system =
      uname(&host) == 0 ? absl::StrCat(host.sysname, " ", host.machine, ", ") : "";
  const char* commit = std::getenv("CREST_GIT_COMMIT");
  return absl::StrCat(
      "# search-bench results\n\n"
      "Generated by search-bench itself (`--markdown`): do not edit it by hand, run the command "
      "again. From the repository's root, with search-bench built into the directory the "
      "command names:\n\n    ",
      crest::bench::CommandLine(argc, argv), "\n\nGenerated ", date, " on ", system,
      std::thread::hardware_concurrency(), " CPUs (nproc)",
      commit != nullptr && *commit != '\0' ? absl::StrCat(", commit ", commit) : "",
      absl::StrFormat(", in %.0f s of wall-clock", seconds),
      ". The figures are the simulator's, in virtual time: any machine and any `--threads` give "
      "the same.\n\n"
      "Each strategy plays against mindie-sim's performance model (MindIE's benchmark on GSM8K, "
      "Concurrency = maxBatchSize - 1, maxPrefillBatchSize = maxBatchSize / 2) with each "
      "profile's run-to-run noise, one seed per play. Truth is the noise-free curve. "
      "found/peak: the true throughput of the point found over the true peak. runs: benchmark "
      "runs; rounds: rounds of runs measured at once, one run per node (or place: a daemon slot "
      "of a node). The zoo's table replays the curve files of bench/search/curves/ (measured "
      "elsewhere, or built to break the knee model) with each file's noise, the same way. "
      "docs/search.md explains the strategies; the decision records under "
      "docs/decisions/ hold the figures of earlier versions.\n\n");
}

// What the command line asks for.
struct Options {
  int seeds = 20;
  int first_seed = 1;
  std::vector<std::string> profiles;
  std::vector<int> outputs = {256, 512, 1024};
  std::vector<double> mem_filter;
  int threads = 2;
  bool verbose = false;
  bool trace = false;
  size_t trace_nodes = 1;
  bool curves = false;
  bool table = false;
  bool projection = false;
  std::vector<double> node_spreads;
  std::vector<std::string> designs;
  std::string markdown;
  std::vector<std::string> curve_files;
  std::string zoo = CREST_ZOO_DIR_DEFAULT;
  std::string json;
};

void AddOptions(CLI::App& app, Options& o) {
  app.add_option("--seeds", o.seeds, "noise seeds per case");
  app.add_option("--first-seed", o.first_seed,
                 "the first noise seed (seeds first-seed .. first-seed + seeds - 1), to check a "
                 "result on seeds it was not tuned on");
  app.add_option("--profiles", o.profiles, "profile names (default: every shipped profile)");
  app.add_option("--max-output", o.outputs, "MaxOutputLen values");
  app.add_option("--threads", o.threads, "cases simulated at once");
  app.add_flag("--verbose", o.verbose, "one line per case");
  app.add_flag("--trace", o.trace,
               "print every run of each seed (1 node) and the point found; with --node-spread, "
               "the seeds whose search found below 97% of the peak, both plays");
  app.add_option("--trace-nodes", o.trace_nodes,
                 "nodes (places) of the runs --trace prints ('|' starts a round)");
  app.add_flag("--curves", o.curves, "print each case's noise-free curve around its peak");
  app.add_flag("--slots-projection", o.projection,
               "instead of the table: each case's campaign wall-clock at time scale 1 with 1, 4, "
               "8 and 32 places (1 server x 1 slot, 4 x 1, 1 x 8, 4 x 8)");
  app.add_option("--node-spread", o.node_spreads,
                 "instead of the table: nodes that differ, their speeds spread evenly over "
                 "1 -+ S/2 (S = 0.1: 0.95 to 1.05); found/peak with 2 and 4 nodes, points "
                 "compared within a node first (the controller's way) against raw figures; "
                 "several values, one table each")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--fit-limit", o.designs,
                 "instead of the table: for each list of points (comma-separated, a repeated "
                 "point measured again), what the knee search's answer rule and its cost fit "
                 "make of those runs over the seeds, on every case whose range holds them")
      ->check([](const std::string& text) -> std::string {
        auto points = ParsePoints(text);
        return points.ok() ? "" : std::string(points.status().message());
      });
  app.add_flag("--table", o.table,
               "print the strategies' table too, before what --slots-projection, --node-spread "
               "or --fit-limit print (without them it is printed anyway)");
  app.add_option("--markdown", o.markdown,
                 "also write every table printed, and the per-case tables, in Markdown to this "
                 "file (replaced once all is measured), headed by this command line, the date "
                 "and the machine: bench/search/RESULTS.md is this file");
  app.add_option("--npu-mem", o.mem_filter, "only the cases of these npuMemSize values");
  app.add_option("--curve", o.curve_files,
                 "instead of the simulator's cases: replay these curve files (a directory: its "
                 "*.json files; format in docs/search.md) with every strategy, and print the "
                 "zoo's table over them");
  app.add_option("--zoo", o.zoo,
                 "the curve files whose table follows the strategies' table ('none': no zoo "
                 "table)");
  app.add_option("--json", o.json,
                 "write every curve play (--curve, or the zoo) as JSON to this file: "
                 "{\"curves\": [{\"name\", \"peak\", \"strategies\": {...}}]}");
}

// Every shipped profile (or those asked for) x its two npuMemSize values x
// the MaxOutputLen values, each with GSM8K's requests and the controller's
// own auto range.
absl::StatusOr<std::vector<Case>> LoadCases(const std::string& share, const Options& o) {
  std::vector<std::string> profiles = o.profiles;
  if (profiles.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(share + "/profiles", ec)) {
      if (e.path().extension() == ".json") profiles.push_back(e.path().stem().string());
    }
    if (ec) return absl::NotFoundError(share + "/profiles: " + ec.message());
    std::sort(profiles.begin(), profiles.end());
  }
  // Two KV-cache sizes per profile: MindIE's reference 17 GiB and a larger
  // one (smaller for the 70B model, whose 8 cards hold far more blocks).
  const std::map<std::string, std::vector<double>> mems = {
      {"llama3-8b-910b", {17, 24}}, {"llama2-13b-910b", {17, 24}}, {"llama3-70b-910b", {4, 6}}};
  absl::StatusOr<std::vector<std::string>> questions = crest::bench::Gsm8kQuestions(share);
  if (!questions.ok()) return questions.status();
  std::vector<Case> cases;
  for (const auto& name : profiles) {
    auto profile = crest::sim::FindProfile(share + "/profiles", name, "");
    if (!profile.ok()) return profile.status();
    auto mem_it = mems.find(name);
    for (double mem : mem_it != mems.end() ? mem_it->second : std::vector<double>{17, 24}) {
      if (!o.mem_filter.empty() &&
          std::find(o.mem_filter.begin(), o.mem_filter.end(), mem) == o.mem_filter.end()) {
        continue;
      }
      for (int out : o.outputs) {
        absl::StatusOr<Case> c = crest::bench::SimCase(*profile, mem, out, *questions);
        if (!c.ok()) return c.status();
        cases.push_back(*std::move(c));
      }
    }
  }
  return cases;
}

// Every --fit-limit list must fit some case's range, checked before anything
// is measured.
absl::Status CheckDesigns(const Options& o, const std::vector<std::vector<int64_t>>& parsed,
                          const std::vector<Case>& cases) {
  for (size_t i = 0; i < parsed.size(); ++i) {
    const auto [lo, hi] = std::minmax_element(parsed[i].begin(), parsed[i].end());
    std::string ranges;
    bool held = false;
    for (const Case& c : cases) {
      absl::StrAppendFormat(&ranges, "\n  %s mem %.0f out %d: [%d, %d]", c.profile.name, c.npu_mem,
                            c.max_output, c.space.lo, c.space.hi);
      held |= *lo >= c.space.lo && *hi <= c.space.hi;
    }
    if (!held) {
      return absl::InvalidArgumentError(absl::StrCat("--fit-limit '", o.designs[i],
                                                     "': no case's maxBatchSize range holds ", *lo,
                                                     " to ", *hi, "; the cases' ranges:", ranges));
    }
  }
  return absl::OkStatus();
}

// One case: every strategy over the seeds on 1, 2 and 4 nodes, with
// --curves, --trace and --verbose's lines printed under `mu`.
CaseResult PlayCase(const Case& c, const std::vector<Strategy>& strategies, const Options& o,
                    std::mutex& mu) {
  Bench bench(c);
  auto [peak_at, peak] = bench.Peak();
  if (o.curves) {
    std::string text;
    for (int64_t b = std::max(c.space.lo, peak_at * 9 / 10);
         b <= std::min(c.space.hi, peak_at * 11 / 10); ++b) {
      text += std::to_string(b) + ":" + std::to_string(static_cast<int>(bench.Truth(b))) + "/" +
              (bench.At(b).preemptions ? std::to_string(*bench.At(b).preemptions) : "-") + " ";
    }
    std::lock_guard<std::mutex> lock(mu);
    std::printf("%s mem %.0f out %d: %s\n", c.profile.name.c_str(), c.npu_mem, c.max_output,
                text.c_str());
  }
  CaseResult result{peak_at, peak, std::vector<Row>(strategies.size())};
  std::string line;
  for (size_t k = 0; k < strategies.size(); ++k) {
    const Strategy& st = strategies[k];
    const SearchSpace space = st.adjust(c.space);
    Row& row = result.rows[k];
    double worst = 1;
    for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
      const auto u = static_cast<uint64_t>(seed);
      Play p1 = PlayOut(*st.impl, space, bench, u, 1, st.signal);
      Play p2 = PlayOut(*st.impl, space, bench, u, 2, st.signal);
      Play p4 = PlayOut(*st.impl, space, bench, u, 4, st.signal);
      double share1 = p1.found > 0 ? bench.Truth(p1.found) / peak : 0;
      double share2 = p2.found > 0 ? bench.Truth(p2.found) / peak : 0;
      double share4 = p4.found > 0 ? bench.Truth(p4.found) / peak : 0;
      worst = std::min({worst, share1, share2, share4});
      if (o.trace) {
        const Play shown = o.trace_nodes == 4   ? p4
                           : o.trace_nodes == 2 ? p2
                           : o.trace_nodes == 1
                               ? p1
                               : PlayOut(*st.impl, space, bench, u, o.trace_nodes, st.signal);
        std::lock_guard<std::mutex> lock(mu);
        std::printf("%s mem %.0f out %d %s seed %d:%s -> %lld (%.2f%%)\n", c.profile.name.c_str(),
                    c.npu_mem, c.max_output, st.label.c_str(), seed, shown.trace.c_str(),
                    static_cast<long long>(shown.found), 100 * bench.Truth(shown.found) / peak);
      }
      row.runs1.push_back(static_cast<double>(p1.runs));
      row.rounds1.push_back(static_cast<double>(p1.rounds));
      row.rounds2.push_back(static_cast<double>(p2.rounds));
      row.rounds4.push_back(static_cast<double>(p4.rounds));
      row.share1.push_back(share1);
      row.share2.push_back(share2);
      row.share4.push_back(share4);
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s %.1f%%", st.label.substr(0, 4).c_str(), 100 * worst);
    line += buf;
  }
  if (o.verbose) {
    std::lock_guard<std::mutex> lock(mu);
    std::printf(
        "%-16s mem %4.0f out %4d range [%lld, %lld] guess %lld peak %lld (%.0f tok/s) "
        "worst:%s\n",
        c.profile.name.c_str(), c.npu_mem, c.max_output, static_cast<long long>(c.space.lo),
        static_cast<long long>(c.space.hi), static_cast<long long>(c.space.knee_guess),
        static_cast<long long>(peak_at), peak, line.c_str());
    std::fflush(stdout);
  }
  return result;
}

// The table over every case, with the targets for the default strategy
// (the first row) under it.
Section OverallSection(const std::vector<Row>& rows, const std::vector<Strategy>& strategies,
                       size_t cases, const Options& o) {
  Section overall{"The strategies over every case",
                  absl::StrFormat("%zu cases x %d seeds (%d to %d); runs and rounds: median / "
                                  "max; share of the true peak (1, 2, 4 nodes): median / worst",
                                  cases, o.seeds, o.first_seed, o.first_seed + o.seeds - 1),
                  kRowHeader};
  for (size_t k = 0; k < strategies.size(); ++k) {
    overall.rows.push_back(RowCells(strategies[k].label, rows[k]));
  }
  const Row& d = rows[0];
  struct Target {
    std::string what;
    bool met;
    std::string detail;
  };
  // The worst share is one search's luck: how many searches fell below the
  // line says how far from the target a NOT MET is.
  auto below = [](const std::vector<double>& shares, double line) {
    return absl::StrFormat(
        "%d of %d", std::count_if(shares.begin(), shares.end(), [&](double v) { return v < line; }),
        shares.size());
  };
  const std::vector<Target> targets = {
      {"median found/peak >= 99.5% (1, 2, 4 nodes)",
       std::min({Quantile(d.share1, 0.5), Quantile(d.share2, 0.5), Quantile(d.share4, 0.5)}) >=
           0.995,
       ""},
      {"worst found/peak >= 98.5% (1, 2, 4 nodes)",
       std::min({Quantile(d.share1, 0), Quantile(d.share2, 0), Quantile(d.share4, 0)}) >= 0.985,
       absl::StrCat(" (searches below 98.5%: ", below(d.share1, 0.985), ", ",
                    below(d.share2, 0.985), ", ", below(d.share4, 0.985), ")")},
      {"runs on 1 node <= 10, median <= 8",
       Quantile(d.runs1, 1) <= 10 && Quantile(d.runs1, 0.5) <= 8, ""},
      {"rounds with 4 nodes <= 4 (max)", Quantile(d.rounds4, 1) <= 4, ""},
  };
  bool all = true;
  for (const auto& t : targets) {
    overall.after.push_back(absl::StrCat("target for ", strategies[0].label, ": ", t.what, ": ",
                                         t.met ? "met" : "NOT MET", t.detail));
    all &= t.met;
  }
  overall.after.push_back(absl::StrCat("targets: ", all ? "all met" : "NOT all met"));
  return overall;
}

// The strategies' table (cases played `threads` at once), then, for
// --markdown only (stdout has --verbose's lines), each case's range and peak
// and its row per strategy.
std::vector<Section> TableSections(const std::vector<Case>& cases,
                                   const std::vector<Strategy>& strategies, const Options& o) {
  std::vector<CaseResult> results(cases.size());
  std::mutex mu;  // --verbose, --trace and --curves print under it
  PlayEach(cases.size(), o.threads,
           [&](size_t i) { results[i] = PlayCase(cases[i], strategies, o, mu); });
  std::vector<Row> rows(strategies.size());
  for (const CaseResult& r : results) {
    for (size_t k = 0; k < strategies.size(); ++k) Append(rows[k], r.rows[k]);
  }
  Section shape{"The cases",
                "The auto range as the controller derives it, the knee guess the default starts "
                "from, and the noise-free curve's peak",
                {"case", "range", "knee guess", "true peak", "true peak, tok/s"}};
  Section per_case{"Per case and strategy",
                   absl::StrFormat("%d seeds (%d to %d) per case; columns as above", o.seeds,
                                   o.first_seed, o.first_seed + o.seeds - 1),
                   kRowHeader};
  per_case.header.insert(per_case.header.begin(), "case");
  shape.printed = per_case.printed = false;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    shape.rows.push_back({CaseName(c), absl::StrCat("[", c.space.lo, ", ", c.space.hi, "]"),
                          absl::StrCat(c.space.knee_guess), absl::StrCat(results[i].peak_at),
                          absl::StrFormat("%.0f", results[i].peak)});
    for (size_t k = 0; k < strategies.size(); ++k) {
      auto cells = RowCells(strategies[k].label, results[i].rows[k]);
      cells.insert(cells.begin(), CaseName(c));
      per_case.rows.push_back(std::move(cells));
    }
  }
  return {OverallSection(rows, strategies, cases.size(), o), std::move(shape), std::move(per_case)};
}

// --slots-projection: each case's campaign wall-clock with 1, 4, 8 and 32
// places, then per strategy and place count over the cases.
std::vector<Section> ProjectionSections(const std::vector<Case>& cases,
                                        const std::vector<Strategy>& strategies, const Options& o) {
  Section each{"Slots: campaign wall-clock per case",
               "Projected at time scale 1: the npuBlockNum probe's daemon start, then per round "
               "one start and the round's longest benchmark; vs: median hours against 1 place "
               "(for 8) or 4 places (for 32)",
               {"case", "strategy", "places", "rounds med/max", "hours med/max",
                "vs 1 place (or 4)", "found/peak med / worst"}};
  // Per strategy and place count, over every case: the ratio of the
  // median hours to the base's, and every seed's found/peak.
  std::map<std::pair<std::string, size_t>, std::vector<double>> ratios, all_shares;
  for (const Case& c : cases) {
    Bench bench(c);
    const double peak = bench.Peak().second;
    for (const auto& st : strategies) {
      if (!st.signal) continue;
      const SearchSpace space = st.adjust(c.space);
      std::map<size_t, double> hours_median;
      for (size_t places : {1, 4, 8, 32}) {
        std::vector<double> rounds, hours, shares;
        for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
          // 8 places are one server's slots; 32, four servers' (one host each).
          const size_t hosts = places == 8 ? 1 : places == 32 ? 4 : places;
          Play p = PlayOut(*st.impl, space, bench, static_cast<uint64_t>(seed),
                           Cluster{places, hosts, {}, true}, true);
          rounds.push_back(static_cast<double>(p.rounds));
          hours.push_back(p.seconds / 3600);
          shares.push_back(p.found > 0 ? bench.Truth(p.found) / peak : 0);
        }
        hours_median[places] = Quantile(hours, 0.5);
        const size_t base = places == 8 ? 1 : places == 32 ? 4 : places;
        ratios[{st.label, places}].push_back(hours_median[places] / hours_median[base]);
        auto& pooled = all_shares[{st.label, places}];
        pooled.insert(pooled.end(), shares.begin(), shares.end());
        each.rows.push_back(
            {CaseName(c), st.label, absl::StrCat(places), MedianMax(rounds),
             absl::StrFormat("%.3f / %.3f", hours_median[places], Quantile(hours, 1)),
             absl::StrFormat("%.3f", hours_median[places] / hours_median[base]),
             MedianWorst(shares)});
      }
    }
  }
  Section summary{"Slots: over the cases",
                  absl::StrFormat("over %zu cases x %d seeds: hours against 1 place (or 4), "
                                  "each case's median against its own base, median / max over "
                                  "the cases; found/peak over every seed of every case",
                                  cases.size(), o.seeds),
                  {"strategy", "places", "hours vs 1 place (or 4), median / max over cases",
                   "found/peak median / worst"}};
  for (const auto& [key, r] : ratios) {
    summary.rows.push_back({key.first, absl::StrCat(key.second),
                            absl::StrFormat("%.3f / %.3f", Quantile(r, 0.5), Quantile(r, 1)),
                            MedianWorst(all_shares[key])});
  }
  return {std::move(each), std::move(summary)};
}

// --node-spread S: the knee search on 2 and 4 nodes whose speeds spread over
// 1 -+ S/2, points compared within a node first and on raw figures.
Section NodeSpreadSection(const std::vector<Case>& cases, const std::vector<Strategy>& strategies,
                          const Options& o, double node_spread) {
  Section spread{
      absl::StrFormat("Nodes that differ: speeds %.3f to %.3f", 1 - node_spread / 2,
                      1 + node_spread / 2),
      absl::StrFormat("nodes whose speeds spread over %.3f to %.3f, %zu cases x %d seeds (%d to "
                      "%d)",
                      1 - node_spread / 2, 1 + node_spread / 2, cases.size(), o.seeds, o.first_seed,
                      o.first_seed + o.seeds - 1),
      {"strategy", "nodes", "found/peak, within a node first: median / worst",
       "raw figures: median / worst", "runs median / max (first / raw)"}};
  for (const auto& st : strategies) {
    if (st.label.rfind("knee", 0) != 0) continue;
    for (size_t nodes : {2, 4}) {
      std::vector<double> adjusted, raw, runs_adjusted, runs_raw;
      for (const Case& c : cases) {
        Bench bench(c);
        const double peak = bench.Peak().second;
        const SearchSpace space = st.adjust(c.space);
        for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
          // Which node is the fast one changes with the seed.
          Cluster cluster{nodes, nodes, {}, true};
          for (size_t h = 0; h < nodes; ++h) {
            const size_t rank = (h + static_cast<size_t>(seed)) % nodes;
            cluster.speed.push_back(1 - node_spread / 2 +
                                    node_spread * static_cast<double>(rank) /
                                        static_cast<double>(nodes - 1));
          }
          const auto u = static_cast<uint64_t>(seed);
          Play a = PlayOut(*st.impl, space, bench, u, cluster, st.signal);
          cluster.adjust = false;
          Play r = PlayOut(*st.impl, space, bench, u, cluster, st.signal);
          adjusted.push_back(a.found > 0 ? bench.Truth(a.found) / peak : 0);
          if (o.trace && adjusted.back() < 0.97) {
            std::printf(
                "%s mem %.0f out %d seed %d nodes %zu:%s -> %lld (%.2f%%); raw:%s -> %lld\n",
                c.profile.name.c_str(), c.npu_mem, c.max_output, seed, nodes, a.trace.c_str(),
                static_cast<long long>(a.found), 100 * adjusted.back(), r.trace.c_str(),
                static_cast<long long>(r.found));
          }
          raw.push_back(r.found > 0 ? bench.Truth(r.found) / peak : 0);
          runs_adjusted.push_back(static_cast<double>(a.runs));
          runs_raw.push_back(static_cast<double>(r.runs));
        }
      }
      spread.rows.push_back(
          {st.label, absl::StrCat(nodes), MedianWorst(adjusted), MedianWorst(raw),
           absl::StrCat(MedianMax(runs_adjusted), " (", MedianMax(runs_raw), ")")});
    }
  }
  return spread;
}

// --fit-limit: is it the points measured or the answer made of them? Each
// design's runs over the seeds, answered by KneeSearch::Best and by the cost
// fit's optimum over every size between the knee and the largest point.
Section FitLimitSection(const std::vector<Case>& cases, const Options& o,
                        const std::vector<std::vector<int64_t>>& parsed) {
  const double target = 0.985;
  Section fit{"Fixed points: the answer rule against the cost fit",
              absl::StrFormat("%d seeds (%d to %d); found/peak median / worst / share of seeds "
                              "below %.1f%%",
                              o.seeds, o.first_seed, o.first_seed + o.seeds - 1, 100 * target),
              {"case", "points measured", "runs", "the search's answer", "the cost fit's optimum"}};
  const crest::controller::KneeSearch knee_search;
  for (size_t i = 0; i < parsed.size(); ++i) {
    const std::vector<int64_t>& design = parsed[i];
    const auto [lo, hi] = std::minmax_element(design.begin(), design.end());
    for (const Case& c : cases) {
      if (*lo < c.space.lo || *hi > c.space.hi) continue;
      Bench bench(c);
      const double peak = bench.Peak().second;
      std::vector<double> answered, fitted;
      for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
        const Outcomes finished =
            MeasureDesign(bench, c.space, design, static_cast<uint64_t>(seed));
        auto best = knee_search.Best(c.space, finished);
        answered.push_back(best ? bench.Truth(best->point) / peak : 0);
        const auto reading = crest::controller::knee::Read(c.space, finished);
        auto fitted_model = crest::controller::knee::FitCost(finished, reading);
        auto at = fitted_model ? crest::controller::knee::ModelOptimum(*fitted_model, reading)
                               : std::nullopt;
        if (at) fitted.push_back(bench.Truth(*at) / peak);
      }
      fit.rows.push_back(
          {CaseName(c), o.designs[i], absl::StrCat(design.size()), ShareSummary(answered, target),
           absl::StrFormat("%s (%d seeds without a fit)", ShareSummary(fitted, target),
                           o.seeds - static_cast<int>(fitted.size()))});
    }
  }
  return fit;
}

// `text` written whole through a temporary file, so that a run that fails
// leaves the old file in place.
absl::Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError(absl::StrCat("writing ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(tmp, " -> ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// The --markdown file: the head, then every section.
absl::Status WriteMarkdown(const std::string& path, const std::string& head,
                           const std::vector<Section>& sections) {
  std::string text = head;
  for (const Section& s : sections) text += Markdown(s);
  text.pop_back();  // one newline at the end, not two
  return WriteWhole(path, text);
}

// The zoo's table: curves the search was never tuned on.
Section ZooSection(const std::vector<crest::bench::CurveResult>& results,
                   const std::vector<Strategy>& strategies, const Options& o, bool given) {
  crest::bench::ZooTable t = crest::bench::ZooTableOf(results, strategies);
  Section s{given ? "The curves given" : "The zoo: curves the search was never tuned on",
            absl::StrFormat("%zu curves%s x %d seeds (%d to %d), replayed with each file's "
                            "run-to-run noise; found/peak: median / worst; runs: median / max; "
                            "the answer's basis over the 1-node plays",
                            results.size(), given ? "" : " of bench/search/curves/", o.seeds,
                            o.first_seed, o.first_seed + o.seeds - 1),
            t.header, t.rows, t.after};
  s.after.push_back(absl::StrCat("zoo targets: ", t.all_met ? "all met" : "NOT all met"));
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  CLI::App app("search-bench: the search strategies against mindie-sim in virtual time",
               "search-bench");
  Options o;
  AddOptions(app, o);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  // A spread of 0 is alike nodes: the table's own plays.
  o.node_spreads.erase(std::remove(o.node_spreads.begin(), o.node_spreads.end(), 0.0),
                       o.node_spreads.end());
  o.table = o.table || (!o.projection && o.node_spreads.empty() && o.designs.empty());
  // Checked before minutes of measuring; written once all is measured.
  for (const auto& [flag, path] :
       {std::pair{"--markdown", o.markdown}, std::pair{"--json", o.json}}) {
    if (path.empty()) continue;
    const std::string tmp = path + ".tmp";
    const bool writable = static_cast<bool>(std::ofstream(tmp));
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    if (!writable) return crest::FailWithMessage(app, absl::StrCat(flag, ": cannot write ", tmp));
  }
  // Curve files are read before anything is measured.
  std::vector<Case> curve_cases;
  if (!o.curve_files.empty() || (o.zoo != "none" && (o.table || !o.json.empty()))) {
    auto loaded = crest::bench::LoadCurveCases(
        o.curve_files.empty() ? std::vector<std::string>{o.zoo} : o.curve_files);
    if (!loaded.ok()) return crest::FailWithMessage(app, std::string(loaded.status().message()));
    curve_cases = std::move(*loaded);
  }
  auto share = crest::ShareDir();
  if (!share.ok()) return crest::FailWithMessage(app, share.status().ToString());
  absl::StatusOr<std::vector<Case>> cases = std::vector<Case>{};
  if (o.curve_files.empty()) cases = LoadCases(*share, o);
  if (!cases.ok()) return crest::FailWithMessage(app, cases.status().ToString());
  // --fit-limit's lists parsed once (the option checked each).
  std::vector<std::vector<int64_t>> parsed;
  for (const auto& text : o.designs) parsed.push_back(*ParsePoints(text));
  if (auto st = CheckDesigns(o, parsed, *cases); !st.ok()) {
    return crest::FailWithMessage(app, std::string(st.message()));
  }
  const std::vector<Strategy> strategies = Strategies();
  std::vector<Section> sections;  // in the order printed, then written
  bool printed = false;
  auto emit = [&](std::vector<Section> more) {
    for (Section& s : more) {
      if (s.printed) {
        if (printed) std::printf("\n");  // a blank line between sections
        printed = true;
        Print(s);
      }
      sections.push_back(std::move(s));
    }
  };
  if (o.table && o.curve_files.empty()) emit(TableSections(*cases, strategies, o));
  if (o.projection) emit(ProjectionSections(*cases, strategies, o));
  for (const double spread : o.node_spreads) {
    emit({NodeSpreadSection(*cases, strategies, o, spread)});
  }
  if (!parsed.empty()) emit({FitLimitSection(*cases, o, parsed)});
  if (!curve_cases.empty()) {
    auto results =
        crest::bench::PlayCurves(curve_cases, strategies, o.first_seed, o.seeds, o.threads);
    if (o.trace) {
      const size_t n = o.trace_nodes == 4 ? 2 : o.trace_nodes == 2 ? 1 : 0;
      for (const auto& r : results) {
        for (size_t k = 0; k < strategies.size(); ++k) {
          for (size_t i = 0; i < r.plays[k][n].size(); ++i) {
            const Play& p = r.plays[k][n][i];
            std::printf("%s %s seed %d:%s -> %lld (%.2f%%) %s\n", r.name.c_str(),
                        strategies[k].label.c_str(), o.first_seed + static_cast<int>(i),
                        p.trace.c_str(), static_cast<long long>(p.found), 100 * r.shares[k][n][i],
                        p.basis.c_str());
          }
        }
      }
    }
    emit({ZooSection(results, strategies, o, !o.curve_files.empty())});
    if (!o.json.empty()) {
      auto st = WriteWhole(o.json, crest::bench::CurvesJson(results, strategies));
      if (!st.ok()) return crest::FailWithMessage(app, std::string(st.message()));
    }
  }
  if (!o.markdown.empty()) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto st = WriteMarkdown(o.markdown, MarkdownHead(argc, argv, seconds), sections);
    if (!st.ok()) return crest::FailWithMessage(app, std::string(st.message()));
  }
  return 0;
}
