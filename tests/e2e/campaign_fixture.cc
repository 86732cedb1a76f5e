#include "tests/e2e/campaign_fixture.h"

#include <gmock/gmock.h>

#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"

namespace crest::e2e {

void CampaignFixture::SetUp() {
  BecomeSubreaper();
  auto ca = crest::testing::TestCa::Create(dir_.path(), "e2e");
  ASSERT_TRUE(ca.ok()) << ca.status();
  ca_ = std::make_unique<crest::testing::TestCa>(*ca);
  auto controller = ca_->Issue("crest-controller");
  auto cli = ca_->Issue("crest-cli");
  ASSERT_TRUE(controller.ok() && cli.ok());
  controller_cert_ = *controller;
  cli_cert_ = *cli;
}

void CampaignFixture::TearDown() {
  // Agents stop their daemons on SIGTERM; whatever is left is killed below.
  for (auto& [name, agent] : agents_) agent->Terminate(absl::Seconds(10));
  processes_.clear();
  controller_.reset();
  agents_.clear();
  KillAllChildren();
}

std::vector<std::string> CampaignFixture::Tls(const crest::testing::CertFiles& c) const {
  return {"--tls-cert", c.cert, "--tls-key", c.key, "--tls-ca", ca_->ca_file()};
}

std::string CampaignFixture::StartAgent(const std::string& name, const std::string& model,
                                        const std::string& controller, double time_scale) {
  AgentOptions options;
  options.controller = controller;
  options.time_scale = time_scale;
  return StartAgentWith(name, model, options);
}

std::string CampaignFixture::StartAgentWith(const std::string& name, const std::string& model,
                                            const AgentOptions& options) {
  auto cert = ca_->Issue(name);
  EXPECT_TRUE(cert.ok());
  std::string root = dir_.File(name);
  crest::agent::testing::WriteFakeSysfs(root + "/sys", options.sysfs);
  std::string config = root + "/agent.yaml";
  std::string sim_args;
  for (const std::string& a : options.sim_args) {
    absl::StrAppend(&sim_args, sim_args.empty() ? "" : ", ", "\"", a, "\"");
  }
  const std::string daemon =
      options.daemon_section.empty()
          ? absl::StrCat("sim: {model: ", model, ", time_scale: ", options.time_scale,
                         ", seed: 7, args: [", sim_args, "]}\n")
          : options.daemon_section;
  EXPECT_TRUE(WriteFileAtomically(config, absl::StrCat(daemon, "labels: {model: ", model, "}\n",
                                                       options.extra_yaml))
                  .ok());
  std::vector<std::string> argv;
  if (!options.wrapper.empty()) {
    argv.push_back(options.wrapper);
    argv.insert(argv.end(), options.wrapper_args.begin(), options.wrapper_args.end());
  }
  argv.push_back(BinDir() + "/crest-agent");
  for (const std::string& a :
       {std::string("--listen"), std::string("127.0.0.1:0"), std::string("--config"), config,
        std::string("--state-dir"), root + "/state", std::string("--sysfs-root"), root + "/sys",
        std::string("--node-name"), name}) {
    argv.push_back(a);
  }
  for (auto& a : Tls(*cert)) argv.push_back(a);
  if (!options.controller.empty()) {
    argv.emplace_back("--controller");
    argv.push_back(options.controller);
  }
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  auto p = Process::StartCommand(argv, name, options.env);
  EXPECT_TRUE(p.ok()) << p.status();
  auto port = (*p)->WaitForNumberAfter("crest-agent: listening on 127.0.0.1:", kStartup);
  EXPECT_TRUE(port.ok()) << port.status();
  agents_[name] = std::move(*p);
  // A restart comes back on the same port (static --agents entries name it).
  for (std::string& a : argv) {
    if (a == "127.0.0.1:0") a = absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
  }
  agent_argv_[name] = argv;
  agent_env_[name] = options.env;
  return absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
}

std::string CampaignFixture::RestartAgent(const std::string& name) {
  if (auto it = agents_.find(name); it != agents_.end()) {
    it->second->Kill();
    it->second->Wait(absl::Seconds(10));
  }
  std::map<std::string, std::string> env = agent_env_[name];
  env.erase("CREST_TESTING_HOLD_BEFORE_PID_RECORD");  // the hook holds one start only
  auto p = Process::StartCommand(agent_argv_[name], name + "-again", env);
  EXPECT_TRUE(p.ok()) << p.status();
  auto port = (*p)->WaitForNumberAfter("crest-agent: listening on 127.0.0.1:", kStartup);
  EXPECT_TRUE(port.ok()) << port.status();
  agents_[name] = std::move(*p);
  return absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
}

std::string CampaignFixture::StartController(const std::string& state_dir,
                                             const std::string& agents,
                                             const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"--listen", "127.0.0.1:0",          "--state-dir",
                                   state_dir,  "--heartbeat-interval", "0.5"};
  if (!agents.empty()) {
    args.emplace_back("--agents");
    args.push_back(agents);
  }
  for (auto& a : Tls(controller_cert_)) args.push_back(a);
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto p = Process::Start("crest-controller", args, "controller");
  EXPECT_TRUE(p.ok()) << p.status();
  auto port = (*p)->WaitForNumberAfter("listening on port ", kStartup);
  EXPECT_TRUE(port.ok()) << port.status();
  controller_ = std::move(*p);
  controller_address_ = absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
  return controller_address_;
}

