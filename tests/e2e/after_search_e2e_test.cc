// End to end, what follows the search on a real agent and mindie-sim: the
// select-batch calibration at the answer, kept or dropped by the measured
// throughput, and the request-rate search, whose runs reuse the running
// daemon (the same pid for every rate, no restart).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/paths.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

// Noise-free runs: each outcome below is the simulator's, not luck's. The
// weights "load" in a simulated second, not the profile's 40.
AgentOptions QuietAgent(double time_scale, const std::string& profile = "") {
  AgentOptions o;
  o.time_scale = time_scale;
  o.sim_args = {"--noise-cv", "0", "--startup-seconds", "1"};
  if (!profile.empty()) {
    o.sim_args.emplace_back("--profile");
    o.sim_args.push_back(profile);
  }
  return o;
}

// Slower than the fixture's 200x where latencies or rates matter. At 200x a
// millisecond of the client's own real-time overhead reads as 200 ms of
// latency; and a rate-mode client must stay far below its own limits (a
// client-bound run is flagged, never evidence): rates near the daemon's
// capacity are tens per second simulated, so a few hundred at most real.
constexpr double kLatencyScale = 10;
constexpr double kRateScale = 4;

class AfterSearchE2e : public CampaignFixture {
 protected:
  // node-1, node-2, ... serving LLaMa3-8B at these time scales, each with
  // its own simulator profile file ("": the shipped one).
  void StartNodes(const std::vector<double>& time_scales,
                  const std::vector<std::string>& profiles = {}) {
    std::string agents;
    std::string scales;
    for (size_t i = 0; i < time_scales.size(); ++i) {
      const std::string name = absl::StrCat("node-", i + 1);
      const std::string profile = i < profiles.size() ? profiles[i] : "";
      absl::StrAppend(&agents, i == 0 ? "" : ",", name, "=",
                      StartAgentWith(name, "LLaMa3-8B", QuietAgent(time_scales[i], profile)));
      absl::StrAppend(&scales, i == 0 ? "" : ",", name, "=", time_scales[i]);
    }
    StartController(dir_.File("ctl"), agents, {"--sim-time-scale", scales});
    for (size_t i = 0; i < time_scales.size(); ++i) {
      ASSERT_TRUE(
          controller_->WaitForLine(absl::StrCat("agent node-", i + 1, " at"), kStartup).ok());
    }
  }

  // The shipped LLaMa3-8B profile whose every prefill costs 400 ms more.
  std::string CostlyPrefillProfile() {
    auto share = ShareDir();
    EXPECT_TRUE(share.ok()) << share.status();
    auto text = ReadFileToString(*share + "/profiles/llama3-8b-910b.json");
    EXPECT_TRUE(text.ok()) << text.status();
    nlohmann::json profile = nlohmann::json::parse(text.ok() ? *text : "{}");
    profile["name"] = "llama3-8b-costly-prefill";
    profile["timing"]["prefill_base_ms"] = 430.0;
    std::string file = dir_.File("costly-prefill.json");
    EXPECT_TRUE(WriteFileAtomically(file, profile.dump()).ok());
    return file;
  }

  nlohmann::json Run(const std::string& spec) {
    std::string id = Submit(spec);
    CommandResult watch = Watch(id);
    EXPECT_EQ(watch.code, 0) << watch.output;
    nlohmann::json report = Report(id);
    EXPECT_EQ(report["state"], "succeeded") << report.dump(2);
    return Model(report, "LLaMa3-8B");
  }
};

// Whether the search has an answer to go on from. When other work takes the
// machine's CPUs, crest-bench can be the bottleneck of every search run:
// each is flagged, the model has no answer (an untrusted best, not a
// recommendation), and nothing is calibrated or rate-searched, which is
// what must happen then.
bool SearchAnswered(const nlohmann::json& m) {
  if (!m["best"]["untrusted"].get<bool>()) return true;
  for (const auto& t : m["trials"]) {
    EXPECT_TRUE(Flagged(t)) << t.dump();
    EXPECT_FALSE(t["calibration"].get<bool>()) << t.dump();
    EXPECT_FALSE(t["rateSearch"].get<bool>()) << t.dump();
  }
  EXPECT_FALSE(m.contains("calibration")) << m["calibration"].dump(2);
  EXPECT_FALSE(m.contains("rate_search")) << m["rate_search"].dump(2);
  return false;
}

