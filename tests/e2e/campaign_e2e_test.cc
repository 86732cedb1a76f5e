// End to end: a real crest-controller and real crest-agents (each running its
// own mindie-sim) on loopback with mutual TLS from a throwaway CA, driven by
// the real `crest` CLI. Covers a full campaign, controller SIGKILL + resume,
// agent SIGKILL mid-trial + retry elsewhere, and bad specs / bad flags (the
// select-batch calibration and the rate search: after_search_e2e_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

using CampaignE2e = CampaignFixture;

TEST_F(CampaignE2e, CampaignOverThreeAgentsProducesTheReport) {
  std::string controller = StartController(dir_.File("ctl"));
  StartAgent("node-1", "LLaMa3-8B", controller);
  StartAgent("node-2", "LLaMa3-8B", controller);
  StartAgent("node-3", "LLaMa2-13B", controller);
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("agent ", n, " registered"), kStartup).ok());
  }
  std::string id = Submit(R"(name: e2e
models:
  - {name: LLaMa3-8B, nodes: [node-1, node-2], parallel: 2}
  - {name: LLaMa2-13B, selector: {model: LLaMa2-13B}}
search: {strategy: practice, max_trials: 3, tolerance: 0.5}
client: {request_count: 1100, max_output_len: 64}
host: {governor: performance, thp: always}
)");
  ASSERT_EQ(id, "c1");
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("campaign c1: succeeded"));
  EXPECT_THAT(watch.output, HasSubstr("LLaMa3-8B"));

  nlohmann::json report = Report(id);
  EXPECT_EQ(report["id"], "c1");
  EXPECT_EQ(report["state"], "succeeded");
  const auto& llama3 = Model(report, "LLaMa3-8B");
  // Auto range from npuBlockNum 2176 with MaxOutputLen 64: start floor(2176 / 3) = 725;
  // the ladder's three points (max_trials 3), each measured once: a run
  // flagged on a busy machine is made up by the point's next repeat.
  EXPECT_THAT(MeasuredPoints(llama3), ::testing::ElementsAre(725, 800, 900)) << llama3.dump(2);
  std::set<std::string> nodes;
  for (const auto& t : llama3["trials"]) {
    EXPECT_EQ(t["status"], "ok") << t.dump();
    EXPECT_EQ(t["npuBlockNum"], 2176);
    EXPECT_EQ(t["maxPrefillBatchSize"], t["maxBatchSize"].get<int64_t>() / 2);
    EXPECT_GT(t["GenerateSpeed"].get<double>(), 0);
    EXPECT_GT(t["FirstTokenTime"].get<double>(), 0);
    EXPECT_FALSE(t["started"].get<std::string>().empty());
    nodes.insert(t["node"]);
  }
  EXPECT_THAT(nodes, ::testing::IsSubsetOf({"node-1", "node-2"}));
  EXPECT_FALSE(llama3["best"].is_null());
  EXPECT_GT(llama3["best"]["GenerateSpeed"].get<double>(), 0);
  const auto& llama2 = Model(report, "LLaMa2-13B");
  ASSERT_FALSE(llama2["trials"].empty());
  for (const auto& t : llama2["trials"]) EXPECT_EQ(t["node"], "node-3");
  // Every tuned node was restored at the end (the fake sysfs holds the old values again).
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    EXPECT_THAT(agent::testing::ReadFakeFile(
                    dir_.File(absl::StrCat(n, "/sys/kernel/mm/transparent_hugepage/enabled"))),
                ::testing::AnyOf("madvise", "always [madvise] never"))
        << n;
    EXPECT_EQ(agent::testing::ReadFakeFile(dir_.File(
                  absl::StrCat(n, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))),
              "powersave")
        << n;
  }
  EXPECT_THAT(controller_->output(), HasSubstr("host settings of node-1 restored"));
  CommandResult csv = Cli({"campaign", "report", id, "--format", "csv"});
  EXPECT_EQ(csv.code, 0);
  EXPECT_THAT(csv.output, HasSubstr("campaign,model,trial,node,status"));
  CommandResult table = Cli({"campaign", "report", id});
  EXPECT_THAT(table.output, HasSubstr("<== peak"));
  CommandResult status = Cli({"campaign", "status", id, "--output", "json"});
  EXPECT_EQ(nlohmann::json::parse(status.output, nullptr, false)["state"], "succeeded");
}