CommandResult CampaignFixture::Cli(std::vector<std::string> args, absl::Duration timeout) {
  args.emplace_back("--controller");
  args.push_back(controller_address_);
  for (auto& a : Tls(cli_cert_)) args.push_back(a);
  return RunBinary("crest", args, timeout);
}

std::string CampaignFixture::Submit(const std::string& yaml) {
  std::string file = dir_.File(absl::StrCat("spec", ++specs_, ".yaml"));
  EXPECT_TRUE(WriteFileAtomically(file, yaml).ok());
  CommandResult r = Cli({"campaign", "submit", "-f", file, "--output", "json"});
  EXPECT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("id")) << r.output;
  return j.is_object() ? j.value("id", "") : "";
}

CommandResult CampaignFixture::Watch(const std::string& id) {
  return Cli({"campaign", "watch", id}, absl::Seconds(120));
}

nlohmann::json CampaignFixture::Report(const std::string& id) {
  std::string file = dir_.File(id + "-report.json");
  CommandResult r = Cli({"campaign", "report", id, "--format", "json", "-o", file});
  EXPECT_EQ(r.code, 0) << r.output;
  auto text = ReadFileToString(file);
  EXPECT_TRUE(text.ok());
  return nlohmann::json::parse(text.ok() ? *text : "{}", nullptr, false);
}

const nlohmann::json& CampaignFixture::Model(const nlohmann::json& report,
                                             const std::string& name) {
  for (const auto& m : report["models"]) {
    if (m["model"] == name) return m;
  }
  static const nlohmann::json null_json;
  ADD_FAILURE() << "no model " << name << " in " << report.dump();
  return null_json;
}

std::map<int64_t, int> CampaignFixture::OkPerPoint(const nlohmann::json& model) {
  std::map<int64_t, int> ok;
  for (const auto& t : model["trials"]) {
    if (t["status"] == "ok" && !t["calibration"].get<bool>() && !t.value("rateSearch", false)) {
      ++ok[t["maxBatchSize"].get<int64_t>() * 1000 + t["repeat"].get<int64_t>()];
    }
  }
  return ok;
}

bool Flagged(const nlohmann::json& trial) {
  return trial.contains("flags") && !trial["flags"].empty();
}

