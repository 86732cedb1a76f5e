// Builds a fake sysfs tree in a directory for tests (--sysfs-root): CPUs,
// NUMA nodes, optional cpufreq per CPU and optional transparent hugepages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crest::agent::testing {

struct FakeSysfsSpec {
  std::vector<std::vector<uint32_t>> numa_nodes = {{0}, {1}};  // node i -> CPUs
  std::string online;                                          // default: all CPUs
  bool cpufreq = true;
  std::string governor = "powersave";
  std::string available_governors = "performance powersave";
  bool thp = true;
  std::string thp_enabled = "always [madvise] never";
};

// Writes the tree under `root`; returns `root`.
std::string WriteFakeSysfs(const std::string& root, const FakeSysfsSpec& spec);

// Contents of a file of the tree, whitespace-trimmed ("" when missing).
std::string ReadFakeFile(const std::string& path);

}  // namespace crest::agent::testing
