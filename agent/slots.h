// Daemon slots of one node: the NPU groups of a server, each to run its own
// daemon, and the CPUs each daemon and the benchmark clients get. An Ascend
// server has 8 NPUs and a 7B/8B model needs one; one daemon per group
// measures several points of a search at once. This is the pure plan (what
// goes where); the agent turns it into working copies of config.json,
// ports and processes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

#include "common/topology.h"

namespace crest::agent {

// The agent config's `slots:` (contract): a count (`slots: 4`), `auto` (the
// NPUs npu-smi lists, in groups of the model's worldSize) or a list of
// `{npus: [...]}`. Absent: one slot, the agent of before slots.
struct SlotsSpec {
  enum class Kind { kCount, kAuto, kList };
  Kind kind = Kind::kCount;
  uint32_t count = 1;                       // kCount
  std::vector<std::vector<uint32_t>> npus;  // kList, one group of device ids per slot
  bool operator==(const SlotsSpec&) const = default;
};

// Reads the `slots:` value; errors name the key path under `where`.
absl::StatusOr<SlotsSpec> ParseSlotsSpec(const YAML::Node& node, const std::string& where);

// One NPU chip of the host as npu-smi shows it (agent/npu_smi.h), with the
// NUMA node its PCIe link hangs off when `npu-smi info -t topo` says. `id` is
// the device id, what npuDeviceIds takes (a 300I Duo's two chips share card
// 1792 and are devices 0 and 1); the card and chip only name it in messages.
struct HostNpu {
  uint32_t id = 0;
  std::optional<uint32_t> numa_node;
  uint32_t card_id = 0;  // npu-smi's NPU column
  uint32_t chip_id = 0;  // the chip on that card
};

struct SlotLayout {
  uint32_t index = 0;
  std::vector<uint32_t> npus;  // npuDeviceIds of its config.json; worldSize = size
  std::vector<uint32_t> cpus;  // its daemon's; empty: not pinned
};

struct SlotPlan {
  std::vector<SlotLayout> slots;
  std::vector<uint32_t> client_cpus;  // no daemon's; empty: not pinned
  // How the CPUs were divided: "odd-numa", "npu-affinity", "even-split" or
  // "unpinned", with the reason in `cpu_note` for the last.
  std::string cpu_rule;
  std::string cpu_note;
};

// The groups and CPUs of `spec` on a host with `npus` (empty: npu-smi
// absent) for a model of `world_size` cards. Groups are of device ids:
// `auto` and a count take the host's device ids in ascending order (each chip
// once, so a 300I Duo's two chips are one group of worldSize 2), a list is
// checked against them. The CPU rule, in order:
// - odd-numa, the practice's: at least as many odd NUMA nodes (with online
//   CPUs) as slots. Their CPUs, in node order, are split into equal
//   contiguous shares, one per slot; the even nodes' CPUs run the clients.
// - npu-affinity: every slot's NPUs have a known NUMA node, and some node
//   has no slot. Each node's CPUs are split equally among the slots whose
//   first NPU hangs off it; the nodes without a slot run the clients.
// - even-split: the online CPUs in equal contiguous shares, one per slot and
//   the last for the clients.
// - unpinned: fewer online CPUs than slots + 1; nothing is pinned.
// INVALID_ARGUMENT for a spec the host cannot satisfy: an NPU it does not
// have, one listed in two slots, more NPUs than it has, `auto` without NPUs,
// and for a host listing a device id twice.
absl::StatusOr<SlotPlan> PlanSlots(const SlotsSpec& spec, const std::vector<HostNpu>& npus,
                                   uint32_t world_size, const Topology& topology);

}  // namespace crest::agent
