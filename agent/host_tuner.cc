#include "agent/host_tuner.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

#include "common/file_util.h"
#include "common/status.h"
#include "common/topology.h"

namespace crest::agent {
namespace {

using crest::v1::SETTING_SUPPORTED;
using crest::v1::SETTING_UNSUPPORTED;

std::string ReadTrimmed(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::Status WriteSysfs(const std::string& path, const std::string& value) {
  // sysfs attributes take one write(); no temp file + rename here.
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("writing ", path, ": ", std::strerror(errno)));
  }
  bool ok = std::fputs(value.c_str(), f) >= 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("writing ", value, " to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string Summarise(const std::map<uint32_t, std::string>& per_cpu) {
  std::set<std::string> values;
  for (const auto& [cpu, g] : per_cpu) values.insert(g);
  if (values.empty()) return "";
  if (values.size() == 1) return *values.begin();
  return "mixed";
}

// Parses `cpupower -c all frequency-info -p` ("analyzing CPU 3:" ...
// `The governor "performance" may decide ...`).
std::map<uint32_t, std::string> ParseCpupowerPolicy(const std::string& text) {
  std::map<uint32_t, std::string> out;
  std::optional<uint32_t> cpu;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "analyzing CPU ")) {
      absl::ConsumeSuffix(&line, ":");
      uint32_t id = 0;
      cpu = absl::SimpleAtoi(line, &id) ? std::optional<uint32_t>(id) : std::nullopt;
      continue;
    }
    size_t pos = line.find("The governor \"");
    if (cpu && pos != absl::string_view::npos) {
      absl::string_view rest = line.substr(pos + 14);
      size_t end = rest.find('"');
      if (end != absl::string_view::npos) out[*cpu] = std::string(rest.substr(0, end));
    }
  }
  return out;
}

}  // namespace

