// npu-smi-sim: `npu-smi info` and `npu-smi info -t topo` for the simulated
// host of mindie-sim (sim/npu_host.h): every NPU, its HBM use and the process
// holding it, and the cards' CPU affinity, in the real tool's shapes, so the
// agent reads simulated and real hosts alike.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/command_line.h"
#include "common/topology.h"
#include "sim/npu_host.h"

int main(int argc, char** argv) {
  CLI::App app{
      "npu-smi for mindie-sim's simulated host ($MINDIE_SIM_NPU_DIR, else "
      "$MIES_INSTALL_PATH/run/npu; $MINDIE_SIM_NPU_COUNT NPUs, default 8, in the card layout "
      "of --layout; the NUMA layout of $MINDIE_SIM_SYSFS_ROOT, default /sys)",
      "npu-smi-sim"};
  auto* info = app.add_subcommand("info", "the NPUs, their HBM use and their processes");
  std::string type;
  info->add_option("-t", type, "topo: the cards' links and CPU affinity")
      ->check(CLI::IsMember({"topo"}));
  std::string layout_name;
  app.add_option("--layout", layout_name,
                 "the card layout to print: 910b (one chip per card), 310p-duo (Atlas 300I Duo: "
                 "two 310P3 chips per card, DDR), a3 (two Ascend910 dies per card); default "
                 "$MINDIE_SIM_NPU_LAYOUT, else 910b");
  app.require_subcommand(1);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  auto getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  };
  if (layout_name.empty()) layout_name = getenv("MINDIE_SIM_NPU_LAYOUT").value_or("910b");
  auto layout = crest::sim::ParseNpuLayout(layout_name);
  if (!layout.ok()) return crest::FailWithMessage(app, std::string(layout.status().message()));
  const char* install = std::getenv("MIES_INSTALL_PATH");
  auto host = crest::sim::NpuHostFromEnv(install == nullptr ? "" : install, getenv);
  if (!host.ok()) return crest::FailWithMessage(app, std::string(host.status().message()));
  std::string out;
  if (type == "topo") {
    auto topology = crest::ReadTopology(getenv("MINDIE_SIM_SYSFS_ROOT").value_or("/sys"));
    if (!topology.ok())
      return crest::FailWithMessage(app, std::string(topology.status().message()));
    out = crest::sim::FormatNpuSmiTopo(*host, *topology);
  } else {
    out = crest::sim::FormatNpuSmiInfo(crest::sim::ReadNpuHost(*host), *layout);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