TEST_F(CampaignE2e, ControllerSigkillMidCampaignResumesWithoutLossOrDuplicates) {
  // Slower simulated time: the kill must land inside a trial (~1 s each).
  std::string a1 = StartAgent("node-1", "LLaMa3-8B", "", 40);
  std::string state = dir_.File("ctl");
  StartController(state, "node-1=" + a1);
  std::string id = Submit(R"(name: resume
models: [{name: LLaMa3-8B}]
search: {strategy: practice, range: [100, 400], initial: 100, tolerance: 0.5}
client: {request_count: 400, max_output_len: 64}
)");
  // Kill it while the first run at 200 runs (its start is logged after it is
  // recorded; it is the second trial unless a flagged run at 100 was made up).
  ASSERT_TRUE(
      controller_->WaitForLine("maxBatchSize 200 (repeat 0, attempt 1)", absl::Seconds(60)).ok())
      << controller_->output();
  controller_->Kill();
  controller_->Wait(absl::Seconds(10));
  StartController(state, "node-1=" + a1);
  ASSERT_TRUE(controller_->WaitForLine("resuming campaign c1", kStartup).ok());
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  std::vector<std::string> summary;
  std::vector<std::string> first_run_at_200;
  for (const auto& t : m["trials"]) {
    const std::string s =
        absl::StrCat(t["maxBatchSize"].get<int64_t>(), ":", t["status"].get<std::string>(), ":",
                     t["attempt"].get<int>());
    summary.push_back(s);
    if (t["maxBatchSize"] == 200 && t["repeat"] == 0) {
      first_run_at_200.push_back(s);
      if (t["status"] == "interrupted") {
        EXPECT_THAT(t["reason"].get<std::string>(), HasSubstr("controller restarted"));
      }
    }
  }
  // 100 ok before the kill (not re-run), 200 interrupted once and re-run once.
  ASSERT_FALSE(summary.empty());
  EXPECT_EQ(summary[0], "100:ok:1") << absl::StrJoin(summary, " ");
  EXPECT_THAT(first_run_at_200, ::testing::ElementsAre("200:interrupted:1", "200:ok:2"))
      << absl::StrJoin(summary, " ");
  EXPECT_THAT(MeasuredPoints(m), ::testing::Contains(100));
  for (const auto& [point, n] : OkPerPoint(m)) EXPECT_EQ(n, 1) << point;
  int interrupted = 0;
  for (const auto& t : m["trials"]) interrupted += t["status"] == "interrupted" ? 1 : 0;
  EXPECT_EQ(interrupted, 1);
}

TEST_F(CampaignE2e, AgentSigkillMidTrialIsRetriedOnAnotherNode) {
  std::string a1 = StartAgent("node-1", "LLaMa3-8B", "", 40);
  std::string a2 = StartAgent("node-2", "LLaMa3-8B", "", 40);
  StartController(dir_.File("ctl"), absl::StrCat("node-1=", a1, ",node-2=", a2));
  ASSERT_TRUE(controller_->WaitForLine("agent node-2 at", kStartup).ok());
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 at", kStartup).ok());
  std::string id = Submit(R"(name: lost
models: [{name: LLaMa3-8B, nodes: [node-1, node-2]}]
search: {strategy: practice, range: [100, 300], initial: 100, tolerance: 0.5}
client: {request_count: 400, max_output_len: 64}
)");
  ASSERT_TRUE(controller_
                  ->WaitForLine("trial c1-t1 maxBatchSize 100 (repeat 0, attempt 1) on node-1",
                                absl::Seconds(60))
                  .ok())
      << controller_->output();
  agents_["node-1"]->Kill();
  CommandResult watch = Watch(id);
  EXPECT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  EXPECT_EQ(report["state"], "succeeded");
  const auto& m = Model(report, "LLaMa3-8B");
  ASSERT_GE(m["trials"].size(), 2u);
  EXPECT_EQ(m["trials"][0]["node"], "node-1");
  EXPECT_EQ(m["trials"][0]["status"], "interrupted");
  EXPECT_THAT(m["trials"][0]["reason"].get<std::string>(), HasSubstr("node-1"));
  EXPECT_EQ(m["trials"][1]["node"], "node-2");
  EXPECT_EQ(m["trials"][1]["maxBatchSize"], 100);
  EXPECT_EQ(m["trials"][1]["status"], "ok");
  EXPECT_EQ(m["trials"][1]["attempt"], 2);
  for (size_t i = 1; i < m["trials"].size(); ++i) EXPECT_EQ(m["trials"][i]["node"], "node-2");
  for (const auto& [point, n] : OkPerPoint(m)) EXPECT_EQ(n, 1) << point;
  EXPECT_EQ(MeasuredPoints(m).size(), 3u);  // 100, 200, 300 each once
  CommandResult agents = Cli({"campaign", "agents", "--output", "json"});
  auto j = nlohmann::json::parse(agents.output, nullptr, false);
  ASSERT_TRUE(j.is_array()) << agents.output;
  for (const auto& a : j) {
    EXPECT_EQ(a["state"], a["node"] == "node-1" ? "lost" : "ready") << a.dump();
  }
}

