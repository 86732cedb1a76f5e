// A real Prometheus (Debian `prometheus`) on loopback scraping a real
// controller, its agents and their mindie-sim daemons through a short
// campaign, with deploy/prometheus/crest-rules.yml loaded. Checks: every
// exposer passes `promtool check metrics`; the curve series carry the
// contract's labels and the report's values; every panel query of
// deploy/grafana/crest-dashboard.json, its template variables substituted,
// returns data; no panel queries a metric no exposer publishes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "common/file_util.h"
#include "common/listen_port.h"
#include "tests/observability/stack.h"

namespace crest::observability {
namespace {

using ::testing::HasSubstr;

constexpr double kTimeScale = 200;
constexpr absl::Duration kDeadline = absl::Seconds(20);

// Polls `fetch` until `done` accepts its value or the deadline passes.
template <typename Fetch, typename Done>
auto PollUntil(Fetch fetch, Done done, absl::Duration deadline = kDeadline) {
  const absl::Time end = absl::Now() + deadline;
  auto value = fetch();
  while (!done(value) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(100));  // between polls, not a synchronisation
    value = fetch();
  }
  return value;
}

class Prometheus {
 public:
  explicit Prometheus(std::string base) : base_(std::move(base)) {}

  // The result vector of an instant query (empty on any error, kept in last_error).
  nlohmann::json Query(const std::string& promql) {
    auto body = HttpGet(absl::StrCat(base_, "/api/v1/query?query=", UrlEncode(promql)));
    if (!body.ok()) {
      last_error_ = body.status().ToString();
      return nlohmann::json::array();
    }
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (!j.is_object() || j.value("status", "") != "success") {
      last_error_ = *body;
      return nlohmann::json::array();
    }
    last_error_.clear();
    return j["data"]["result"];
  }
  // The result matrix of a range query over [start, now] at 1 s steps.
  nlohmann::json QueryRange(const std::string& promql, absl::Time start) {
    auto body = HttpGet(absl::StrCat(base_, "/api/v1/query_range?query=", UrlEncode(promql),
                                     "&start=", absl::ToUnixSeconds(start) - 1,
                                     "&end=", absl::ToUnixSeconds(absl::Now()) + 1, "&step=1"));
    if (!body.ok()) {
      last_error_ = body.status().ToString();
      return nlohmann::json::array();
    }
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (!j.is_object() || j.value("status", "") != "success") {
      last_error_ = *body;
      return nlohmann::json::array();
    }
    last_error_.clear();
    return j["data"]["result"];
  }
  const std::string& last_error() const { return last_error_; }

 private:
  std::string base_;
  std::string last_error_;
};

// Metric names a text exposition declares (# TYPE lines), with the series
// names a histogram or summary adds.
std::set<std::string> DeclaredNames(const std::string& text) {
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4 || f[0] != "#" || f[1] != "TYPE") continue;
    names.insert(f[2]);
    if (f[3] == "histogram" || f[3] == "summary") {
      for (const char* s : {"_bucket", "_sum", "_count"}) names.insert(f[2] + s);
    }
  }
  return names;
}

// The metric names a PromQL expression reads: identifiers left once label
// matchers, grouping clauses, ranges and strings are removed, that are not
// function calls or keywords.
std::set<std::string> QueriedNames(std::string expr) {
  expr = std::regex_replace(expr, std::regex(R"("[^"]*")"), "\"\"");
  expr = std::regex_replace(expr, std::regex(R"(\{[^}]*\})"), " ");
  expr = std::regex_replace(expr, std::regex(R"(\[[^\]]*\])"), " ");
  expr = std::regex_replace(
      expr, std::regex(R"(\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"), " ");
  static const std::set<std::string> kKeywords = {
      "by",     "without", "on",  "ignoring", "bool",       "and",        "or",
      "unless", "offset",  "inf", "nan",      "group_left", "group_right"};
  std::set<std::string> names;
  std::regex ident(R"(([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?)");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), ident);
       it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if ((*it)[2].matched || kKeywords.count(name) > 0) continue;
    // A digit run's tail (1e3) is not an identifier.
    if (it->position() > 0 && std::isdigit(static_cast<unsigned char>(expr[it->position() - 1]))) {
      continue;
    }
    names.insert(name);
  }
  return names;
}

