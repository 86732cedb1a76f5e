// A gtest fixture for campaigns over real processes: a throwaway CA, a real
// crest-controller, crest-agents each with its own mindie-sim and fake sysfs
// tree, driven through the real `crest` CLI. Shared by tests/e2e and
// tests/faults; the checks every fault case ends with live here too.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "agent/testing/fake_sysfs.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/e2e_harness.h"

namespace crest::e2e {

inline constexpr absl::Duration kStartup = absl::Seconds(20);
// Simulated time runs this much faster than real time.
inline constexpr double kTimeScale = 200;

struct AgentOptions {
  std::string controller;  // register with it when set
  double time_scale = kTimeScale;
  std::vector<std::string> sim_args;       // extra mindie-sim flags (fault knobs)
  std::map<std::string, std::string> env;  // extra environment (test hooks)
  std::vector<std::string> extra_args;     // extra crest-agent flags
  std::string wrapper;                     // run the agent under this program (e.g. prlimit)
  std::vector<std::string> wrapper_args;
  std::string extra_yaml;  // appended to its agent.yaml (e.g. "slots: 4\n")
  // A `daemon:` section in place of the `sim:` one: mindie-sim run as the
  // real daemon is, from the config.json and flags the section names.
  std::string daemon_section;
  crest::agent::testing::FakeSysfsSpec sysfs;  // its fake host
};

// What a host looks like to its operator: the settings an agent may change.
struct HostState {
  std::vector<std::string> governors;  // per CPU of the fake sysfs tree
  std::string thp;                     // the THP mode in effect (the bracketed one)
  std::string config_json;             // the daemon's config.json, byte for byte
  bool operator==(const HostState& o) const {
    return governors == o.governors && thp == o.thp && config_json == o.config_json;
  }
};

// Whether a report's trial was flagged by the measurement-trust checks (a
// client-bound crest-bench on a machine whose CPUs other tests take): its
// figure is never evidence.
bool Flagged(const nlohmann::json& trial);

class CampaignFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  std::vector<std::string> Tls(const crest::testing::CertFiles& c) const;

  // Starts an agent serving `model` from its own mindie-sim and fake sysfs;
  // registers with the controller when `controller` is set. Returns its address.
  std::string StartAgent(const std::string& name, const std::string& model,
                         const std::string& controller = "", double time_scale = kTimeScale);
  std::string StartAgentWith(const std::string& name, const std::string& model,
                             const AgentOptions& options);
  // Starts `name` again as last started, on the same state dir, sysfs tree
  // and port (after a crash). Returns its address.
  std::string RestartAgent(const std::string& name);

  // Starts the controller on `state_dir` with `extra_args`; returns its
  // address. A node's sim time scale reaches the controller only this way
  // (--sim-time-scale), never from the agent.
  std::string StartController(const std::string& state_dir, const std::string& agents = "",
                              const std::vector<std::string>& extra_args = {});

  CommandResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(30));
  std::string Submit(const std::string& yaml);
  // Follows the campaign with `crest campaign watch` until it ends.
  CommandResult Watch(const std::string& id);
  nlohmann::json Report(const std::string& id);
  static const nlohmann::json& Model(const nlohmann::json& report, const std::string& name);
  // Every (point, repeat) measured at most once ok; returns point -> ok count.
  static std::map<int64_t, int> OkPerPoint(const nlohmann::json& model);
  // The points of a one-run-per-point search (repeats 1, e.g. the practice
  // ladder) that have an ok run, each checked to be measured once: in
  // repeat order, flagged runs (crest-bench client-bound on a busy machine)
  // each made up by the next, `max_retries` times at most, and at most one
  // trusted run, the last.
  static std::set<int64_t> MeasuredPoints(const nlohmann::json& model, int max_retries = 2);

  // The host settings of agent `name` now.
  HostState Host(const std::string& name);
  // Nothing recorded lost or counted twice: trial ids unique; each (point,
  // repeat) ok at most once; every interrupted trial followed by a later
  // attempt of its point; every trial of `before` (a report taken earlier)
  // still there with the same status and figures.
  static void ExpectNothingLostOrCountedTwice(const nlohmann::json& model,
                                              const nlohmann::json& before = nullptr);

  crest::testing::TempDir dir_;
  std::unique_ptr<crest::testing::TestCa> ca_;
  crest::testing::CertFiles controller_cert_;
  crest::testing::CertFiles cli_cert_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
  std::map<std::string, std::vector<std::string>> agent_argv_;  // for RestartAgent
  std::map<std::string, std::map<std::string, std::string>> agent_env_;
  std::unique_ptr<Process> controller_;
  std::vector<std::unique_ptr<Process>> processes_;
  std::string controller_address_;
  int specs_ = 0;
};

}  // namespace crest::e2e
