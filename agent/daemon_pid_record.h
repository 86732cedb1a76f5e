// The daemon's pid record (<state-dir>/daemon-pid.json): pid, start time and
// boot id of the process the agent spawned, written durably before the daemon
// execs, so that the next agent can stop a daemon its crashed predecessor
// left, and never a process that merely reuses the pid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace crest::agent {

// Start time of a process (field 22 of /proc/PID/stat, clock ticks since
// boot); absent when there is no such process.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

// Writes the record for `pid` (atomically, fsynced). An error names the file.
absl::Status WriteDaemonPidRecord(const std::string& path, pid_t pid, const std::string& binary);

// What StopRecordedDaemon found and did.
enum class RecordedDaemon {
  kUnreadable,  // no record, or not one of ours: nothing done
  kOtherBoot,   // recorded before a reboot: nothing of it runs
  kRecycled,    // the pid belongs to another process now: left alone
  kKilled,      // the daemon ran: its process group was SIGKILLed
  kGone,        // the daemon is gone; any remains of its group were SIGKILLed
};

// Reads the record at `path` and SIGKILLs the recorded daemon's group when
// the pid still names that very process (same start time, same boot). When
// the daemon itself is gone (e.g. the kernel's parent-death signal), the
// processes left in its group and started after it are killed: a pid is not
// reused while a live group bears it, so that group is still the daemon's.
RecordedDaemon StopRecordedDaemon(const std::string& path);

}  // namespace crest::agent