// Every panel of a dashboard, rows' nested panels included.
void CollectPanels(const nlohmann::json& panels, std::vector<nlohmann::json>* out) {
  for (const auto& p : panels) {
    if (p.contains("panels")) CollectPanels(p["panels"], out);
    if (p.contains("targets")) out->push_back(p);
  }
}

std::vector<std::string> RecordingRules(const std::string& file) {
  auto text = ReadFileToString(file);
  std::vector<std::string> names;
  if (!text.ok()) return names;
  std::regex record(R"(record:\s*(\S+))");
  for (auto it = std::sregex_iterator(text->begin(), text->end(), record);
       it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

// "model/node/maxBatchSize" of a per-trial series' labels.
std::string PointKey(const nlohmann::json& labels) {
  return absl::StrCat(labels["model"].get<std::string>(), "/", labels["node"].get<std::string>(),
                      "/", labels["max_batch_size"].get<std::string>());
}

// One campaign on a controller and two agents, scraped by a real Prometheus;
// the test's phases check what each part of the stack publishes.
class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prometheus_ = FindOnPath("prometheus");
    promtool_ = FindOnPath("promtool");
    if (prometheus_.empty() || promtool_.empty()) {
      GTEST_SKIP() << "prometheus/promtool not installed: apt-get install prometheus "
                      "(listed in scripts/debian-packages.txt)";
    }
    stack_.emplace();
  }

  Stack& stack() { return *stack_; }

  // Prometheus in a temp dir, scraping everything four times a second.
  void StartPrometheus() {
    rules_ = e2e::SourceDir() + "/deploy/prometheus/crest-rules.yml";
    std::string config = absl::StrCat(
        "global: {scrape_interval: 250ms, evaluation_interval: 250ms}\n", "rule_files: [\"", rules_,
        "\"]\n", "scrape_configs:\n", "  - job_name: crest-controller\n",
        "    static_configs: [{targets: [\"", stack().controller_metrics(), "\"]}]\n",
        "  - job_name: crest-agent\n    static_configs:\n");
    std::string daemons = "  - job_name: mindie\n    static_configs:\n";
    for (const auto& [node, e] : stack().agents()) {
      absl::StrAppend(&config, "      - targets: [\"", e.metrics, "\"]\n");
      absl::StrAppend(&daemons, "      - {targets: [\"", e.sim_metrics,
                      "\"], labels: {node: ", node, "}}\n");
    }
    config += daemons;
    const std::string config_file = stack().dir().File("prometheus.yml");
    ASSERT_TRUE(WriteFileAtomically(config_file, config).ok());
    // Held while Prometheus runs: it binds with SO_REUSEADDR, as Go does.
    auto port = ReserveListenPort();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *std::move(port);
    auto server = Process::Start(
        prometheus_,
        {"--config.file=" + config_file, "--storage.tsdb.path=" + stack().dir().File("tsdb"),
         absl::StrCat("--web.listen-address=127.0.0.1:", port_.port()), "--log.level=warn"},
        "prometheus");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    const std::string base = absl::StrCat("http://127.0.0.1:", port_.port());
    prom_.emplace(base);
    auto ready = PollUntil([&] { return HttpGet(base + "/-/ready"); },
                           [](const absl::StatusOr<std::string>& r) { return r.ok(); });
    ASSERT_TRUE(ready.ok()) << ready.status() << "\n" << server_->output();
    exposers_ = {{"controller", stack().controller_metrics()}};
    for (const auto& [node, e] : stack().agents()) {
      exposers_.emplace_back("agent " + node, e.metrics);
      exposers_.emplace_back("mindie-sim of " + node, e.sim_metrics);
    }
  }

  // Every exposer's text passes promtool's linter. Lints every exposer that
  // answers now; the daemons answer only while a trial runs.
  void LintExposers() {
    for (const auto& [who, address] : exposers_) {
      auto body = HttpGet(absl::StrCat("http://", address, "/metrics"));
      if (!body.ok() && who.rfind("mindie-sim", 0) == 0) continue;
      ASSERT_TRUE(body.ok()) << who << ": " << body.status();
      const std::string& text = *body;
      linted_.insert(who);
      for (const auto& n : DeclaredNames(text)) published_.insert(n);
      const std::string file = stack().dir().File("scrape.txt");
      ASSERT_TRUE(WriteFileAtomically(file, text).ok());
      e2e::CommandResult lint =
          e2e::RunBinary("/bin/sh", {"-c", absl::StrCat(promtool_, " check metrics < ", file)});
      EXPECT_EQ(lint.code, 0) << who << ": " << lint.output << "\n" << text;
      EXPECT_EQ(lint.output, "") << who;
    }
  }

  // The campaign to its end and its report; then one daemon per node again.
  void RunCampaign() {
    const std::string id = stack().Submit(R"(name: obs
models:
  - {name: LLaMa3-8B, nodes: [node-1]}
  - {name: LLaMa2-13B, nodes: [node-2]}
search: {max_trials: 3, tolerance: 0.5}
client: {request_count: 40, max_output_len: 64}
host: {governor: performance, thp: always}
)");
    ASSERT_EQ(id, "c1") << stack().error();
    campaign_start_ = absl::Now();
    e2e::CommandResult watch = stack().Cli({"campaign", "watch", id}, absl::Seconds(60));
    ASSERT_EQ(watch.code, 0) << watch.output;
    ASSERT_THAT(watch.output, HasSubstr("succeeded"));
    const std::string report_file = stack().dir().File("report.json");
    ASSERT_EQ(stack().Cli({"campaign", "report", id, "--format", "json", "-o", report_file}).code,
              0);
    report_ = nlohmann::json::parse(*ReadFileToString(report_file), nullptr, false);
    ASSERT_TRUE(report_.is_object());
    // Each trial stops its daemon; start one per node again (as an operator
    // would with `crest node start`) so the daemons' own metrics can be read.
    for (const auto& [node, e] : stack().agents()) {
      e2e::CommandResult start = stack().NodeCli(node, {"node", "start"});
      ASSERT_EQ(start.code, 0) << node << ": " << start.output;
    }
  }

  // The report's curve: each ok trial's GenerateSpeed and preemptions by
  // point, and the trials in all.
  void ReadReportCurve() {
    for (const auto& m : report_["models"]) {
      for (const auto& t : m["trials"]) {
        ++trials_;
        if (t["status"] != "ok" || t["calibration"].get<bool>()) continue;
        const std::string key =
            absl::StrCat(m["model"].get<std::string>(), "/", t["node"].get<std::string>(), "/",
                         t["maxBatchSize"].get<int64_t>());
        expected_[key] = t["GenerateSpeed"].get<double>();
        if (t.contains("preemptions")) preempted_[key] = t["preemptions"].get<int64_t>();
      }
    }
    // At least one point per model (how far each search goes depends on the figures).
    ASSERT_GE(expected_.size(), 2u) << report_.dump(2);
  }

  // The curve: one series per ok trial, with the contract's labels and the report's figure.
  void CheckCurveSeries() {
    const std::string curve = R"(crest_trial_generate_speed_tokens_per_second{campaign="c1"})";
    nlohmann::json series =
        PollUntil([&] { return prom_->Query(curve); },
                  [&](const nlohmann::json& r) { return r.size() == expected_.size(); });
    ASSERT_EQ(series.size(), expected_.size()) << series.dump(2) << prom_->last_error();
    for (const auto& s : series) {
      const auto& labels = s["metric"];
      EXPECT_EQ(labels["campaign"], "c1");
      EXPECT_EQ(labels["calibration"], "false");
      EXPECT_EQ(labels["job"], "crest-controller");
      const std::string key = PointKey(labels);
      ASSERT_EQ(expected_.count(key), 1u) << key << " not in the report";
      const double value = std::stod(s["value"][1].get<std::string>());
      EXPECT_NEAR(value, expected_[key], 1e-6 * expected_[key]) << key;
    }
  }

  // The preemptions per point (the dashboard's panel): the agent reads the
  // daemon's counters in every run, so each point has the report's count.
  void CheckPreemptions() {
    ASSERT_EQ(preempted_.size(), expected_.size())
        << "points without preemptions: " << report_.dump(2);
    nlohmann::json preemptions = PollUntil(
        [&] {
          return prom_->Query(R"(crest_trial_preemptions{campaign="c1",calibration="false"})");
        },
        [&](const nlohmann::json& r) { return r.size() == preempted_.size(); });
    ASSERT_EQ(preemptions.size(), preempted_.size()) << preemptions.dump(2) << prom_->last_error();
    for (const auto& s : preemptions) {
      const std::string key = PointKey(s["metric"]);
      ASSERT_EQ(preempted_.count(key), 1u) << key << " not in the report";
      EXPECT_EQ(std::stod(s["value"][1].get<std::string>()), static_cast<double>(preempted_[key]))
          << key;
    }
  }

  // Trials counted, best so far as the report's best.
  void CheckTrialsAndBest() {
    auto total = PollUntil(
        [&] { return prom_->Query(R"(sum(crest_trials_total{campaign="c1"}))"); },
        [&](const nlohmann::json& r) {
          return r.size() == 1 && std::stoi(r[0]["value"][1].get<std::string>()) == trials_;
        });
    ASSERT_EQ(total.size(), 1u);
    EXPECT_EQ(std::stoi(total[0]["value"][1].get<std::string>()), trials_);
    for (const auto& m : report_["models"]) {
      auto best = prom_->Query(absl::StrCat(R"(crest_best_max_batch_size{campaign="c1",model=")",
                                            m["model"].get<std::string>(), "\"}"));
      ASSERT_EQ(best.size(), 1u) << m["model"];
      EXPECT_EQ(std::stoi(best[0]["value"][1].get<std::string>()),
                m["best"]["maxBatchSize"].get<int>());
    }
  }

  // Each agent ran one benchmark per ok trial of its node.
  void CheckBenchmarksPerNode() {
    std::map<std::string, int> ok_per_node;
    for (const auto& m : report_["models"]) {
      for (const auto& t : m["trials"]) {
        if (t["status"] == "ok") ++ok_per_node[t["node"].get<std::string>()];
      }
    }
    auto benchmarks =
        PollUntil([&] { return prom_->Query(R"(crest_agent_benchmarks_total{result="ok"})"); },
                  [&](const nlohmann::json& r) {
                    int sum = 0;
                    for (const auto& b : r) sum += std::stoi(b["value"][1].get<std::string>());
                    return r.size() == 2 && sum == ok_per_node["node-1"] + ok_per_node["node-2"];
                  });
    ASSERT_EQ(benchmarks.size(), 2u) << benchmarks.dump();
    for (const auto& b : benchmarks) {
      const std::string node = b["metric"]["node"].get<std::string>();
      EXPECT_EQ(std::stoi(b["value"][1].get<std::string>()), ok_per_node[node]) << b.dump();
      EXPECT_EQ(b["metric"]["job"], "crest-agent");
    }
  }

  // The hosts were restored at the end: no longer tuned.
  void CheckHostsRestored() {
    auto tuned =
        PollUntil([&] { return prom_->Query("max(crest_agent_host_tuned)"); },
                  [](const nlohmann::json& r) { return r.size() == 1 && r[0]["value"][1] == "0"; });
    ASSERT_EQ(tuned.size(), 1u) << prom_->last_error();
    EXPECT_EQ(tuned[0]["value"][1], "0");
  }

  // The recording rule over the curve sees the same points.
  void CheckRecordingRule() {
    auto recorded = PollUntil(
        [&] {
          return prom_->Query(
              R"(crest:trial_generate_speed_tokens_per_second:max_by_point{campaign="c1"})");
        },
        [&](const nlohmann::json& r) { return r.size() == expected_.size(); });
    EXPECT_EQ(recorded.size(), expected_.size()) << recorded.dump();
  }

  // The dashboard: every panel query, variables substituted, has data; every
  // metric it reads is published by an exposer or a recording rule.
  void CheckDashboard() {
    for (const auto& r : RecordingRules(rules_)) published_.insert(r);
    auto dashboard_text =
        ReadFileToString(e2e::SourceDir() + "/deploy/grafana/crest-dashboard.json");
    ASSERT_TRUE(dashboard_text.ok());
    auto dashboard = nlohmann::json::parse(*dashboard_text, nullptr, false);
    ASSERT_TRUE(dashboard.is_object());
    std::vector<nlohmann::json> panels;
    CollectPanels(dashboard["panels"], &panels);
    ASSERT_GE(panels.size(), 6u);
    // Every panel has data, the preemption one included: the agent reads the
    // daemon's metrics in every run, and mindie-sim publishes its preemption
    // counter from the start, so each ok trial records a count (0 below the knee).
    int queried = 0;
    for (const auto& panel : panels) {
      const std::string title = panel.value("title", "");
      for (const auto& target : panel["targets"]) {
        ASSERT_NO_FATAL_FAILURE(CheckPanelTarget(title, target));
        ++queried;
      }
    }
    EXPECT_GE(queried, 10);
  }

  // One panel query: the metrics it reads are published, and it has data.
  void CheckPanelTarget(const std::string& title, const nlohmann::json& target) {
    const std::string expr = target.value("expr", "");
    ASSERT_FALSE(expr.empty()) << title;
    for (const auto& name : QueriedNames(expr)) {
      EXPECT_EQ(published_.count(name), 1u)
          << "panel '" << title << "' queries " << name << ", which no exposer publishes";
    }
    const std::string promql = absl::StrReplaceAll(expr, {{"$campaign", "c1"},
                                                          {"${campaign}", "c1"},
                                                          {"$model", "LLaMa3-8B|LLaMa2-13B"},
                                                          {"$node", "node-1|node-2"},
                                                          {"$__rate_interval", "1m"},
                                                          {"$__interval", "5s"},
                                                          {"$__range", "5m"}});
    ASSERT_EQ(promql.find('$'), std::string::npos) << title << ": " << promql;
    // As Grafana asks: an instant query for instant targets, else a range
    // query over the campaign (the daemons' series end with each trial).
    const bool instant = target.value("instant", false);
    auto result = PollUntil(
        [&] { return instant ? prom_->Query(promql) : prom_->QueryRange(promql, campaign_start_); },
        [](const nlohmann::json& r) { return !r.empty(); }, absl::Seconds(15));
    EXPECT_FALSE(result.empty()) << "panel '" << title << "': no data for " << promql << " "
                                 << prom_->last_error();
  }

  std::string prometheus_;
  std::string promtool_;
  std::optional<Stack> stack_;  // set up unless the test is skipped
  std::string rules_;           // deploy/prometheus/crest-rules.yml
  PortReservation port_;        // Prometheus's
  std::unique_ptr<Process> server_;
  std::optional<Prometheus> prom_;
  std::vector<std::pair<std::string, std::string>> exposers_;  // who, address
  std::set<std::string> linted_;                               // exposers linted at least once
  std::set<std::string> published_;                            // metric names the exposers declare
  nlohmann::json report_;
  absl::Time campaign_start_;
  std::map<std::string, double> expected_;    // "model/node/maxBatchSize" -> GenerateSpeed
  std::map<std::string, int64_t> preempted_;  // same key -> the daemon's preemptions
  int trials_ = 0;
};

