#include "agent/testing/fake_sysfs.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include "common/cpu_list.h"

namespace crest::agent::testing {
namespace {

void Write(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << contents << "\n";
}

}  // namespace

std::string WriteFakeSysfs(const std::string& root, const FakeSysfsSpec& spec) {
  std::vector<uint32_t> all;
  for (size_t n = 0; n < spec.numa_nodes.size(); ++n) {
    Write(absl::StrCat(root, "/devices/system/node/node", n, "/cpulist"),
          FormatCpuList(spec.numa_nodes[n]));
    all.insert(all.end(), spec.numa_nodes[n].begin(), spec.numa_nodes[n].end());
  }
  std::sort(all.begin(), all.end());
  std::string cpu = root + "/devices/system/cpu";
  Write(cpu + "/possible", FormatCpuList(all));
  Write(cpu + "/online", spec.online.empty() ? FormatCpuList(all) : spec.online);
  for (uint32_t c : all) {
    std::string dir = absl::StrCat(cpu, "/cpu", c);
    std::filesystem::create_directories(dir);
    if (spec.cpufreq) {
      Write(dir + "/cpufreq/scaling_governor", spec.governor);
      Write(dir + "/cpufreq/scaling_available_governors", spec.available_governors);
    }
  }
  if (spec.thp) Write(root + "/kernel/mm/transparent_hugepage/enabled", spec.thp_enabled);
  return root;
}

std::string ReadFakeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

}  // namespace crest::agent::testing