// Every search run ran before the calibrated ones, at the answer: one, or
// more when flagged ones were made up (the last is the one that counts).
void ExpectCalibratedRunAtTheAnswer(const nlohmann::json& m) {
  const auto& trials = m["trials"];
  ASSERT_FALSE(trials.empty());
  const auto& cal = trials.back();
  bool calibrating = false;
  for (const auto& t : trials) {
    calibrating |= t["calibration"].get<bool>();
    EXPECT_EQ(t["calibration"].get<bool>(), calibrating) << t.dump();
    EXPECT_EQ(t["supportSelectBatch"].get<bool>(), calibrating) << t.dump();
    if (!calibrating) continue;
    EXPECT_EQ(t["status"], "ok");
    EXPECT_EQ(t["maxBatchSize"], m["calibration"]["maxBatchSize"]);
    EXPECT_EQ(t["prefillTimeMsPerReq"], m["calibration"]["prefillTimeMsPerReq"]);
    // Only the last may be trusted: a trusted run ends the calibration.
    if (&t != &cal) {
      EXPECT_TRUE(Flagged(t)) << t.dump();
    }
  }
  EXPECT_TRUE(cal["calibration"].get<bool>()) << cal.dump();
  // The select-batch times are the latencies measured at the answer, as
  // config.json takes them (whole ms in MindIE's [1, 1000]).
  double first_token = 0;
  double decode = 0;
  int n = 0;
  for (const auto& t : trials) {
    // The controller takes the latencies of the answer's trusted runs.
    if (t["calibration"].get<bool>() || t["maxBatchSize"] != cal["maxBatchSize"] || Flagged(t)) {
      continue;
    }
    first_token += t["FirstTokenTime"].get<double>();
    decode += t["DecodeTime"].get<double>();
    ++n;
  }
  ASSERT_GT(n, 0);
  auto as_config = [](double ms) { return std::clamp(std::round(ms), 1.0, 1000.0); };
  EXPECT_EQ(cal["prefillTimeMsPerReq"].get<double>(), as_config(first_token / n));
  EXPECT_EQ(cal["decodeTimeMsPerReq"].get<double>(), as_config(decode / n));
  if (Flagged(cal)) return;  // no figure after: CalibratedRunFlagged
  EXPECT_DOUBLE_EQ(m["calibration"]["GenerateSpeedAfter"].get<double>(),
                   cal["GenerateSpeed"].get<double>());
}

// A calibrated run the trust checks flagged measured nothing of the server,
// and is made up by another (limits.max_retries of them); when every one was
// flagged the calibration is dropped for that reason, without an after
// figure, and the recommendation stays the search's. Returns whether that
// happened.
bool CalibratedRunFlagged(const nlohmann::json& m) {
  int calibrated = 0;
  for (const auto& t : m["trials"]) {
    if (!t["calibration"].get<bool>()) continue;
    if (!Flagged(t)) return false;
    ++calibrated;
  }
  EXPECT_EQ(calibrated, 1 + 2);  // one run and the default max_retries' make-ups
  const auto& c = m["calibration"];
  EXPECT_EQ(c["outcome"], "dropped") << c.dump(2);
  EXPECT_THAT(c["reason"].get<std::string>(), HasSubstr("every calibrated run was flagged"));
  EXPECT_TRUE(c["GenerateSpeedAfter"].is_null()) << c.dump(2);
  EXPECT_TRUE(c["change"].is_null()) << c.dump(2);
  EXPECT_EQ(c["runsAfter"], 0);
  EXPECT_FALSE(m["best"]["supportSelectBatch"].get<bool>()) << m["best"].dump();
  EXPECT_DOUBLE_EQ(m["best"]["GenerateSpeed"].get<double>(),
                   c["GenerateSpeedBefore"].get<double>());
  return true;
}

