// Host tuning of the practice: the CPU frequency governor of every CPU
// (`cpupower -c all frequency-set -g performance`, done through sysfs, with
// the cpupower tool as fallback when sysfs has no cpufreq) and transparent
// hugepages. The previous state is persisted in the state directory before
// anything changes, so it can be restored on request, at shutdown and at the
// next start after a crash. A setting the host lacks is reported unsupported.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "common/subprocess.h"
#include "crest/v1/agent.pb.h"

namespace crest::agent {

class HostTuner {
 public:
  // Runs `cpupower <args...>`; unset when the tool is absent.
  using CpupowerRunner =
      std::function<absl::StatusOr<CommandOutput>(const std::vector<std::string>& args)>;

  HostTuner(std::string sysfs_root, std::string state_dir, CpupowerRunner cpupower);

  // A runner that executes the cpupower found on PATH, or unset.
  static CpupowerRunner SystemCpupower();

  // The current governor / THP state, and whether a tuning is applied.
  crest::v1::HostState State() const;
  // Governors every CPU offers (scaling_available_governors); empty if unsupported.
  std::vector<std::string> AvailableGovernors() const;

  // Sets the governor and/or THP mode (empty: leave alone). The state before
  // the first change of each setting is persisted first. Callers validate
  // the values (Validator); an unsupported setting is reported, not failed.
  absl::StatusOr<crest::v1::HostTuningReply> Apply(const std::string& governor,
                                                   const std::string& thp);
  // Puts back what the record says and removes it. No record: nothing done.
  absl::StatusOr<crest::v1::HostTuningReply> Restore();
  bool HasRecord() const;
  std::string record_path() const { return state_dir_ + "/host-tuning.json"; }

 private:
  struct Snapshot {
    bool governor_supported = false;
    bool via_cpupower = false;
    std::map<uint32_t, std::string> governor_per_cpu;
    std::string governor_reason;  // why unsupported
    bool thp_supported = false;
    std::string thp;
    std::string thp_reason;
  };
  struct Record {
    std::optional<std::map<uint32_t, std::string>> governor_per_cpu;
    std::optional<std::string> thp;
  };

  Snapshot Read() const;
  crest::v1::HostState ToState(const Snapshot& s) const;
  absl::StatusOr<std::optional<Record>> LoadRecord() const;
  absl::Status SaveRecord(const Record& record) const;
  absl::Status SetGovernor(const Snapshot& s, const std::map<uint32_t, std::string>& per_cpu);
  absl::Status SetThp(const std::string& mode);
  std::string CpufreqDir(uint32_t cpu) const;
  std::string ThpPath() const;

  const std::string sysfs_root_;
  const std::string state_dir_;
  const CpupowerRunner cpupower_;
  mutable absl::Mutex mu_;  // one tuning operation at a time
};

// "always [madvise] never" -> "madvise"; a plain word is taken as is.
std::string ParseBracketedMode(const std::string& text);

}  // namespace crest::agent
