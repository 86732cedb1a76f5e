#include "agent/pinning.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"

namespace crest::agent {

absl::StatusOr<std::vector<uint32_t>> ResolvePinning(const crest::v1::PinningPolicy& policy,
                                                     const Topology& topology) {
  switch (policy.mode()) {
    case crest::v1::PINNING_MODE_UNSPECIFIED:
    case crest::v1::PINNING_NONE:
      if (!policy.cpu_list().empty()) {
        return absl::InvalidArgumentError(
            "pinning.cpu_list: only allowed with mode PINNING_CPU_LIST");
      }
      return std::vector<uint32_t>{};
    case crest::v1::PINNING_ODD_NUMA: {
      if (!policy.cpu_list().empty()) {
        return absl::InvalidArgumentError(
            "pinning.cpu_list: only allowed with mode PINNING_CPU_LIST");
      }
      std::vector<uint32_t> cpus = topology.OddNumaCpus();
      if (cpus.empty()) {
        std::vector<uint32_t> ids;
        ids.reserve(topology.numa_nodes.size());
        for (const NumaNodeInfo& n : topology.numa_nodes) ids.push_back(n.id);
        return absl::FailedPreconditionError(absl::StrCat(
            "pinning odd-numa: no odd NUMA node with online CPUs (nodes: ", absl::StrJoin(ids, ","),
            ")"));
      }
      return cpus;
    }
    case crest::v1::PINNING_CPU_LIST: {
      if (policy.cpu_list().empty()) {
        return absl::InvalidArgumentError(
            "pinning.cpu_list: required with PINNING_CPU_LIST (lscpu notation, e.g. 24-47)");
      }
      auto parsed = ParseCpuList(policy.cpu_list());
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("pinning.cpu_list: ", parsed.status().message()));
      }
      std::vector<uint32_t> online;
      for (uint32_t cpu : *parsed) {
        if (topology.IsOnline(cpu)) online.push_back(cpu);
      }
      if (online.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pinning.cpu_list: \"", ClipForMessage(policy.cpu_list()),
            "\" names no online CPU (online: ", FormatCpuList(topology.online_cpus), ")"));
      }
      return online;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("pinning.mode: unknown value ", static_cast<int>(policy.mode())));
  }
}

absl::StatusOr<std::vector<uint32_t>> ReadAllowedCpus(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/status");
  CREST_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "Cpus_allowed_list:")) return ParseCpuList(line);
  }
  return absl::DataLossError(absl::StrCat(path, ": no Cpus_allowed_list line"));
}

absl::Status VerifyAffinity(pid_t pid, const std::vector<uint32_t>& expected) {
  CREST_ASSIGN_OR_RETURN(std::vector<uint32_t> actual, ReadAllowedCpus(pid));
  if (actual != expected) {
    return absl::FailedPreconditionError(absl::StrCat("process ", pid, " runs on CPUs ",
                                                      FormatCpuList(actual), ", expected ",
                                                      FormatCpuList(expected)));
  }
  return absl::OkStatus();
}

}  // namespace crest::agent
