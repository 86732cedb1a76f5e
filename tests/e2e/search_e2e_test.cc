// End to end, the default search strategy on real agents and mindie-sim:
// the point it finds against the true peak of the same profile (mindie-sim's
// noise-free virtual-time benchmark over every point of the range), its runs
// against grid's, and a controller SIGKILL mid-search that must end at the
// same answer with no trial lost or repeated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "common/paths.h"
#include "sim/profile.h"
#include "sim/simulate.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

// LLaMa2-13B (KV knee near 90 sequences), 1000 GSM8K questions capped at 256
// tokens, one reply each (text), concurrency maxBatchSize - 1. The simulator
// runs without its run-to-run noise so that the truth below is the truth of
// every run; search-bench measures the strategies under noise. 300 questions
// ran in 3 waves near the knee, whose last one filled the batch only at some
// sizes: a curve with a 6% step between neighbours that no search should be
// judged on.
constexpr double kSearchTimeScale = 40;
constexpr char kModel[] = "LLaMa2-13B";
constexpr int kRequests = 1000;
constexpr int kMaxOutput = 256;
constexpr int64_t kStep = 5;

AgentOptions SearchAgent() {
  AgentOptions o;
  o.time_scale = kSearchTimeScale;
  o.sim_args = {"--noise-cv", "0"};
  return o;
}

// The controller divides results by the node's time scale (a trusted flag).
std::vector<std::string> TimeScaleFlags() {
  return {"--sim-time-scale", absl::StrCat("node-1=", kSearchTimeScale)};
}

std::string SearchSpec(const std::string& name) {
  return absl::StrCat("name: ", name, "\nmodels: [{name: ", kModel, "}]\nsearch: {step: ", kStep,
                      "}\nclient: {request_count: ", kRequests, ", max_output_len: ", kMaxOutput,
                      ", task_kind: text}\n");
}

// GenerateSpeed of maxBatchSize b in mindie-sim's noise-free virtual time.
class Truth {
 public:
  explicit Truth(int64_t npu_block_num) : blocks_(npu_block_num) {
    auto share = ShareDir();
    EXPECT_TRUE(share.ok()) << share.status();
    auto profile = sim::FindProfile(*share + "/profiles", "", kModel);
    EXPECT_TRUE(profile.ok()) << profile.status();
    profile_ = *profile;
    std::ifstream in(*share + "/datasets/gsm8k/test.jsonl");
    const auto& dist = profile_.workloads.at(profile_.default_workload);
    for (std::string line; std::getline(in, line) && requests_.size() < kRequests;) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("question")) continue;
      const std::string q = j["question"];
      requests_.push_back({sim::CountPromptTokens(q, profile_.prompt_template_tokens),
                           std::min(sim::NaturalOutputLength(dist, q), kMaxOutput)});
    }
  }
  double At(int64_t b) const {
    sim::SchedulerConfig c;
    c.max_batch_size = static_cast<int>(b);
    c.max_prefill_batch_size = std::max<int>(1, static_cast<int>(b / 2));
    c.max_prefill_tokens = 8192;
    c.block_size = 128;
    c.num_blocks = blocks_ - 1;
    return sim::SimulateWorkload(c, profile_.TimingAt(profile_.reference_world_size), requests_,
                                 static_cast<int>(std::max<int64_t>(1, b - 1)), 0, 1)
        .generate_speed;
  }

 private:
  int64_t blocks_;
  sim::Profile profile_;
  std::vector<sim::WorkloadRequest> requests_;
};

// lo, the multiples of the step inside the range, hi: what `grid` runs.
size_t GridRuns(int64_t lo, int64_t hi) {
  size_t n = 1;
  for (int64_t p = (lo / kStep + 1) * kStep; p < hi; p += kStep) ++n;
  return n + (hi > lo ? 1 : 0);
}

