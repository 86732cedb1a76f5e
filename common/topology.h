// The CPU and NUMA layout of this host as sysfs describes it (what lscpu
// shows): possible and online CPUs, NUMA nodes with their CPU lists. Read
// from a root directory so tests can hand in a fake tree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crest {

struct NumaNodeInfo {
  uint32_t id = 0;
  std::vector<uint32_t> cpus;  // ascending
};

struct Topology {
  uint32_t cpu_count = 0;                // possible CPUs
  std::vector<uint32_t> online_cpus;     // ascending
  std::vector<NumaNodeInfo> numa_nodes;  // ascending by id; one node 0 if sysfs has none

  // CPUs of the odd-numbered NUMA nodes (1, 3, 5, ...) that are online.
  std::vector<uint32_t> OddNumaCpus() const;
  // Online CPUs not in `used` (ascending).
  std::vector<uint32_t> OnlineCpusExcept(const std::vector<uint32_t>& used) const;
  bool IsOnline(uint32_t cpu) const;
};

// Reads <sysfs_root>/devices/system/cpu/{possible,online} and
// <sysfs_root>/devices/system/node/node*/cpulist.
absl::StatusOr<Topology> ReadTopology(const std::string& sysfs_root);

}  // namespace crest
