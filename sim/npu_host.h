// The simulated host's NPUs, shared by every mindie-sim process of one host:
// which process holds which device and how much of its HBM it uses. Ascend's
// runtime refuses a device another process has opened; several simulators
// on one host must do the same, or slots could not be tested here. Each
// device is a lock file in the host's directory, held (flock) by the process
// that claimed it: the kernel frees it when that process dies, as the NPU
// driver frees a dead process's device.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "common/topology.h"

namespace crest::sim {

struct NpuHost {
  std::string dir;  // the lock files, npu<ID>.lock
  int device_count = 8;
  std::string chip = "910B3";      // what npu-smi lists for a free device
  uint64_t hbm_total_mib = 65536;  // likewise
};

// What one process takes on one device.
struct NpuUse {
  std::string chip;
  uint64_t hbm_used_mib = 0;
  uint64_t hbm_total_mib = 0;
  std::string process_name = "mindie-sim";
};

// The host from the environment: $MINDIE_SIM_NPU_DIR, else
// <install_dir>/run/npu (one MindIE install is one simulated host; tests
// that want several installs on one host set the variable), else
// INVALID_ARGUMENT when install_dir is empty too. $MINDIE_SIM_NPU_COUNT
// (1..64, default 8).
absl::StatusOr<NpuHost> NpuHostFromEnv(
    const std::string& install_dir,
    const std::function<std::optional<std::string>(const std::string&)>& getenv);

// A claim on devices, held until destroyed. Move-only.
class NpuClaim {
 public:
  // Claims every device of `ids` or none: FAILED_PRECONDITION naming the
  // device and its holder's pid when another process holds one,
  // INVALID_ARGUMENT for an id the host does not have.
  static absl::StatusOr<NpuClaim> Acquire(const NpuHost& host, const std::vector<int>& ids,
                                          const NpuUse& use);
  NpuClaim(NpuClaim&& other) noexcept;
  NpuClaim& operator=(NpuClaim&& other) noexcept;
  NpuClaim(const NpuClaim&) = delete;
  NpuClaim& operator=(const NpuClaim&) = delete;
  ~NpuClaim();

 private:
  NpuClaim() = default;
  void Release();
  std::vector<int> fds_;
};

// One device as npu-smi shows it.
struct NpuState {
  int id = 0;
  std::string chip;
  uint64_t hbm_used_mib = 0;
  uint64_t hbm_total_mib = 0;
  std::optional<int64_t> holder_pid;  // absent: free
  std::string process_name;
};

// Every device of the host, free or held.
std::vector<NpuState> ReadNpuHost(const NpuHost& host);

// The card layout `npu-smi info` prints (tests/data/real/npu-smi holds a
// real table of each):
// - k910b: one chip per card, the card's NPU id is the device id; HBM.
// - k310pDuo: Atlas 300I Duo, two 310P3 chips per card, the second row's
//   Device column is the device id; DDR only (Memory-Usage), power "NA".
// - kA3: Atlas A3, two Ascend910 dies per card, the second row's Phy-ID
//   column is the device id; the second die's power "-".
enum class NpuLayout { k910b, k310pDuo, kA3 };
// "910b", "310p-duo", "a3"; INVALID_ARGUMENT naming them otherwise.
absl::StatusOr<NpuLayout> ParseNpuLayout(const std::string& text);

// `npu-smi info`'s table (the shape agent::ParseNpuSmiInfo reads): two rows
// per device in `layout`'s columns, then the processes on each device. The
// device ids are the NpuStates' ids.
std::string FormatNpuSmiInfo(const std::vector<NpuState>& devices,
                             NpuLayout layout = NpuLayout::k910b);

// `npu-smi info -t topo`'s matrix: every pair of cards linked by HCCS (the
// 910B's full mesh) and each card's CPU affinity: card i hangs off NUMA node
// floor(i * nodes / cards) of `topology`, the nodes in order (with online
// CPUs), so the cards spread evenly over the host's nodes.
std::string FormatNpuSmiTopo(const NpuHost& host, const Topology& topology);

}  // namespace crest::sim