std::string ParseBracketedMode(const std::string& text) {
  size_t open = text.find('[');
  size_t close = text.find(']');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    return text.substr(open + 1, close - open - 1);
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

HostTuner::HostTuner(std::string sysfs_root, std::string state_dir, CpupowerRunner cpupower)
    : sysfs_root_(std::move(sysfs_root)),
      state_dir_(std::move(state_dir)),
      cpupower_(std::move(cpupower)) {}

HostTuner::CpupowerRunner HostTuner::SystemCpupower() {
  std::string path = FindOnPath("cpupower");
  if (path.empty()) return nullptr;
  return [path](const std::vector<std::string>& args) -> absl::StatusOr<CommandOutput> {
    SpawnOptions options;
    options.argv.push_back(path);
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    return RunCommand(options, absl::Seconds(30));
  };
}

std::string HostTuner::CpufreqDir(uint32_t cpu) const {
  return absl::StrCat(sysfs_root_, "/devices/system/cpu/cpu", cpu, "/cpufreq");
}

std::string HostTuner::ThpPath() const {
  return absl::StrCat(sysfs_root_, "/kernel/mm/transparent_hugepage/enabled");
}

HostTuner::Snapshot HostTuner::Read() const {
  Snapshot s;
  auto topology = ReadTopology(sysfs_root_);
  std::vector<uint32_t> cpus;
  if (topology.ok()) cpus = topology->online_cpus;
  for (uint32_t cpu : cpus) {
    std::string g = ReadTrimmed(CpufreqDir(cpu) + "/scaling_governor");
    if (!g.empty()) s.governor_per_cpu[cpu] = g;
  }
  if (!s.governor_per_cpu.empty()) {
    s.governor_supported = true;
  } else if (cpupower_) {
    auto out = cpupower_({"-c", "all", "frequency-info", "-p"});
    if (out.ok() && out->exit.code == 0) {
      s.governor_per_cpu = ParseCpupowerPolicy(out->output);
    }
    s.governor_supported = !s.governor_per_cpu.empty();
    s.via_cpupower = s.governor_supported;
    if (!s.governor_supported) {
      s.governor_reason = "no cpufreq in sysfs and cpupower reports no governor";
    }
  } else {
    s.governor_reason = absl::StrCat("no cpufreq in sysfs (", sysfs_root_,
                                     "/devices/system/cpu/cpu*/cpufreq) and no cpupower on PATH");
  }
  std::string thp = ReadTrimmed(ThpPath());
  if (!thp.empty()) {
    s.thp_supported = true;
    s.thp = ParseBracketedMode(thp);
  } else {
    s.thp_reason = absl::StrCat("no transparent hugepages (", ThpPath(), " missing)");
  }
  return s;
}

crest::v1::HostState HostTuner::ToState(const Snapshot& s) const {
  crest::v1::HostState state;
  state.set_governor(Summarise(s.governor_per_cpu));
  state.set_governor_support(s.governor_supported ? SETTING_SUPPORTED : SETTING_UNSUPPORTED);
  for (const auto& [cpu, g] : s.governor_per_cpu) (*state.mutable_governor_per_cpu())[cpu] = g;
  state.set_thp(s.thp);
  state.set_thp_support(s.thp_supported ? SETTING_SUPPORTED : SETTING_UNSUPPORTED);
  state.set_tuned(HasRecord());
  return state;
}

crest::v1::HostState HostTuner::State() const {
  absl::MutexLock lock(&mu_);
  return ToState(Read());
}

std::vector<std::string> HostTuner::AvailableGovernors() const {
  absl::MutexLock lock(&mu_);
  Snapshot s = Read();
  std::optional<std::set<std::string>> common;
  if (s.via_cpupower) {
    auto out = cpupower_({"frequency-info", "-g"});
    if (out.ok()) {
      for (absl::string_view line : absl::StrSplit(out->output, '\n')) {
        size_t colon = line.find("governors:");
        if (colon == absl::string_view::npos) continue;
        std::set<std::string> names;
        for (absl::string_view g :
             absl::StrSplit(line.substr(colon + 10), ' ', absl::SkipWhitespace())) {
          names.insert(std::string(g));
        }
        common = names;
      }
    }
  } else {
    for (const auto& [cpu, g] : s.governor_per_cpu) {
      std::string text = ReadTrimmed(CpufreqDir(cpu) + "/scaling_available_governors");
      std::set<std::string> names;
      for (absl::string_view n : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
        names.insert(std::string(n));
      }
      if (!common) {
        common = names;
      } else {
        std::set<std::string> both;
        for (const std::string& n : *common) {
          if (names.count(n) != 0) both.insert(n);
        }
        common = both;
      }
    }
  }
  if (!common) return {};
  return {common->begin(), common->end()};
}

bool HostTuner::HasRecord() const { return ::access(record_path().c_str(), F_OK) == 0; }

absl::StatusOr<std::optional<HostTuner::Record>> HostTuner::LoadRecord() const {
  auto text = ReadFileToString(record_path());
  if (absl::IsNotFound(text.status())) return std::optional<Record>();
  if (!text.ok()) return text.status();
  try {
    nlohmann::json j = nlohmann::json::parse(*text);
    Record r;
    if (j.contains("governor") && j["governor"].is_object()) {
      std::map<uint32_t, std::string> per_cpu;
      for (const auto& [cpu, g] : j["governor"].items()) {
        uint32_t id = 0;
        if (!absl::SimpleAtoi(cpu, &id)) continue;
        per_cpu[id] = g.get<std::string>();
      }
      r.governor_per_cpu = per_cpu;
    }
    if (j.contains("thp") && j["thp"].is_string()) r.thp = j["thp"].get<std::string>();
    return std::optional<Record>(r);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(record_path(), ": ", e.what()));
  }
}

absl::Status HostTuner::SaveRecord(const Record& record) const {
  nlohmann::json j = nlohmann::json::object();
  if (record.governor_per_cpu) {
    nlohmann::json g = nlohmann::json::object();
    for (const auto& [cpu, name] : *record.governor_per_cpu) g[absl::StrCat(cpu)] = name;
    j["governor"] = g;
  }
  if (record.thp) j["thp"] = *record.thp;
  CREST_RETURN_IF_ERROR(MakeDirectories(state_dir_));
  return WriteFileAtomically(record_path(), j.dump(2) + "\n", 0600);
}

absl::Status HostTuner::SetGovernor(const Snapshot& s,
                                    const std::map<uint32_t, std::string>& per_cpu) {
  if (s.via_cpupower) {
    // cpupower sets one governor for a CPU list; group CPUs by target.
    std::map<std::string, std::vector<uint32_t>> by_governor;
    for (const auto& [cpu, g] : per_cpu) by_governor[g].push_back(cpu);
    for (const auto& [g, cpus] : by_governor) {
      auto out = cpupower_({"-c", absl::StrJoin(cpus, ","), "frequency-set", "-g", g});
      if (!out.ok()) return out.status();
      if (out->exit.code != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("cpupower frequency-set -g ", g, " failed: ", out->output));
      }
    }
    return absl::OkStatus();
  }
  for (const auto& [cpu, g] : per_cpu) {
    CREST_RETURN_IF_ERROR(WriteSysfs(CpufreqDir(cpu) + "/scaling_governor", g));
  }
  return absl::OkStatus();
}

absl::Status HostTuner::SetThp(const std::string& mode) { return WriteSysfs(ThpPath(), mode); }

