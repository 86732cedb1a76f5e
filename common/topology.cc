#include "common/topology.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"

namespace crest {
namespace {

absl::StatusOr<std::vector<uint32_t>> ReadCpuListFile(const std::string& path) {
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto cpus = ParseCpuList(absl::StripAsciiWhitespace(text));
  if (!cpus.ok()) return Annotate(cpus.status(), path);
  return cpus;
}

}  // namespace

std::vector<uint32_t> Topology::OddNumaCpus() const {
  std::vector<uint32_t> out;
  for (const NumaNodeInfo& node : numa_nodes) {
    if (node.id % 2 == 0) continue;
    for (uint32_t cpu : node.cpus) {
      if (IsOnline(cpu)) out.push_back(cpu);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<uint32_t> Topology::OnlineCpusExcept(const std::vector<uint32_t>& used) const {
  std::vector<uint32_t> out;
  for (uint32_t cpu : online_cpus) {
    if (std::find(used.begin(), used.end(), cpu) == used.end()) out.push_back(cpu);
  }
  return out;
}

bool Topology::IsOnline(uint32_t cpu) const {
  return std::binary_search(online_cpus.begin(), online_cpus.end(), cpu);
}

absl::StatusOr<Topology> ReadTopology(const std::string& sysfs_root) {
  Topology topology;
  std::string cpu_dir = absl::StrCat(sysfs_root, "/devices/system/cpu");
  CREST_ASSIGN_OR_RETURN(topology.online_cpus, ReadCpuListFile(cpu_dir + "/online"));
  auto possible = ReadCpuListFile(cpu_dir + "/possible");
  if (possible.ok() && !possible->empty()) {
    topology.cpu_count = possible->back() + 1;
  } else if (!topology.online_cpus.empty()) {
    topology.cpu_count = topology.online_cpus.back() + 1;
  }

  std::string node_dir = absl::StrCat(sysfs_root, "/devices/system/node");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir, ec)) {
    std::string name = entry.path().filename().string();
    uint32_t id = 0;
    if (!absl::StartsWith(name, "node") || !absl::SimpleAtoi(name.substr(4), &id)) continue;
    NumaNodeInfo node;
    node.id = id;
    CREST_ASSIGN_OR_RETURN(node.cpus, ReadCpuListFile(entry.path().string() + "/cpulist"));
    topology.numa_nodes.push_back(std::move(node));
  }
  if (topology.numa_nodes.empty()) {
    // No NUMA information (non-NUMA kernel): one node with every online CPU.
    topology.numa_nodes.push_back({0, topology.online_cpus});
  }
  std::sort(topology.numa_nodes.begin(), topology.numa_nodes.end(),
            [](const NumaNodeInfo& a, const NumaNodeInfo& b) { return a.id < b.id; });
  return topology;
}

}  // namespace crest