TEST_F(AfterSearchE2e, CalibrationIsKeptOrDroppedByTheMeasuredThroughput) {
  StartNodes({kLatencyScale, kLatencyScale}, {CostlyPrefillProfile(), ""});
  // Streamed replies measure FirstTokenTime and DecodeTime. node-1's daemon
  // pays 430 ms for every prefill, however few sequences it admits, so
  // deferring prefills to batch them roughly breaks even against the stalls
  // it saves: 5-6% down in three runs on the 2-core machine, inside or just
  // past the 5.7% noise band of one run each. Whether
  // it is kept is therefore the measurement's call, and what this checks is
  // that the decision and the recommendation follow the measured figures
  // (controller/after_search_test.cc pins each branch exactly; node-2 below
  // is a clear fall).
  nlohmann::json costly = Run(R"(name: costly-prefill
models: [{name: LLaMa3-8B, nodes: [node-1]}]
search: {strategy: practice, range: [100, 300], initial: 100, tolerance: 0.5}
client: {request_count: 400, max_output_len: 64, task_kind: stream}
calibrate: true
)");
  if (SearchAnswered(costly)) {
    ExpectCalibratedRunAtTheAnswer(costly);
    const auto& c = costly["calibration"];
    if (!CalibratedRunFlagged(costly)) {
      // One node: the change compared is the measured one.
      EXPECT_NEAR(
          c["change"].get<double>(),
          c["GenerateSpeedAfter"].get<double>() / c["GenerateSpeedBefore"].get<double>() - 1, 1e-9);
      const bool fell = c["GenerateSpeedAfter"].get<double>() <
                        c["GenerateSpeedBefore"].get<double>() * (1 - c["band"].get<double>());
      EXPECT_EQ(c["outcome"], fell ? "dropped" : "kept") << c.dump(2);
      EXPECT_EQ(c["kept"].get<bool>(), !fell);
      // The recommendation carries the calibration and its own measured
      // figure only when kept.
      EXPECT_EQ(costly["best"]["supportSelectBatch"].get<bool>(), !fell) << costly["best"].dump();
      EXPECT_DOUBLE_EQ(costly["best"]["GenerateSpeed"].get<double>(),
                       c[fell ? "GenerateSpeedBefore" : "GenerateSpeedAfter"].get<double>());
      if (!fell) {
        EXPECT_EQ(costly["best"]["prefillTimeMsPerReq"], c["prefillTimeMsPerReq"]);
      }
    }
  }

  // node-2, the shipped profile, in the practice's rate mode: 1000 clients
  // for a batch of at most 40, the
  // requests arriving faster than the daemon serves them (200 per second on
  // a 10x node: 20 simulated). They queue, the measured first-token time
  // includes the wait and is capped at 1000 ms, and a prefill then waits for
  // 1000 ms x the running batch: the batch drains between prefills.
  nlohmann::json dropped = Run(R"(name: dropped
models: [{name: LLaMa3-8B, nodes: [node-2]}]
search: {strategy: practice, range: [20, 40], initial: 20, step: 10, tolerance: 0.5}
client: {mode: rate, request_rate: 200, request_count: 200, max_output_len: 64,
         task_kind: stream}
calibrate: true
)");
  if (SearchAnswered(dropped)) {
    ExpectCalibratedRunAtTheAnswer(dropped);
    const auto& d = dropped["calibration"];
    EXPECT_EQ(d["outcome"], "dropped") << d.dump(2);
    EXPECT_FALSE(d["kept"].get<bool>());
    // Dropped either way: for the fall, or because its run measured nothing.
    if (!CalibratedRunFlagged(dropped)) {
      EXPECT_LT(d["GenerateSpeedAfter"].get<double>(),
                d["GenerateSpeedBefore"].get<double>() * (1 - d["band"].get<double>()));
    }
    EXPECT_THAT(d["reason"].get<std::string>(), HasSubstr("supportSelectBatch stays off"));
    EXPECT_FALSE(dropped["best"]["supportSelectBatch"].get<bool>()) << dropped["best"].dump();
    EXPECT_DOUBLE_EQ(dropped["best"]["GenerateSpeed"].get<double>(),
                     d["GenerateSpeedBefore"].get<double>());
    // Both figures in the table a user reads.
    CommandResult table = Cli({"campaign", "report", "c2", "--format", "table"});
    EXPECT_THAT(table.output, HasSubstr("calibration at "));
    EXPECT_THAT(table.output, HasSubstr(": dropped ("));
  }

  // The HTML report marks another campaign's answer as the practice's
  // (scripts/demo runs the ladder as its own campaign); only HTML draws it.
  CommandResult html = Cli({"campaign", "report", "c1", "--format", "html", "--practice", "c2"});
  EXPECT_EQ(html.code, 0) << html.output;
  EXPECT_THAT(html.output, HasSubstr(absl::StrCat(
                               "practice ", dropped["best"]["maxBatchSize"].get<int64_t>(), "<")));
  CommandResult json = Cli({"campaign", "report", "c1", "--format", "json", "--practice", "c2"});
  EXPECT_EQ(json.code, 1) << json.output;
  EXPECT_THAT(json.output, HasSubstr("--practice c2: "));
  EXPECT_THAT(json.output, HasSubstr("needs --format html, not json"));
}