absl::StatusOr<crest::v1::HostTuningReply> HostTuner::Apply(const std::string& governor,
                                                            const std::string& thp) {
  absl::MutexLock lock(&mu_);
  Snapshot before = Read();
  CREST_ASSIGN_OR_RETURN(std::optional<Record> existing, LoadRecord());
  Record record = existing.value_or(Record{});
  bool record_changed = !existing.has_value();
  // Persist what we are about to change before changing it (crash safety).
  if (!governor.empty() && before.governor_supported && !record.governor_per_cpu) {
    record.governor_per_cpu = before.governor_per_cpu;
    record_changed = true;
  }
  if (!thp.empty() && before.thp_supported && !record.thp) {
    record.thp = before.thp;
    record_changed = true;
  }
  bool anything =
      (!governor.empty() && before.governor_supported) || (!thp.empty() && before.thp_supported);
  if (anything && record_changed) CREST_RETURN_IF_ERROR(SaveRecord(record));

  crest::v1::HostTuningReply reply;
  if (!governor.empty()) {
    crest::v1::SettingResult* r = reply.add_results();
    r->set_setting("governor");
    r->set_previous(Summarise(before.governor_per_cpu));
    if (!before.governor_supported) {
      r->set_support(SETTING_UNSUPPORTED);
      r->set_message(before.governor_reason);
    } else {
      r->set_support(SETTING_SUPPORTED);
      std::map<uint32_t, std::string> target;
      for (const auto& [cpu, g] : before.governor_per_cpu) target[cpu] = governor;
      CREST_RETURN_IF_ERROR(SetGovernor(before, target));
      r->set_changed(Summarise(before.governor_per_cpu) != governor);
      r->set_message(absl::StrCat("governor ", governor, " set on ", target.size(), " CPUs",
                                  before.via_cpupower ? " (cpupower)" : " (sysfs)"));
    }
  }
  if (!thp.empty()) {
    crest::v1::SettingResult* r = reply.add_results();
    r->set_setting("thp");
    r->set_previous(before.thp);
    if (!before.thp_supported) {
      r->set_support(SETTING_UNSUPPORTED);
      r->set_message(before.thp_reason);
    } else {
      r->set_support(SETTING_SUPPORTED);
      CREST_RETURN_IF_ERROR(SetThp(thp));
      r->set_changed(before.thp != thp);
      r->set_message(absl::StrCat("transparent hugepages set to ", thp));
    }
  }
  Snapshot after = Read();
  for (crest::v1::SettingResult& r : *reply.mutable_results()) {
    r.set_current(r.setting() == "thp" ? after.thp : Summarise(after.governor_per_cpu));
  }
  *reply.mutable_host() = ToState(after);
  return reply;
}

absl::StatusOr<crest::v1::HostTuningReply> HostTuner::Restore() {
  absl::MutexLock lock(&mu_);
  Snapshot before = Read();
  CREST_ASSIGN_OR_RETURN(std::optional<Record> record, LoadRecord());
  crest::v1::HostTuningReply reply;
  if (record) {
    if (record->governor_per_cpu) {
      crest::v1::SettingResult* r = reply.add_results();
      r->set_setting("governor");
      r->set_previous(Summarise(before.governor_per_cpu));
      if (before.governor_supported) {
        r->set_support(SETTING_SUPPORTED);
        CREST_RETURN_IF_ERROR(SetGovernor(before, *record->governor_per_cpu));
        r->set_changed(before.governor_per_cpu != *record->governor_per_cpu);
        r->set_message("governor restored from the record");
      } else {
        r->set_support(SETTING_UNSUPPORTED);
        r->set_message(before.governor_reason);
      }
    }
    if (record->thp) {
      crest::v1::SettingResult* r = reply.add_results();
      r->set_setting("thp");
      r->set_previous(before.thp);
      if (before.thp_supported) {
        r->set_support(SETTING_SUPPORTED);
        CREST_RETURN_IF_ERROR(SetThp(*record->thp));
        r->set_changed(before.thp != *record->thp);
        r->set_message("transparent hugepages restored from the record");
      } else {
        r->set_support(SETTING_UNSUPPORTED);
        r->set_message(before.thp_reason);
      }
    }
    std::error_code ec;
    std::filesystem::remove(record_path(), ec);
    if (ec)
      return absl::InternalError(absl::StrCat("removing ", record_path(), ": ", ec.message()));
  }
  Snapshot after = Read();
  for (crest::v1::SettingResult& r : *reply.mutable_results()) {
    r.set_current(r.setting() == "thp" ? after.thp : Summarise(after.governor_per_cpu));
  }
  *reply.mutable_host() = ToState(after);
  return reply;
}

}  // namespace crest::agent