TEST_F(CampaignE2e, AFleetSearchesOnOneNodeAndConfirmsTheAnswerOnTheOthers) {
  std::string a1 = StartAgent("node-1", "LLaMa3-8B", "", 40);
  std::string a2 = StartAgent("node-2", "LLaMa3-8B", "", 40);
  std::string a3 = StartAgent("node-3", "LLaMa3-8B", "", 40);
  StartController(dir_.File("ctl"), absl::StrCat("node-1=", a1, ",node-2=", a2, ",node-3=", a3));
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    ASSERT_TRUE(controller_->WaitForLine(absl::StrCat("agent ", n, " at"), kStartup).ok());
  }
  std::string id = Submit(R"(name: fleet
models: [{name: LLaMa3-8B, nodes: [node-1, node-2, node-3], parallel: 1, fleet: true}]
search: {strategy: practice, range: [100, 300], initial: 100, tolerance: 0.5}
client: {request_count: 400, max_output_len: 64}
)");
  CommandResult watch = Watch(id);
  ASSERT_EQ(watch.code, 0) << watch.output;
  nlohmann::json report = Report(id);
  const auto& m = Model(report, "LLaMa3-8B");
  ASSERT_FALSE(m["best"].is_null()) << m.dump(2);
  const int64_t best = m["best"]["maxBatchSize"];
  std::set<std::string> search_nodes, confirmed_on;
  for (const auto& t : m["trials"]) {
    if (t["confirmation"].get<bool>()) {
      EXPECT_EQ(t["maxBatchSize"], best) << t.dump();
      EXPECT_EQ(t["status"], "ok") << t.dump();
      confirmed_on.insert(t["node"].get<std::string>());
    } else {
      search_nodes.insert(t["node"].get<std::string>());
    }
  }
  // One node searched (parallel 1); each other node ran the answer once.
  ASSERT_EQ(search_nodes.size(), 1u) << m.dump(2);
  EXPECT_EQ(confirmed_on.size(), 2u) << m.dump(2);
  EXPECT_EQ(confirmed_on.count(*search_nodes.begin()), 0u);
  ASSERT_EQ(m["fleet"].size(), 3u) << m.dump(2);
  EXPECT_EQ(m["fleet"][0]["node"], *search_nodes.begin());
  EXPECT_TRUE(m["fleet"][0]["searched"].get<bool>());
  for (const auto& f : m["fleet"]) {
    EXPECT_GT(f["GenerateSpeed"].get<double>(), 0) << f.dump();
    EXPECT_EQ(f["runs"], 1) << f.dump();
    // Alike simulated nodes: the same figure within the real-time noise.
    EXPECT_NEAR(f["ratio"].get<double>(), 1, 0.3) << f.dump();
  }
  CommandResult table = Cli({"campaign", "report", id});
  EXPECT_THAT(table.output, HasSubstr("fleet, at the final configuration:")) << table.output;
  EXPECT_THAT(table.output, HasSubstr("(confirmed)")) << table.output;
}