TEST_F(AfterSearchE2e, RateSearchReusesTheRunningDaemon) {
  StartNodes({kRateScale});
  const std::string config_before = Host("node-1").config_json;
  nlohmann::json m = Run(R"(name: rates
models: [{name: LLaMa3-8B}]
search: {strategy: practice, range: [50, 100], initial: 50, tolerance: 0.5}
client: {request_count: 120, max_output_len: 64, task_kind: text}
rate_search: {factor: 2, max_runs: 5, concurrency: 1000}
)");
  if (!SearchAnswered(m)) {
    EXPECT_EQ(Host("node-1").config_json, config_before);
    return;
  }
  std::set<int> search_pids;
  size_t search_runs = 0;
  std::vector<int> rate_pids;
  std::vector<double> rates;
  for (const auto& t : m["trials"]) {
    ASSERT_EQ(t["status"], "ok") << t.dump();
    ASSERT_TRUE(t.contains("daemonPid")) << t.dump();
    if (t["rateSearch"].get<bool>()) {
      rate_pids.push_back(t["daemonPid"].get<int>());
      // A flagged run is made up at the same rate
      // (EvaluateRateSearch.MakesUpAFlaggedRunAtTheSameRate).
      const double rate = t["requestRate"].get<double>();
      if (rates.empty() || rate != rates.back()) rates.push_back(rate);
      EXPECT_EQ(t["concurrency"], 1000);
      EXPECT_EQ(t["maxBatchSize"], m["best"]["maxBatchSize"]);
    } else {
      search_pids.insert(t["daemonPid"].get<int>());
      ++search_runs;
    }
  }
  const auto& r = m["rate_search"];
  EXPECT_TRUE(r["done"].get<bool>()) << r.dump(2);
  // On a machine whose CPUs other work takes (ctest -j), crest-bench can
  // fall behind its send schedule: the trust check then flags that run
  // client_bound, the next attempt at that rate makes it up, and when every
  // attempt was flagged the rate search ends there, which is the right end
  // too (trial_trust.h). Otherwise it ends when the rate stops rising.
  const std::string reason = r["reason"].get<std::string>();
  const bool client_bound = absl::StrContains(reason, "was flagged (client_bound)");
  EXPECT_TRUE(client_bound || absl::StrContains(reason, "stopped rising")) << m.dump(1);
  // Each search run restarted the daemon; the rate runs changed only the
  // client, so one daemon, started once, served all of them (two rates at
  // least, unless every run at the first was flagged and ended the search).
  EXPECT_EQ(search_pids.size(), search_runs);
  EXPECT_GE(search_runs, 2u);
  ASSERT_GE(rates.size(), client_bound ? 1u : 2u) << m.dump(2);
  for (int pid : rate_pids) EXPECT_EQ(pid, rate_pids.front());
  EXPECT_EQ(search_pids.count(rate_pids.front()), 0u);
  for (size_t i = 1; i < rates.size(); ++i) EXPECT_NEAR(rates[i], rates[i - 1] * 2, 1e-6);
  // The curve: rises beyond the noise up to the best rate, then no more.
  ASSERT_EQ(r["curve"].size(), rates.size());
  const auto& curve = r["curve"];
  if (!client_bound) {
    EXPECT_TRUE(curve[curve.size() - 2]["rises"].get<bool>() || curve.size() == 2) << r.dump(2);
    EXPECT_FALSE(curve.back()["rises"].get<bool>());
    EXPECT_DOUBLE_EQ(r["bestRate"].get<double>(),
                     curve[curve.size() - 2]["requestRate"].get<double>());
  }
  for (const auto& p : curve) EXPECT_EQ(p["daemonPid"].get<int>(), rate_pids.front());
  // Every rate run is in the curve: as the rate's figure or as a flagged
  // run it did not count.
  size_t counted = 0;
  for (const auto& p : curve) {
    const size_t flagged = p.value("flaggedRuns", 0u);
    counted += p["status"] == "flagged" ? flagged : 1 + flagged;
  }
  EXPECT_EQ(counted, rate_pids.size()) << r.dump(2);
  CommandResult table = Cli({"campaign", "report", "c1", "--format", "table"});
  EXPECT_THAT(table.output, HasSubstr("rate search at maxBatchSize"));
  if (!r["bestRate"].is_null()) {
    EXPECT_THAT(table.output, HasSubstr("<== best rate"));
  }
  // The daemon was stopped after the last rate, and config.json put back.
  EXPECT_EQ(Host("node-1").config_json, config_before);
}

}  // namespace
}  // namespace crest::e2e
