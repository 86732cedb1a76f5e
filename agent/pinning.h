// Core pinning of the serving process: the practice's `taskset -c $cpus`
// with the CPUs of the odd NUMA nodes, an explicit CPU list, or nothing. The
// resolved set is limited to online CPUs; the affinity is applied by the
// spawner in the child before exec and verified here from /proc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "common/topology.h"
#include "crest/v1/agent.pb.h"

namespace crest::agent {

// The CPUs `policy` selects on `topology`; empty means "not pinned".
// INVALID_ARGUMENT for a malformed list or one with no online CPU;
// FAILED_PRECONDITION when odd-numa finds no odd node with online CPUs.
absl::StatusOr<std::vector<uint32_t>> ResolvePinning(const crest::v1::PinningPolicy& policy,
                                                     const Topology& topology);

// Cpus_allowed_list of /proc/<pid>/status.
absl::StatusOr<std::vector<uint32_t>> ReadAllowedCpus(pid_t pid);

// OK when the process runs on exactly `expected`.
absl::Status VerifyAffinity(pid_t pid, const std::vector<uint32_t>& expected);

}  // namespace crest::agent
