#include "tests/agent/agent_test_util.h"

#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "agent/agent_config.h"
#include "agent/config_json_editor.h"
#include "common/file_util.h"
#include "common/listen_port.h"
#include "common/status.h"

namespace crest::agent::testing {

absl::StatusOr<std::string> WriteSimConfigJson(
    const std::string& dir, std::vector<PortReservation>& ports,
    const std::vector<std::pair<std::vector<std::string>, std::string>>& extra) {
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(SourceDir() + "/sim/conf/config.json"));
  std::vector<JsonEdit> edits;
  for (const char* key : {"port", "managementPort", "metricsPort"}) {
    CREST_ASSIGN_OR_RETURN(int port, ReserveListenPortInto(ports));
    edits.push_back({{"ServerConfig", key}, absl::StrCat(port)});
  }
  edits.push_back({{"ServerConfig", "managementIpAddress"}, "\"127.0.0.1\""});
  edits.push_back({{"ServerConfig", "httpsEnabled"}, "false"});
  for (const auto& [path, literal] : extra) edits.push_back({path, literal});
  CREST_ASSIGN_OR_RETURN(std::string edited, ApplyJsonEdits(text, edits));
  CREST_RETURN_IF_ERROR(MakeDirectories(dir + "/conf"));
  std::string path = dir + "/conf/config.json";
  CREST_RETURN_IF_ERROR(WriteFileAtomically(path, edited, 0640));
  return path;
}

absl::Status WriteProfileWithMemoryWarnings(const std::string& path, double memory_gib) {
  CREST_ASSIGN_OR_RETURN(std::string profile,
                         ReadFileToString(SourceDir() + "/sim/profiles/llama3-8b-910b.json"));
  auto replace = [&profile](const std::string& from, const std::string& to) -> absl::Status {
    const size_t at = profile.find(from);
    if (at == std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat("the profile has no ", from));
    }
    profile.replace(at, from.size(), to);
    return absl::OkStatus();
  };
  CREST_RETURN_IF_ERROR(
      replace(R"("model": {)", R"("model": {"kv_cache_int8": true, "multimodal": true, )"));
  if (memory_gib > 0) {
    CREST_RETURN_IF_ERROR(
        replace(R"("memory_gib": 64)", absl::StrCat(R"("memory_gib": )", memory_gib)));
  }
  return WriteFileAtomically(path, profile);
}

bool ReadUntil(Subprocess& p, const std::string& needle, std::string* out, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!absl::StrContains(*out, needle)) {
    if (!p.ReadAvailable(out)) return absl::StrContains(*out, needle);
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fd{p.output_fd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left), 100)) + 1);
  }
  return true;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    ::usleep(5000);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<AgentProcess>> AgentProcess::Start(
    const std::vector<std::string>& args) {
  auto agent = std::make_unique<AgentProcess>();
  SpawnOptions options;
  options.argv.push_back(BinDir() + "/crest-agent");
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  CREST_ASSIGN_OR_RETURN(agent->process_, Subprocess::Spawn(options));
  const std::string marker = "crest-agent: listening on ";
  if (!ReadUntil(*agent->process_, marker, &agent->output_, absl::Seconds(15))) {
    agent->process_->WaitFor(absl::Seconds(5));
    agent->process_->ReadAvailable(&agent->output_);
    return absl::UnavailableError(absl::StrCat("crest-agent did not start: ", agent->output_));
  }
  ReadUntil(*agent->process_, "\n", &agent->output_, absl::Seconds(1));
  size_t pos = agent->output_.find(marker) + marker.size();
  // Wait for the end of the line.
  while (agent->output_.find('\n', pos) == std::string::npos) {
    if (!ReadUntil(*agent->process_, "\n", &agent->output_, absl::Seconds(5))) break;
  }
  size_t end = agent->output_.find('\n', pos);
  agent->address_ = agent->output_.substr(pos, end - pos);
  return agent;
}

int AgentProcess::Terminate() {
  ::kill(process_->pid(), SIGTERM);
  std::string rest;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    process_->ReadAvailable(&output_);
    if (auto info = process_->WaitFor(absl::Milliseconds(50))) {
      process_->ReadAvailable(&output_);
      return info->code;
    }
  }
  return -1;
}

void AgentProcess::Crash() {
  ::kill(process_->pid(), SIGKILL);
  process_->WaitFor(absl::Seconds(10));
}

std::string AgentProcess::output() {
  process_->ReadAvailable(&output_);
  return output_;
}

}  // namespace crest::agent::testing