// "point/rREPEAT:status" of every trial, in order: what two searches that
// decided alike have in common.
std::vector<std::string> Summary(const nlohmann::json& model) {
  std::vector<std::string> out;
  for (const auto& t : model["trials"]) {
    out.push_back(absl::StrCat(t["maxBatchSize"].get<int64_t>(), "/r", t["repeat"].get<int>(), ":",
                               t["status"].get<std::string>()));
  }
  return out;
}

// The summary with what each run measured ("...:GenerateSpeed[:pPREEMPTIONS]"),
// for failure messages.
std::string Detail(const nlohmann::json& model) {
  std::vector<std::string> out = Summary(model);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& t = model["trials"][i];
    absl::StrAppend(&out[i], ":", t["GenerateSpeed"].get<double>());
    if (t.contains("preemptions")) absl::StrAppend(&out[i], ":p", t["preemptions"].get<int64_t>());
  }
  return absl::StrJoin(out, " ");
}

class SearchE2e : public CampaignFixture {};

TEST_F(SearchE2e, DefaultStrategyFindsThePeakInFewerRunsThanGrid) {
  std::string a1 = StartAgentWith("node-1", kModel, SearchAgent());
  StartController(dir_.File("ctl"), "node-1=" + a1, TimeScaleFlags());
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 at", kStartup).ok());
  std::string id = Submit(SearchSpec("peak"));
  CommandResult watch = Cli({"campaign", "watch", id}, absl::Seconds(300));
  ASSERT_EQ(watch.code, 0) << watch.output << controller_->output();
  nlohmann::json report = Report(id);
  ASSERT_EQ(report["state"], "succeeded") << report.dump(2);
  const auto& m = Model(report, kModel);
  EXPECT_EQ(m["strategy"], "knee");
  EXPECT_GE(m["rounds"].get<int>(), 1);
  ASSERT_FALSE(m["best"].is_null());
  const int64_t found = m["best"]["maxBatchSize"];
  EXPECT_EQ(m["best"]["maxPrefillBatchSize"], found / 2);
  EXPECT_GT(m["best"]["GenerateSpeed"].get<double>(), 0);
  // The answer was confirmed by a second run, which measured the noise.
  EXPECT_GE(m["best"]["runs"].get<int>(), 2);
  EXPECT_TRUE(m["best"]["noise"].is_number()) << m["best"].dump();
  const int64_t blocks = m["trials"][0]["npuBlockNum"];
  ASSERT_GT(blocks, 0);
  // The range the controller searched: the auto formulas (docs/search.md).
  const int64_t in_blocks = (186 + 127) / 128;
  const int64_t lo = blocks / (in_blocks + (kMaxOutput + 127) / 128);
  const int64_t hi = blocks / in_blocks;
  Truth truth(blocks);
  double peak = 0;
  int64_t peak_at = 0;
  for (int64_t b = lo; b <= hi; ++b) {
    const double v = truth.At(b);
    if (v > peak) {
      peak = v;
      peak_at = b;
    }
  }
  const double share = truth.At(found) / peak;
  std::string curve;  // the truth beside what was measured, for the failure message
  for (int64_t b = std::max(lo, peak_at - 12); b <= std::min(hi, peak_at + 24); ++b) {
    absl::StrAppend(&curve, " ", b, ":", static_cast<int>(truth.At(b)));
  }
  EXPECT_LT(m["trials"].size(), GridRuns(lo, hi)) << absl::StrJoin(Summary(m), " ");
  bool signal = false;
  for (const auto& t : m["trials"]) signal |= t.contains("preemptions");

  std::printf(
      "knee: found %lld (%.2f%% of the true peak at %lld) in %zu runs, %d rounds; "
      "grid at step %lld: %zu runs\n",
      static_cast<long long>(found), 100 * share, static_cast<long long>(peak_at),
      m["trials"].size(), m["rounds"].get<int>(), static_cast<long long>(kStep), GridRuns(lo, hi));
  // On throughput alone, real-time runs of 300 requests are too coarse a
  // view of this curve (measured 2026-12-03: 93.6% of the peak); the knee
  // needs the daemon's preemption count, which the agent reads from
  // /metrics (issue 18 item 1).
  if (!signal) GTEST_SKIP() << "no preemption count in the trials: accuracy not asserted";
  EXPECT_GE(share, 0.985) << "found " << found << ", true peak at " << peak_at << "; trials "
                          << Detail(m) << "; truth" << curve;
}

