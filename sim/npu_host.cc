#include "sim/npu_host.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/mindie_limits.h"

namespace crest::sim {
namespace {

constexpr int kMaxDevices = mindie::kNpuDeviceId.max + 1;

std::string LockPath(const NpuHost& host, int id) {
  return absl::StrCat(host.dir, "/npu", id, ".lock");
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[512];
  off_t at = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

// The holder's record; fields a half-written record lacks stay default.
NpuState ParseRecord(int id, const std::string& text) {
  NpuState s;
  s.id = id;
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return s;
  s.chip = doc.value("chip", "");
  s.hbm_used_mib = doc.value("hbm_used_mib", uint64_t{0});
  s.hbm_total_mib = doc.value("hbm_total_mib", uint64_t{0});
  s.process_name = doc.value("process", "");
  if (doc.contains("pid") && doc["pid"].is_number_integer())
    s.holder_pid = doc["pid"].get<int64_t>();
  return s;
}

}  // namespace

absl::StatusOr<NpuHost> NpuHostFromEnv(
    const std::string& install_dir,
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  NpuHost host;
  if (auto dir = getenv("MINDIE_SIM_NPU_DIR"); dir && !dir->empty()) {
    host.dir = *dir;
  } else if (!install_dir.empty()) {
    host.dir = absl::StrCat(install_dir, "/run/npu");
  } else {
    return absl::InvalidArgumentError(
        "no simulated host: set MINDIE_SIM_NPU_DIR or MIES_INSTALL_PATH (its run/npu folder)");
  }
  if (auto count = getenv("MINDIE_SIM_NPU_COUNT"); count && !count->empty()) {
    int n = 0;
    if (!absl::SimpleAtoi(*count, &n) || n < 1 || n > kMaxDevices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MINDIE_SIM_NPU_COUNT: \"", *count, "\" is not a count, expected 1..", kMaxDevices));
    }
    host.device_count = n;
  }
  return host;
}

absl::StatusOr<NpuClaim> NpuClaim::Acquire(const NpuHost& host, const std::vector<int>& ids,
                                           const NpuUse& use) {
  for (int id : ids) {
    if (id < 0 || id >= host.device_count) {
      return absl::InvalidArgumentError(absl::StrCat("NPU ", id, " does not exist: the host has ",
                                                     host.device_count, " NPUs (0..",
                                                     host.device_count - 1, ")"));
    }
  }
  if (auto made = MakeDirectories(host.dir); !made.ok()) return made;
  NpuClaim claim;
  for (int id : ids) {
    const std::string path = LockPath(host, id);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("NPU ", id, ": opening ", path, ": ", std::strerror(errno)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      NpuState holder = ParseRecord(id, ReadFd(fd));
      ::close(fd);
      if (err != EWOULDBLOCK) {
        return absl::FailedPreconditionError(
            absl::StrCat("NPU ", id, ": locking ", path, ": ", std::strerror(err)));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "NPU ", id, " is in use by process ",
          holder.holder_pid ? absl::StrCat(*holder.holder_pid) : std::string("(unknown)"),
          holder.process_name.empty() ? "" : absl::StrCat(" (", holder.process_name, ")"),
          ": a device serves one process at a time"));
    }
    claim.fds_.push_back(fd);  // from here the destructor releases it
    nlohmann::json record = {{"pid", static_cast<int64_t>(::getpid())},
                             {"process", use.process_name},
                             {"chip", use.chip},
                             {"hbm_used_mib", use.hbm_used_mib},
                             {"hbm_total_mib", use.hbm_total_mib}};
    const std::string text = record.dump() + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("NPU ", id, ": writing ", path, ": ", std::strerror(errno)));
    }
  }
  return claim;
}

NpuClaim::NpuClaim(NpuClaim&& other) noexcept : fds_(std::exchange(other.fds_, {})) {}

NpuClaim& NpuClaim::operator=(NpuClaim&& other) noexcept {
  if (this != &other) {
    Release();
    fds_ = std::exchange(other.fds_, {});
  }
  return *this;
}

NpuClaim::~NpuClaim() { Release(); }

void NpuClaim::Release() {
  for (int fd : fds_) {
    // Emptied first: a reader that finds the lock free reads no stale use.
    (void)::ftruncate(fd, 0);
    ::close(fd);
  }
  fds_.clear();
}

std::vector<NpuState> ReadNpuHost(const NpuHost& host) {
  std::vector<NpuState> out;
  for (int id = 0; id < host.device_count; ++id) {
    NpuState free_device;
    free_device.id = id;
    free_device.chip = host.chip;
    free_device.hbm_total_mib = host.hbm_total_mib;
    int fd = ::open(LockPath(host, id).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      out.push_back(free_device);
      continue;
    }
    // A lock we can share is nobody's: whatever the file says is stale.
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
      ::close(fd);
      out.push_back(free_device);
      continue;
    }
    NpuState held = ParseRecord(id, ReadFd(fd));
    ::close(fd);
    if (held.chip.empty()) held.chip = host.chip;
    if (held.hbm_total_mib == 0) held.hbm_total_mib = host.hbm_total_mib;
    if (!held.holder_pid) held.holder_pid = 0;  // claimed, record not written yet
    out.push_back(held);
  }
  return out;
}

