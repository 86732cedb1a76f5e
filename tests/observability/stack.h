// A real Crest stack on loopback for the observability tests: a controller
// and agents (each with its own mindie-sim and fake sysfs), every one with
// its metrics port, mutual TLS from a throwaway CA, driven by the `crest`
// CLI; plus plain HTTP GETs (libcurl) and a free-port picker.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/listen_port.h"
#include "common/testing/test_ca.h"
#include "tests/e2e/e2e_harness.h"

namespace crest::observability {

using ::crest::e2e::CommandResult;
using ::crest::e2e::Process;

// GET `url`; the body when the answer is 200.
absl::StatusOr<std::string> HttpGet(const std::string& url);
// Percent-encodes `s` for a URL query.
std::string UrlEncode(const std::string& s);
// The program `name` on $PATH, or "" when absent.
std::string FindOnPath(const std::string& name);

struct AgentEndpoints {
  std::string address;      // gRPC host:port
  std::string metrics;      // host:port of the agent's /metrics
  std::string sim_metrics;  // host:port of its daemon's /metrics
};

class Stack {
 public:
  Stack();
  ~Stack();

  // Starts the controller with --metrics-listen; returns false on failure
  // (the reason is in error()).
  bool StartController();
  // Starts an agent registered with the controller, serving `model` from a
  // mindie-sim `time_scale` times faster than real time.
  bool StartAgent(const std::string& name, const std::string& model, double time_scale);
  // Submits `yaml`; the campaign id, or "".
  std::string Submit(const std::string& yaml);
  CommandResult Cli(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(30));
  // `crest ARGS --agent <node's address>` with the controller's certificate
  // (only the controller's identity may drive a node).
  CommandResult NodeCli(const std::string& node, std::vector<std::string> args);
  // The `crest` command line (binary and TLS flags) for a shell.
  std::string CliCommand(const std::vector<std::string>& args) const;

  const std::string& controller_metrics() const { return controller_metrics_; }
  const std::map<std::string, AgentEndpoints>& agents() const { return endpoints_; }
  Process& controller() { return *controller_; }
  const crest::testing::TempDir& dir() const { return dir_; }
  const std::string& error() const { return error_; }

 private:
  std::vector<std::string> Tls(const crest::testing::CertFiles& c) const;

  crest::testing::TempDir dir_;
  std::vector<crest::PortReservation> sim_ports_;  // the agents' daemons' metrics ports
  std::unique_ptr<crest::testing::TestCa> ca_;
  crest::testing::CertFiles controller_cert_;
  crest::testing::CertFiles cli_cert_;
  std::unique_ptr<Process> controller_;
  std::map<std::string, std::unique_ptr<Process>> agent_processes_;
  std::map<std::string, AgentEndpoints> endpoints_;
  std::string controller_address_;
  std::string controller_metrics_;
  std::string error_;
  int specs_ = 0;
};

}  // namespace crest::observability