TEST_F(SearchE2e, ControllerSigkillMidSearchEndsAtTheSameAnswer) {
  std::string a1 = StartAgentWith("node-1", kModel, SearchAgent());
  std::string state = dir_.File("ctl");
  StartController(state, "node-1=" + a1, TimeScaleFlags());
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 at", kStartup).ok());
  // Uninterrupted, for reference.
  std::string ref_id = Submit(SearchSpec("reference"));
  ASSERT_EQ(Cli({"campaign", "watch", ref_id}, absl::Seconds(300)).code, 0)
      << controller_->output();
  const nlohmann::json reference = Model(Report(ref_id), kModel);
  ASSERT_GE(reference["trials"].size(), 4u);
  // The same search, with the controller killed while its third trial runs.
  std::string id = Submit(SearchSpec("killed"));
  ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("trial ", id, "-t3 "), absl::Seconds(120)).ok())
      << controller_->output();
  controller_->Kill();
  controller_->Wait(absl::Seconds(10));
  StartController(state, "node-1=" + a1, TimeScaleFlags());
  ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("resuming campaign ", id), kStartup).ok());
  ASSERT_EQ(Cli({"campaign", "watch", id}, absl::Seconds(300)).code, 0) << controller_->output();
  const nlohmann::json resumed = Model(Report(id), kModel);
  // The same answer, up to what a run can tell apart: the sim's results are
  // noise-free but measured in real time (~0.3% jitter), and past this
  // profile's knee throughput is flat within 0.5% from 103 to 107, so the
  // re-run of the interrupted trial may tip the search to another point of
  // that plateau (measured 2026-12-03: 103 vs 107, 731 vs 727 token/s). The
  // answer's throughput must agree within the 1.5%.
  const double want = reference["best"]["GenerateSpeed"];
  const double got = resumed["best"]["GenerateSpeed"];
  EXPECT_NEAR(got / want, 1.0, 0.015) << Detail(resumed) << " vs " << Detail(reference);
  // No run lost or repeated: the one the kill interrupted was recorded as
  // such and run again (as attempt 2), every other (point, repeat) ran once.
  std::map<std::string, int> ok;
  int interrupted = 0;
  for (size_t i = 0; i < resumed["trials"].size(); ++i) {
    const auto& t = resumed["trials"][i];
    const std::string key =
        absl::StrCat(t["maxBatchSize"].get<int64_t>(), "/r", t["repeat"].get<int>());
    if (t["status"] == "interrupted") {
      ++interrupted;
      ASSERT_LT(i + 1, resumed["trials"].size());
      const auto& rerun = resumed["trials"][i + 1];
      EXPECT_EQ(rerun["maxBatchSize"], t["maxBatchSize"]);
      EXPECT_EQ(rerun["attempt"], 2);
      EXPECT_THAT(t["reason"].get<std::string>(), HasSubstr("controller restarted"));
    } else {
      EXPECT_EQ(t["status"], "ok") << t.dump();
      EXPECT_EQ(++ok[key], 1) << key;
    }
  }
  EXPECT_EQ(interrupted, 1) << absl::StrJoin(Summary(resumed), " ");
  // The search went the reference's way: the same first two points, in
  // order (a flagged run's make-up, on a busy machine, is its point again).
  auto first_points = [](const nlohmann::json& m) {
    std::vector<int64_t> points;
    for (const auto& t : m["trials"]) {
      const int64_t p = t["maxBatchSize"];
      if (points.empty() || points.back() != p) points.push_back(p);
      if (points.size() == 2) break;
    }
    return points;
  };
  EXPECT_EQ(first_points(resumed), first_points(reference))
      << absl::StrJoin(Summary(resumed), " ") << " vs " << absl::StrJoin(Summary(reference), " ");
}

}  // namespace
}  // namespace crest::e2e