absl::StatusOr<NpuLayout> ParseNpuLayout(const std::string& text) {
  if (text == "910b") return NpuLayout::k910b;
  if (text == "310p-duo") return NpuLayout::k310pDuo;
  if (text == "a3") return NpuLayout::kA3;
  return absl::InvalidArgumentError(
      absl::StrCat("--layout: \"", text, "\" is not a layout; expected 910b, 310p-duo or a3"));
}

namespace {

// A layout's header and how it names a device's card and chip.
struct LayoutShape {
  const char* second_header;  // the second header row's first column
  const char* name;           // the chip's Name, whatever the simulated profile's device
  int chips_per_card;
  int first_card;  // the first card's NPU id (a 300I Duo's real cards start at 1)
  bool hbm;
};

LayoutShape ShapeOf(NpuLayout layout) {
  switch (layout) {
    case NpuLayout::k310pDuo:
      return {"Chip    Device", "310P3", 2, 1, false};
    case NpuLayout::kA3:
      return {"Chip  Phy-ID", "Ascend910", 2, 0, true};
    case NpuLayout::k910b:
      break;
  }
  return {"Chip", "", 1, 0, true};
}

}  // namespace

std::string FormatNpuSmiInfo(const std::vector<NpuState>& devices, NpuLayout layout) {
  const LayoutShape shape = ShapeOf(layout);
  const std::string rule =
      "+---------------------------+---------------+----------------------------------------------"
      "------+\n";
  const std::string double_rule =
      "+===========================+===============+=============================================="
      "======+\n";
  std::string out = rule;
  out += absl::StrFormat("| %-94s |\n", "npu-smi (mindie-sim)              Version: sim");
  out += rule;
  out +=
      "| NPU   Name                | Health        | Power(W)    Temp(C)           "
      "Hugepages-Usage(page)|\n";
  out += absl::StrFormat("| %-25s | Bus-Id        | AICore(%%)   Memory-Usage(MB)  %-20s |\n",
                         shape.second_header, shape.hbm ? "HBM-Usage(MB)" : "");
  out += double_rule;
  auto card_of = [&shape](int id) { return shape.first_card + id / shape.chips_per_card; };
  auto chip_of = [&shape](int id) { return id % shape.chips_per_card; };
  for (const NpuState& d : devices) {
    const bool busy = d.holder_pid.has_value();
    const std::string name = shape.name[0] != '\0' ? shape.name : d.chip;
    std::string power = busy ? "210.0" : "90.0";
    if (layout == NpuLayout::k310pDuo) power = "NA";
    if (layout == NpuLayout::kA3 && chip_of(d.id) == 1) power = "-";
    out += absl::StrFormat("| %-5d %-19s | %-13s | %-11s %-17s %-20s |\n", card_of(d.id), name,
                           "OK", power, "40", "0    / 0");
    const std::string usage = absl::StrCat(d.hbm_used_mib, " / ", d.hbm_total_mib);
    const std::string chip_and_id =
        layout == NpuLayout::k910b ? "0" : absl::StrFormat("%-5d %d", chip_of(d.id), d.id);
    out += absl::StrFormat("| %-25s | %-13s | %-11d %-17s %-20s |\n", chip_and_id,
                           absl::StrFormat("0000:%02X:00.0", 0xC1 + d.id / shape.chips_per_card),
                           busy ? 60 : 0, shape.hbm ? "0    / 0" : usage, shape.hbm ? usage : "");
    const bool last_of_card = chip_of(d.id) == shape.chips_per_card - 1;
    out += last_of_card ? double_rule : rule;
  }
  out +=
      "| NPU     Chip              | Process id    | Process name             | Process "
      "memory(MB)      |\n";
  out += double_rule;
  for (const NpuState& d : devices) {
    if (d.holder_pid) {
      out += absl::StrFormat("| %-7d %-17d | %-13d | %-24s | %-23d |\n", card_of(d.id),
                             chip_of(d.id), *d.holder_pid, d.process_name, d.hbm_used_mib);
    } else {
      out += absl::StrFormat("| %-94s |\n",
                             absl::StrCat("No running processes found in NPU ", card_of(d.id)));
    }
    out += double_rule;
  }
  return out;
}

std::string FormatNpuSmiTopo(const NpuHost& host, const Topology& topology) {
  std::vector<std::vector<uint32_t>> nodes;
  for (const NumaNodeInfo& node : topology.numa_nodes) {
    std::vector<uint32_t> online;
    for (uint32_t c : node.cpus) {
      if (topology.IsOnline(c)) online.push_back(c);
    }
    if (!online.empty()) nodes.push_back(std::move(online));
  }
  std::string out = absl::StrFormat("%-11s", "");
  for (int i = 0; i < host.device_count; ++i)
    out += absl::StrFormat("%-11s", absl::StrCat("NPU", i));
  out += "CPU Affinity\n";
  for (int i = 0; i < host.device_count; ++i) {
    out += absl::StrFormat("%-11s", absl::StrCat("NPU", i));
    for (int j = 0; j < host.device_count; ++j)
      out += absl::StrFormat("%-11s", i == j ? "X" : "HCCS");
    const size_t node = nodes.empty() ? 0
                                      : static_cast<size_t>(i) * nodes.size() /
                                            static_cast<size_t>(host.device_count);
    out += nodes.empty() ? std::string("NA") : FormatCpuList(nodes[node]);
    out += "\n";
  }
  out +=
      "\nLegend:\n\n  X    = Self\n  HCCS = Connection traversing HCCS.\n  NA   = Unknown "
      "relationship.\n";
  return out;
}

}  // namespace crest::sim