TEST_F(CampaignE2e, BadSpecsAndBadFlagsGetClearErrors) {
  StartController(dir_.File("ctl"));
  std::string bad = dir_.File("bad.yaml");
  ASSERT_TRUE(WriteFileAtomically(bad, R"(name: bad
models:
  - name: LLaMa3-8B
    nodes: node-1
search: {stratgy: step, range: [500, 100]}
client: {mode: rate}
)")
                  .ok());
  CommandResult r = Cli({"campaign", "submit", "-f", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("campaign spec has 4 problems"));
  EXPECT_THAT(r.output, HasSubstr("bad.yaml:4: models[0].nodes: expected a list of node names"));
  EXPECT_THAT(r.output, HasSubstr("bad.yaml:5: search.stratgy: unknown key 'stratgy'; did you "
                                  "mean 'strategy'?"));
  EXPECT_THAT(r.output, HasSubstr("bad.yaml:5: search.range: lo 500 is above hi 100"));
  EXPECT_THAT(r.output, HasSubstr("client.request_rate: required in rate mode"));
  EXPECT_THAT(Cli({"campaign", "list"}).output, ::testing::Not(HasSubstr("bad")));

  // A range the requests cannot fill is refused; few requests per client
  // are allowed and said (the practice's GSM8K run: 1319 at Concurrency 1000).
  std::string unfillable = dir_.File("unfillable.yaml");
  ASSERT_TRUE(WriteFileAtomically(unfillable, R"(name: new-user
models: [{name: LLaMa3-8B}]
search: {range: [100, 1000]}
client: {request_count: 600, max_output_len: 256}
)")
                  .ok());
  r = Cli({"campaign", "submit", "-f", unfillable});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("unfillable.yaml:3: search.range: model LLaMa3-8B: range "
                                  "[100, 1000] runs up to Concurrency 999"));
  EXPECT_THAT(r.output, HasSubstr("can never fill above maxBatchSize 601"));
  std::string practice = dir_.File("practice.yaml");
  ASSERT_TRUE(WriteFileAtomically(practice, R"(name: practice
models: [{name: LLaMa3-8B}]
search: {range: [435, 1001], initial: 435}
)")
                  .ok());
  r = Cli({"campaign", "submit", "-f", practice});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warning: client.request_count: 1319 requests per run for up "
                                  "to 1000 clients (1.32 per client at maxBatchSize 1001"));
  EXPECT_THAT(Report("c1")["warnings"][0].get<std::string>(), HasSubstr("1.32 per client"));

  r = Cli({"campaign", "submit", "-f", dir_.File("missing.yaml")});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("missing.yaml"));
  r = Cli({"campaign", "status", "c42"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no campaign 'c42'"));
  r = Cli({"campaign", "report", "c1", "--format", "xml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--format"));
  r = RunBinary("crest", {"campaign", "status", "c1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--controller is required"));
  // The controller refuses a client without a certificate from its CA.
  r = RunBinary("crest", {"campaign", "list", "--controller", controller_address_, "--insecure"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("cannot reach the controller"));
  r = RunBinary("crest-controller", {"--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--state-dir is required"));
  r = RunBinary("crest-controller",
                {"--listen", "127.0.0.1:0", "--state-dir", dir_.File("x"), "--agents", "a=b"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--agents: 'a=b': address must be HOST:PORT"));
  r = RunBinary("crest-controller", {"--listen", "127.0.0.1:0", "--state-dir", dir_.File("z"),
                                     "--sim-time-scale", "node-1=fast"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--sim-time-scale: 'node-1=fast': expected K or NAME=K"));
  r = RunBinary("crest-controller", {"--listen", "127.0.0.1:0", "--state-dir", dir_.File("z"),
                                     "--identity-from", "ou"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("'ou' is neither 'cn' nor 'san'"));
  // A certificate of the CA that is not an operator's: refused, saying why.
  auto node_cert = ca_->Issue("node-9");
  ASSERT_TRUE(node_cert.ok());
  std::vector<std::string> as_node = {"campaign", "list", "--controller", controller_address_};
  for (auto& a : Tls(*node_cert)) as_node.push_back(a);
  r = RunBinary("crest", as_node);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("crest.v1.Controller/ListCampaigns: caller CN \"node-9\" is not "
                                  "allowed; expected operator CN \"crest-cli\""));
  r = RunBinary("crest-controller",
                {"--listen", "10.1.2.3:0", "--state-dir", dir_.File("y"), "--insecure"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--insecure is allowed only on loopback"));
}

}  // namespace
}  // namespace crest::e2e