TEST_F(PrometheusTest, ScrapesACampaignAndServesEveryDashboardPanel) {
  ASSERT_TRUE(stack().StartController()) << stack().error();
  ASSERT_TRUE(stack().StartAgent("node-1", "LLaMa3-8B", kTimeScale)) << stack().error();
  ASSERT_TRUE(stack().StartAgent("node-2", "LLaMa2-13B", kTimeScale)) << stack().error();
  ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  LintExposers();
  ASSERT_NO_FATAL_FAILURE(RunCampaign());
  // After the campaign every family that it fills is declared; lint again.
  LintExposers();
  EXPECT_EQ(linted_.size(), exposers_.size()) << "not every exposer was linted";
  auto daemons_up = PollUntil([&] { return prom_->Query(R"(up{job="mindie"} == 1)"); },
                              [](const nlohmann::json& r) { return r.size() == 2; });
  EXPECT_EQ(daemons_up.size(), 2u) << "Prometheus did not scrape both daemons";
  ASSERT_NO_FATAL_FAILURE(ReadReportCurve());
  ASSERT_NO_FATAL_FAILURE(CheckCurveSeries());
  ASSERT_NO_FATAL_FAILURE(CheckPreemptions());
  ASSERT_NO_FATAL_FAILURE(CheckTrialsAndBest());
  ASSERT_NO_FATAL_FAILURE(CheckBenchmarksPerNode());
  ASSERT_NO_FATAL_FAILURE(CheckHostsRestored());
  CheckRecordingRule();
  CheckDashboard();
}

}  // namespace
}  // namespace crest::observability
