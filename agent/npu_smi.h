// npu-smi's two tables read into data: `npu-smi info` (the overview, two rows
// per chip) and `npu-smi info -t topo` (the link matrix with each device's CPU
// affinity). Every layout of tests/data/real/npu-smi/ and npu-smi-topo/ is
// read (their SOURCES.md name where each came from; the facts below are from
// tests/data/real/FINDINGS-npu-smi-benchmark-aisbench.md); anything else is an
// error naming the line and what was expected, never a guessed id.
//
// Three ids per chip:
// - card id: the NPU column of a chip's first row (`npu-smi info -i`); not
//   contiguous and can be large (1792, 2048, or 1,2,4,5 on a 300I Duo host).
// - chip id: the first column of the second row, the chip on that card (`-c`).
// - device id: what MindIE's npuDeviceIds and ASCEND_RT_VISIBLE_DEVICES take.
//   The second row's header says where it is:
//   `Chip    Device`  the Device column, counting 0..n-1 over the host: 300I Duo
//                     (310P3, two chips per card: 300i-duo-310p3-*.txt), 310B4
//                     (310b4-npu-smi-23.0.0-alarm.txt), the old 310 of npu-smi
//                     20.x/21.x (four chips per card from NPU 2048:
//                     atlas300-310-5card-20chip-npu-smi-20.2.2.txt,
//                     310-1chip-npu-smi-21.0.3.1-busid-NA.txt);
//   `Chip  Phy-ID`    the Phy-ID column: A3 (Ascend910, two dies per card,
//                     a3-ascend910-*.txt);
//   `Chip` alone      no id column: 910B and 910A, one chip per card (chip 0).
//                     The device id is the chip's 0-based order in the table:
//                     the runtime numbers the devices it sees from 0 in the
//                     order npu-smi lists them, so a full 910B host gives
//                     NPU k = device k (910b3-8card-*.txt) and a container that
//                     maps NPUs 3 and 6 gives devices 0 and 1
//                     (910b4-2card-npu-smi-24.1.rc3-ids-3-6.txt; FINDINGS 1.3).
//                     A chip other than 0 in this layout is an error: its
//                     device id cannot be known.
// Device ids must be unique, and so must (card, chip) pairs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "crest/v1/agent.pb.h"

namespace crest::agent {

// The memory a chip's row reports: HBM-Usage when the layout has it (910B,
// 910A, A3), else Memory-Usage, the chip's DDR (310P3, 310B4, 310).
enum class NpuMemoryKind { kHbm, kDdr };

// Where a layout's device ids come from (see above).
enum class NpuIdSource { kDeviceColumn, kPhyIdColumn, kOrder };

struct NpuChip {
  uint32_t card_id = 0;
  uint32_t chip_id = 0;
  uint32_t device_id = 0;
  std::string name;               // e.g. "910B3", "310P3", "Ascend910"
  std::string health;             // as printed: OK, Warning, Alarm, Critical
  std::string bus_id;             // "0000:C1:00.0" or "NA"
  std::optional<double> power_w;  // absent for "-" (an A3 card's second die) and "NA" (310P3)
  NpuMemoryKind memory_kind = NpuMemoryKind::kHbm;
  uint64_t memory_used_mib = 0;
  uint64_t memory_total_mib = 0;
  size_t line = 0;  // 1-based line of the chip's first row
};

struct NpuSmiInfo {
  std::string version;  // "24.1.rc2"; empty without a `| npu-smi <version> ...` line
  NpuIdSource id_source = NpuIdSource::kOrder;
  std::vector<NpuChip> chips;  // in npu-smi's order; empty when it lists none
};

// Parses `npu-smi info`. The table is split on `|` and whitespace, not on
// fixed columns (widths differ per layout); `20701/ 65536`, trailing spaces
// after the last `|` and a process table after the chips are read as printed.
// INVALID_ARGUMENT ("npu-smi info line N: expected ..., got \"...\"") for a
// header, row or id it does not know.
absl::StatusOr<NpuSmiInfo> ParseNpuSmiInfo(absl::string_view text);

// One chip in the agent's NodeInfo: id is the device id.
crest::v1::NpuDevice ToNpuDevice(const NpuChip& chip);
std::vector<crest::v1::NpuDevice> ToNpuDevices(const NpuSmiInfo& info);

// How `npu-smi info -t topo` labels its rows and columns: `NPU<k>` (910B,
// 910b*-topo-*.txt, the doc examples) or `Phy-ID<k>` (A3,
// a3-2die-container-topo-phyid-sio-sglang.txt).
enum class NpuTopoLabel { kNpu, kPhyId };

struct NpuTopoRow {
  uint32_t index = 0;                  // k of the row's label
  std::vector<std::string> links;      // one per column, in header order: X, HCCS, SIO, SYS, ...
  std::vector<uint32_t> cpu_affinity;  // empty: no CPU Affinity column, or NA
};

struct NpuSmiTopo {
  NpuTopoLabel label = NpuTopoLabel::kNpu;
  std::vector<uint32_t> columns;  // the header's k, in order
  bool has_cpu_affinity = false;
  std::vector<NpuTopoRow> rows;  // one per column, in npu-smi's order
};

// Parses `npu-smi info -t topo`: a header of labels (it may start with a tab
// or spaces) and an optional `CPU Affinity` column, one row per label whose
// own column is `X`, then anything (Legend:) after the first line that is not
// a row. INVALID_ARGUMENT naming the line for anything else.
absl::StatusOr<NpuSmiTopo> ParseNpuSmiTopo(absl::string_view text);

// Each device's CPU affinity (device id -> CPUs) from the two tables:
// `Phy-ID<k>` is device k; `NPU<k>` is card k (every chip of it), the NPU
// column of `npu-smi info`, as `npu-smi info -t ... -i <k>` takes it (on a full
// 910B host card k is device k; the corpus has no multi-chip card with NPU
// labels, so this is an inference from the naming). A label matching no chip,
// and a row without an affinity, are left out.
std::map<uint32_t, std::vector<uint32_t>> DeviceCpuAffinity(const NpuSmiInfo& info,
                                                            const NpuSmiTopo& topo);

}  // namespace crest::agent
