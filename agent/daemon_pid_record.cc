#include "agent/daemon_pid_record.h"

#include <csignal>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest::agent {
namespace {

// The fields of /proc/PID/stat after "(comm)", starting with field 3 (state).
std::optional<std::vector<std::string>> StatFields(pid_t pid) {
  auto text = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  if (!text.ok()) return std::nullopt;
  size_t paren = text->rfind(')');
  if (paren == std::string::npos || paren + 2 > text->size()) return std::nullopt;
  return absl::StrSplit(absl::string_view(*text).substr(paren + 2), ' ', absl::SkipEmpty());
}

// This boot's id: a pid and start time recorded before a reboot name nobody.
std::string BootId() {
  auto text = ReadFileToString("/proc/sys/kernel/random/boot_id");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

// Process group of a process (field 5 of /proc/PID/stat).
std::optional<pid_t> ProcessGroup(pid_t pid) {
  auto fields = StatFields(pid);
  pid_t group = 0;
  if (!fields || fields->size() < 3 || !absl::SimpleAtoi((*fields)[2], &group)) {
    return std::nullopt;
  }
  return group;
}

// SIGKILLs the processes of group `pgid` started no earlier than its leader.
int KillGroupRemains(pid_t pgid, uint64_t leader_start) {
  int killed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    if (ProcessGroup(pid) != pgid) continue;
    std::optional<uint64_t> start = ProcessStartTime(pid);
    if (!start || *start < leader_start) continue;
    if (::kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

}  // namespace

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  auto fields = StatFields(pid);
  uint64_t start = 0;
  if (!fields || fields->size() < 20 || !absl::SimpleAtoi((*fields)[19], &start)) {
    return std::nullopt;
  }
  return start;
}

absl::Status WriteDaemonPidRecord(const std::string& path, pid_t pid, const std::string& binary) {
  std::optional<uint64_t> start = ProcessStartTime(pid);
  if (!start) {
    return absl::InternalError(absl::StrCat("reading the start time of pid ", pid, " in /proc"));
  }
  nlohmann::json j = {
      {"pid", pid}, {"start_time", *start}, {"boot_id", BootId()}, {"binary", binary}};
  return Annotate(WriteFileAtomically(path, j.dump() + "\n", 0600),
                  absl::StrCat("recording the daemon pid in ", path));
}

RecordedDaemon StopRecordedDaemon(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return RecordedDaemon::kUnreadable;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      !j.contains("start_time") || !j["start_time"].is_number_unsigned()) {
    spdlog::warn("ignoring {}: not a daemon pid record", path);
    return RecordedDaemon::kUnreadable;
  }
  auto pid = j["pid"].get<pid_t>();
  auto recorded = j["start_time"].get<uint64_t>();
  if (pid <= 1) return RecordedDaemon::kUnreadable;
  std::string boot = j.value("boot_id", "");
  if (!boot.empty() && boot != BootId()) return RecordedDaemon::kOtherBoot;
  std::optional<uint64_t> now = ProcessStartTime(pid);
  if (now && *now != recorded) return RecordedDaemon::kRecycled;
  if (now) {
    spdlog::warn("a daemon left by a previous agent still runs (pid {}); killing its group", pid);
    ::kill(-pid, SIGKILL);
    return RecordedDaemon::kKilled;
  }
  int killed = KillGroupRemains(pid, recorded);
  if (killed > 0) {
    spdlog::warn("killed {} process(es) left in the group of a previous daemon (pid {})", killed,
                 pid);
  }
  return RecordedDaemon::kGone;
}

}  // namespace crest::agent
