// The fixture of the end-to-end campaign tests: a throwaway CA, real
// crest-controller and crest-agent processes (each agent with its own
// mindie-sim and fake sysfs) on loopback, and the `crest` CLI to drive them.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/e2e_harness.h"

namespace crest::e2e {

inline constexpr absl::Duration kStartup = absl::Seconds(20);
// Simulated time runs this much faster than real time.
inline constexpr double kTimeScale = 200;

class CampaignE2e : public ::testing::Test {
 protected:
  void SetUp() override {
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

  void TearDown() override {
    // Agents stop their daemons on SIGTERM; whatever is left is killed below.
    for (auto& [name, agent] : agents_) agent->Terminate(absl::Seconds(10));
    processes_.clear();
    controller_.reset();
    agents_.clear();
    KillAllChildren();
  }

  std::vector<std::string> Tls(const crest::testing::CertFiles& c) const {
    return {"--tls-cert", c.cert, "--tls-key", c.key, "--tls-ca", ca_->ca_file()};
  }

  // Starts an agent serving `model` from its own mindie-sim and fake sysfs;
  // registers with the controller when `controller` is set. `sim_args`: more
  // mindie-sim arguments, as a YAML flow list body. Returns its address.
  std::string StartAgent(const std::string& name, const std::string& model,
                         const std::string& controller = "", double time_scale = kTimeScale,
                         const std::string& sim_args = "") {
    auto cert = ca_->Issue(name);
    EXPECT_TRUE(cert.ok());
    std::string root = dir_.File(name);
    crest::agent::testing::FakeSysfsSpec sysfs;
    crest::agent::testing::WriteFakeSysfs(root + "/sys", sysfs);
    std::string config = root + "/agent.yaml";
    EXPECT_TRUE(
        WriteFileAtomically(
            config,
            absl::StrCat(
                "sim: {model: ", model, ", time_scale: ", time_scale, ", seed: 7",
                sim_args.empty() ? "" : ", args: [" + sim_args + "]", "}\nlabels: {model: ", model,
                "}\n"))
            .ok());
    std::vector<std::string> args = {
        "--listen",      "127.0.0.1:0",  "--config",    config,        "--state-dir",
        root + "/state", "--sysfs-root", root + "/sys", "--node-name", name};
    for (auto& a : Tls(*cert)) args.push_back(a);
    if (!controller.empty()) {
      args.emplace_back("--controller");
      args.push_back(controller);
    }
    auto p = Process::Start("crest-agent", args, name);
    EXPECT_TRUE(p.ok()) << p.status();
    auto port = (*p)->WaitForNumberAfter("crest-agent: listening on 127.0.0.1:", kStartup);
    EXPECT_TRUE(port.ok()) << port.status();
    agents_[name] = std::move(*p);
    return absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
  }

  // Starts the controller on `state_dir` with `extra` flags; returns its address.
  std::string StartController(const std::string& state_dir, const std::string& agents = "",
                              const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0",          "--state-dir",
                                     state_dir,  "--heartbeat-interval", "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    if (!agents.empty()) {
      args.emplace_back("--agents");
      args.push_back(agents);
    }
    for (auto& a : Tls(controller_cert_)) args.push_back(a);
    auto p = Process::Start("crest-controller", args, "controller");
    EXPECT_TRUE(p.ok()) << p.status();
    auto port = (*p)->WaitForNumberAfter("listening on port ", kStartup);
    EXPECT_TRUE(port.ok()) << port.status();
    controller_ = std::move(*p);
    controller_address_ = absl::StrCat("127.0.0.1:", port.ok() ? *port : 0);
    return controller_address_;
  }

  CommandResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(30)) {
    args.emplace_back("--controller");
    args.push_back(controller_address_);
    for (auto& a : Tls(cli_cert_)) args.push_back(a);
    return RunBinary("crest", args, timeout);
  }

  std::string Submit(const std::string& yaml) {
    std::string file = dir_.File(absl::StrCat("spec", ++specs_, ".yaml"));
    EXPECT_TRUE(WriteFileAtomically(file, yaml).ok());
    CommandResult r = Cli({"campaign", "submit", "-f", file, "--output", "json"});
    EXPECT_EQ(r.code, 0) << r.output;
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("id")) << r.output;
    return j.is_object() ? j.value("id", "") : "";
  }

  // Follows the campaign with `crest campaign watch` until it ends.
  CommandResult Watch(const std::string& id) {
    return Cli({"campaign", "watch", id}, absl::Seconds(120));
  }

  nlohmann::json Report(const std::string& id) {
    std::string file = dir_.File(id + "-report.json");
    CommandResult r = Cli({"campaign", "report", id, "--format", "json", "-o", file});
    EXPECT_EQ(r.code, 0) << r.output;
    auto text = ReadFileToString(file);
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(text.ok() ? *text : "{}", nullptr, false);
  }

  static const nlohmann::json& Model(const nlohmann::json& report, const std::string& name) {
    for (const auto& m : report["models"]) {
      if (m["model"] == name) return m;
    }
    static const nlohmann::json null_json;
    ADD_FAILURE() << "no model " << name << " in " << report.dump();
    return null_json;
  }

  // Every (point, repeat) measured at most once ok; returns point -> ok count.
  static std::map<int64_t, int> OkPerPoint(const nlohmann::json& model) {
    std::map<int64_t, int> ok;
    for (const auto& t : model["trials"]) {
      if (t["status"] == "ok" && !t["calibration"].get<bool>()) {
        ++ok[t["maxBatchSize"].get<int64_t>() * 1000 + t["repeat"].get<int64_t>()];
      }
    }
    return ok;
  }

  crest::testing::TempDir dir_;
  std::unique_ptr<crest::testing::TestCa> ca_;
  crest::testing::CertFiles controller_cert_;
  crest::testing::CertFiles cli_cert_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
  std::unique_ptr<Process> controller_;
  std::vector<std::unique_ptr<Process>> processes_;
  std::string controller_address_;
  int specs_ = 0;
};

}  // namespace crest::e2e
