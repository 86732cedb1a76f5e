#include "tests/observability/stack.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "agent/testing/fake_sysfs.h"
#include "common/file_util.h"
#include "common/listen_port.h"

namespace crest::observability {
namespace {

constexpr absl::Duration kStartup = absl::Seconds(20);

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& url) {
  CURL* curl = curl_easy_init();
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;  // NOLINT(google-runtime-int): libcurl's type
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(rc)));
  }
  if (code != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", code, ": ", body));
  }
  return body;
}

std::string UrlEncode(const std::string& s) {
  CURL* curl = curl_easy_init();
  char* out = curl_easy_escape(curl, s.data(), static_cast<int>(s.size()));
  std::string r = out;
  curl_free(out);
  curl_easy_cleanup(curl);
  return r;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "/usr/bin:/bin" : path, ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Stack::Stack() {
  e2e::BecomeSubreaper();
  auto ca = crest::testing::TestCa::Create(dir_.path(), "obs");
  if (!ca.ok()) {
    error_ = ca.status().ToString();
    return;
  }
  ca_ = std::make_unique<crest::testing::TestCa>(*ca);
  auto controller = ca_->Issue("crest-controller");
  auto cli = ca_->Issue("crest-cli");
  if (!controller.ok() || !cli.ok()) {
    error_ = "cannot issue certificates";
    return;
  }
  controller_cert_ = *controller;
  cli_cert_ = *cli;
}

Stack::~Stack() {
  for (auto& [name, agent] : agent_processes_) agent->Terminate(absl::Seconds(10));
  agent_processes_.clear();
  controller_.reset();
  e2e::KillAllChildren();
}

std::vector<std::string> Stack::Tls(const crest::testing::CertFiles& c) const {
  return {"--tls-cert", c.cert, "--tls-key", c.key, "--tls-ca", ca_->ca_file()};
}

bool Stack::StartController() {
  if (ca_ == nullptr) return false;
  std::vector<std::string> args = {"--listen",         "127.0.0.1:0",          "--state-dir",
                                   dir_.File("ctl"),   "--heartbeat-interval", "0.5",
                                   "--metrics-listen", "127.0.0.1:0"};
  for (auto& a : Tls(controller_cert_)) args.push_back(a);
  auto p = Process::Start("crest-controller", args, "controller");
  if (!p.ok()) {
    error_ = p.status().ToString();
    return false;
  }
  controller_ = std::move(*p);
  auto port = controller_->WaitForNumberAfter("listening on port ", kStartup);
  auto metrics = controller_->WaitForNumberAfter("/metrics (port ", kStartup);
  if (!port.ok() || !metrics.ok()) {
    error_ = (port.ok() ? metrics.status() : port.status()).ToString();
    return false;
  }
  controller_address_ = absl::StrCat("127.0.0.1:", *port);
  controller_metrics_ = absl::StrCat("127.0.0.1:", *metrics);
  return true;
}

bool Stack::StartAgent(const std::string& name, const std::string& model, double time_scale) {
  auto cert = ca_->Issue(name);
  if (!cert.ok()) {
    error_ = cert.status().ToString();
    return false;
  }
  std::string root = dir_.File(name);
  crest::agent::testing::WriteFakeSysfs(root + "/sys", crest::agent::testing::FakeSysfsSpec());
  // Reserved until the stack ends: the agent starts its daemon later.
  auto sim_metrics = ReserveListenPortInto(sim_ports_);
  if (!sim_metrics.ok()) {
    error_ = sim_metrics.status().ToString();
    return false;
  }
  std::string config = root + "/agent.yaml";
  absl::Status written =
      WriteFileAtomically(config, absl::StrCat("sim: {model: ", model, ", time_scale: ", time_scale,
                                               ", seed: 7, metrics_port: ", *sim_metrics,
                                               "}\nlabels: {model: ", model, "}\n"));
  if (!written.ok()) {
    error_ = written.ToString();
    return false;
  }
  std::vector<std::string> args = {"--listen",     "127.0.0.1:0",      "--config",
                                   config,         "--state-dir",      root + "/state",
                                   "--sysfs-root", root + "/sys",      "--node-name",
                                   name,           "--metrics-listen", "127.0.0.1:0",
                                   "--controller", controller_address_};
  for (auto& a : Tls(*cert)) args.push_back(a);
  auto p = Process::Start("crest-agent", args, name);
  if (!p.ok()) {
    error_ = p.status().ToString();
    return false;
  }
  auto port = (*p)->WaitForNumberAfter("crest-agent: listening on 127.0.0.1:", kStartup);
  auto metrics = (*p)->WaitForNumberAfter("crest-agent: metrics on 127.0.0.1:", kStartup);
  agent_processes_[name] = std::move(*p);
  if (!port.ok() || !metrics.ok()) {
    error_ = (port.ok() ? metrics.status() : port.status()).ToString();
    return false;
  }
  // The daemon serves metrics on its management address, which the shipped
  // config.json template sets (a loopback address).
  std::string management = "127.0.0.1";
  auto tmpl = ReadFileToString(e2e::SourceDir() + "/sim/conf/config.json");
  if (tmpl.ok()) {
    auto j = nlohmann::json::parse(*tmpl, nullptr, false);
    if (j.is_object()) management = j["ServerConfig"].value("managementIpAddress", management);
  }
  endpoints_[name] = {absl::StrCat("127.0.0.1:", *port), absl::StrCat("127.0.0.1:", *metrics),
                      absl::StrCat(management, ":", *sim_metrics)};
  auto registered = controller_->WaitForLine(absl::StrCat("agent ", name, " registered"), kStartup);
  if (!registered.ok()) error_ = registered.status().ToString();
  return registered.ok();
}

CommandResult Stack::Cli(std::vector<std::string> args, absl::Duration timeout) {
  args.emplace_back("--controller");
  args.push_back(controller_address_);
  for (auto& a : Tls(cli_cert_)) args.push_back(a);
  return e2e::RunBinary("crest", args, timeout);
}

CommandResult Stack::NodeCli(const std::string& node, std::vector<std::string> args) {
  args.emplace_back("--agent");
  args.push_back(endpoints_.at(node).address);
  // Driving a node (start, tune, bench) is the controller's role: the agents
  // accept it only from the controller's identity.
  for (auto& a : Tls(controller_cert_)) args.push_back(a);
  return e2e::RunBinary("crest", args, absl::Seconds(30));
}

std::string Stack::CliCommand(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {e2e::BinDir() + "/crest"};
  all.insert(all.end(), args.begin(), args.end());
  all.emplace_back("--controller");
  all.push_back(controller_address_);
  for (auto& a : Tls(cli_cert_)) all.push_back(a);
  return absl::StrJoin(all, " ");
}

std::string Stack::Submit(const std::string& yaml) {
  std::string file = dir_.File(absl::StrCat("spec", ++specs_, ".yaml"));
  if (!WriteFileAtomically(file, yaml).ok()) return "";
  CommandResult r = Cli({"campaign", "submit", "-f", file, "--output", "json"});
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (r.code != 0 || !j.is_object()) {
    error_ = r.output;
    return "";
  }
  return j.value("id", "");
}

}  // namespace crest::observability