std::set<int64_t> CampaignFixture::MeasuredPoints(const nlohmann::json& model, int max_retries) {
  // point -> repeat -> flagged, of its ok search runs.
  std::map<int64_t, std::map<int64_t, bool>> runs;
  for (const auto& t : model["trials"]) {
    if (t["status"] != "ok" || t["calibration"].get<bool>() || t.value("rateSearch", false)) {
      continue;
    }
    runs[t["maxBatchSize"].get<int64_t>()][t["repeat"].get<int64_t>()] = Flagged(t);
  }
  std::set<int64_t> points;
  for (const auto& [point, by_repeat] : runs) {
    points.insert(point);
    int64_t expected_repeat = 0;
    for (const auto& [repeat, flagged] : by_repeat) {
      EXPECT_EQ(repeat, expected_repeat++) << "point " << point << ": a repeat is missing";
      const bool last = repeat + 1 == static_cast<int64_t>(by_repeat.size());
      EXPECT_TRUE(flagged || last)
          << "point " << point << ": trusted run " << repeat << " was run again";
      EXPECT_TRUE(!flagged || last || repeat < max_retries)
          << "point " << point << ": flagged run " << repeat << " made up past max_retries";
    }
  }
  return points;
}

HostState CampaignFixture::Host(const std::string& name) {
  using crest::agent::testing::ReadFakeFile;
  HostState h;
  std::string sys = dir_.File(name + "/sys");
  for (int cpu = 0;; ++cpu) {
    std::string gov = ReadFakeFile(
        absl::StrCat(sys, "/devices/system/cpu/cpu", cpu, "/cpufreq/scaling_governor"));
    if (gov.empty()) break;
    h.governors.push_back(gov);
  }
  // The kernel shows "always [madvise] never"; the fake tree keeps what was
  // written ("madvise"): compare the mode in effect.
  h.thp = ReadFakeFile(sys + "/kernel/mm/transparent_hugepage/enabled");
  if (size_t open = h.thp.find('['); open != std::string::npos) {
    h.thp = h.thp.substr(open + 1, h.thp.find(']') - open - 1);
  }
  auto config = ReadFileToString(dir_.File(name + "/state/sim/conf/config.json"));
  h.config_json = config.ok() ? *config : "(missing)";
  return h;
}

void CampaignFixture::ExpectNothingLostOrCountedTwice(const nlohmann::json& model,
                                                      const nlohmann::json& before) {
  std::set<std::string> ids;
  // (point, repeat) -> attempts seen, in order.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int, std::string>>> attempts;
  for (const auto& t : model["trials"]) {
    EXPECT_TRUE(ids.insert(t["id"].get<std::string>()).second) << "trial twice: " << t.dump();
    if (t["calibration"].get<bool>() || t.value("rateSearch", false)) continue;
    attempts[{t["maxBatchSize"].get<int64_t>(), t["repeat"].get<int64_t>()}].emplace_back(
        t["attempt"].get<int>(), t["status"].get<std::string>());
  }
  for (const auto& [point, list] : attempts) {
    int ok = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      ok += list[i].second == "ok" ? 1 : 0;
      EXPECT_NE(list[i].second, "running") << "point " << point.first << " left running";
      if (list[i].second == "interrupted") {
        // Accounted: a later attempt of the same point follows, or the
        // retries ran out and the point counts as failed.
        bool followed = i + 1 < list.size() && list[i + 1].first > list[i].first;
        EXPECT_TRUE(followed || list[i].first > 1)
            << "interrupted attempt " << list[i].first << " of point " << point.first
            << " was not re-run";
      }
    }
    EXPECT_LE(ok, 1) << "point " << point.first << " repeat " << point.second
                     << " counted ok twice";
  }
  if (before.is_null()) return;
  std::map<std::string, nlohmann::json> now;
  for (const auto& t : model["trials"]) now[t["id"].get<std::string>()] = t;
  for (const auto& t : before["trials"]) {
    std::string id = t["id"].get<std::string>();
    if (t["status"] == "running") continue;  // not recorded as final yet
    auto it = now.find(id);
    if (it == now.end()) {
      ADD_FAILURE() << "recorded trial " << id << " lost";
      continue;
    }
    EXPECT_EQ(it->second["status"], t["status"]) << id;
    EXPECT_EQ(it->second["maxBatchSize"], t["maxBatchSize"]) << id;
    EXPECT_EQ(it->second.value("GenerateSpeed", 0.0), t.value("GenerateSpeed", 0.0)) << id;
  }
}

}  // namespace crest::e2e
