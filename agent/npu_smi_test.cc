#include "agent/npu_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <numeric>
#include <ostream>
#include <set>
#include <tuple>
#include <utility>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace crest::agent {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

std::string InfoDir() { return crest::testing::SourceDir() + "/tests/data/real/npu-smi"; }
std::string TopoDir() { return crest::testing::SourceDir() + "/tests/data/real/npu-smi-topo"; }

std::string ReadCorpusFile(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_THAT(text, IsOk()) << path;
  return text.ok() ? *text : std::string();
}

std::string InfoFile(const std::string& name) { return ReadCorpusFile(InfoDir() + "/" + name); }
std::string TopoFile(const std::string& name) { return ReadCorpusFile(TopoDir() + "/" + name); }

std::vector<uint32_t> Iota(uint32_t n) {
  std::vector<uint32_t> out(n);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

// `per_card` chips on each of `cards`, in order.
std::vector<uint32_t> Repeat(const std::vector<uint32_t>& cards, uint32_t per_card) {
  std::vector<uint32_t> out;
  for (uint32_t c : cards) out.insert(out.end(), per_card, c);
  return out;
}

std::vector<uint32_t> Cycle(uint32_t per_card, uint32_t cards) {
  std::vector<uint32_t> out;
  for (uint32_t c = 0; c < cards; ++c) {
    for (uint32_t i = 0; i < per_card; ++i) out.push_back(i);
  }
  return out;
}

// The .txt files of a corpus folder.
std::set<std::string> CorpusFiles(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".txt") out.insert(entry.path().filename().string());
  }
  return out;
}

// What one real `npu-smi info` output must read as.
struct InfoCase {
  std::string file;
  std::string version;
  NpuIdSource id_source = NpuIdSource::kOrder;
  std::string name;
  NpuMemoryKind memory = NpuMemoryKind::kHbm;
  std::vector<uint32_t> devices;  // device ids, in npu-smi's order
  std::vector<uint32_t> cards;    // NPU column
  std::vector<uint32_t> chips;    // chip on the card
  std::set<size_t> powerless;     // rows printing "-" or "NA" for Power(W)
  // One row read in full.
  size_t row = 0;
  std::string health;
  std::optional<double> power;
  uint64_t used = 0;
  uint64_t total = 0;

  InfoCase& Ids(std::vector<uint32_t> device_ids, std::vector<uint32_t> card_ids,
                std::vector<uint32_t> chip_ids) {
    devices = std::move(device_ids);
    cards = std::move(card_ids);
    chips = std::move(chip_ids);
    return *this;
  }
  InfoCase& NoPower(std::set<size_t> rows) {
    powerless = std::move(rows);
    return *this;
  }
  InfoCase& Row(size_t index, std::string row_health, std::optional<double> watts,
                uint64_t used_mib, uint64_t total_mib) {
    row = index;
    health = std::move(row_health);
    power = watts;
    used = used_mib;
    total = total_mib;
    return *this;
  }
};

InfoCase Sample(std::string file, std::string version, NpuIdSource id_source, std::string name,
                NpuMemoryKind memory) {
  InfoCase c;
  c.file = std::move(file);
  c.version = std::move(version);
  c.id_source = id_source;
  c.name = std::move(name);
  c.memory = memory;
  return c;
}

// A failure names the file, not the case's bytes.
void PrintTo(const InfoCase& c, std::ostream* os) { *os << c.file; }

const std::vector<InfoCase>& InfoCases() {
  using K = NpuIdSource;
  constexpr NpuMemoryKind kDdr = NpuMemoryKind::kDdr;
  constexpr NpuMemoryKind kHbm = NpuMemoryKind::kHbm;
  static const auto* cases = new std::vector<InfoCase>{
      // 300I Duo: two chips per card, the Device column counts over the host.
      Sample("300i-duo-310p3-1card-npu-smi-24.1.rc2-id1792.txt", "24.1.rc2", K::kDeviceColumn,
             "310P3", kDdr)
          .Ids({0, 1}, {1792, 1792}, {0, 1})
          .NoPower({0, 1})
          .Row(1, "OK", std::nullopt, 1041, 43693),
      Sample("300i-duo-310p3-2card-npu-smi-24.1.0.1-mindie-procs.txt", "24.1.0.1", K::kDeviceColumn,
             "310P3", kDdr)
          .Ids(Iota(4), Repeat({1, 2}, 2), Cycle(2, 2))
          .NoPower({0, 1, 2, 3})
          .Row(0, "OK", std::nullopt, 16302, 44280),
      Sample("300i-duo-310p3-4card-npu-smi-25.0.rc1.b033-critical.txt", "25.0.rc1.b033",
             K::kDeviceColumn, "310P3", kDdr)
          .Ids(Iota(8), Repeat({1, 2, 4, 5}, 2), Cycle(2, 4))
          .NoPower({0, 1, 2, 3, 4, 5, 6, 7})
          .Row(4, "Critical", std::nullopt, 1793, 44280),
      // The old 310 and the 310B4: a Device column too.
      Sample("310-1chip-npu-smi-21.0.3.1-busid-NA.txt", "21.0.3.1", K::kDeviceColumn, "310", kDdr)
          .Ids({0}, {0}, {0})
          .Row(0, "OK", 12.8, 5324, 8192),
      Sample("310b4-npu-smi-23.0.0-alarm.txt", "23.0.0", K::kDeviceColumn, "310B4", kDdr)
          .Ids({0}, {0}, {0})
          .Row(0, "Alarm", 0.0, 3628, 15609),
      Sample("atlas300-310-5card-20chip-npu-smi-20.2.2.txt", "20.2.2", K::kDeviceColumn, "310",
             kDdr)
          .Ids(Iota(20), Repeat({2048, 2049, 2050, 2051, 2052}, 4), Cycle(4, 5))
          .Row(10, "OK", 12.8, 2621, 8192),
      // 910A / 910B: one chip per card, no id column: the order.
      Sample("910a-2card-npu-smi-21.0.4-ddr-and-hbm.txt", "21.0.4", K::kOrder, "910A", kHbm)
          .Ids({0, 1}, {0, 1}, {0, 0})
          .Row(1, "OK", 67.2, 1, 32768),
      Sample("910b-3card-npu-smi-23.0.0-ddr-and-hbm.txt", "23.0.0", K::kOrder, "910B", kHbm)
          .Ids({0, 1, 2}, {0, 1, 2}, {0, 0, 0})
          .Row(2, "OK", 69.4, 1, 32768),
      Sample("910b2c-2card-npu-smi-23.0.2.1-trailing-space.txt", "23.0.2.1", K::kOrder, "910B2C",
             kHbm)
          .Ids({0, 1}, {0, 1}, {0, 0})
          .Row(0, "OK", 88.6, 20701, 65536),
      Sample("910b3-8card-npu-smi-23.0.0-idle.txt", "23.0.0", K::kOrder, "910B3", kHbm)
          .Ids(Iota(8), Iota(8), Repeat({0}, 8))
          .Row(0, "OK", 92.2, 3314, 65536),
      Sample("910b3-8card-npu-smi-24.1.0-loaded.txt", "24.1.0", K::kOrder, "910B3", kHbm)
          .Ids(Iota(8), Iota(8), Repeat({0}, 8))
          .Row(7, "OK", 167.5, 62698, 65536),
      Sample("910b3-8card-npu-smi-25.0.rc1.b010-empty-procname.txt", "25.0.rc1.b010", K::kOrder,
             "910B3", kHbm)
          .Ids(Iota(8), Iota(8), Repeat({0}, 8))
          .Row(0, "OK", 124.9, 59718, 65536),
      // A container mapping NPUs 3 and 6: the runtime sees devices 0 and 1.
      Sample("910b4-2card-npu-smi-24.1.rc3-ids-3-6.txt", "24.1.rc3", K::kOrder, "910B4", kHbm)
          .Ids({0, 1}, {3, 6}, {0, 0})
          .Row(1, "OK", 90.6, 2912, 32768),
      // A3: two dies per card, the Phy-ID column; the second die's power is "-".
      Sample("a3-ascend910-2card-4chip-npu-smi-25.2.0-nputop.txt", "25.2.0", K::kPhyIdColumn,
             "Ascend910", kHbm)
          .Ids(Iota(4), Repeat({0, 1}, 2), Cycle(2, 2))
          .NoPower({1, 3})
          .Row(3, "OK", std::nullopt, 10568, 65536),
      Sample("a3-ascend910-8card-16chip-npu-smi-25.3.rc1.txt", "25.3.rc1", K::kPhyIdColumn,
             "Ascend910", kHbm)
          .Ids(Iota(16), Repeat(Iota(8), 2), Cycle(2, 8))
          .NoPower({1, 3, 5, 7, 9, 11, 13, 15})
          .Row(8, "OK", 171.5, 58072, 65536),
  };
  return *cases;
}

TEST(NpuSmiInfoTest, TheTableCoversEveryFileOfTheCorpus) {
  std::set<std::string> covered;
  for (const InfoCase& c : InfoCases()) covered.insert(c.file);
  EXPECT_EQ(covered, CorpusFiles(InfoDir()));
}

class NpuSmiInfoCorpusTest : public ::testing::TestWithParam<InfoCase> {};

TEST_P(NpuSmiInfoCorpusTest, ReadsEveryChipWithItsIds) {
  const InfoCase& c = GetParam();
  auto info = ParseNpuSmiInfo(InfoFile(c.file));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->version, c.version);
  EXPECT_EQ(info->id_source, c.id_source);
  ASSERT_EQ(info->chips.size(), c.devices.size());
  std::vector<uint32_t> devices;
  std::vector<uint32_t> cards;
  std::vector<uint32_t> chips;
  std::set<size_t> powerless;
  for (size_t i = 0; i < info->chips.size(); ++i) {
    const NpuChip& chip = info->chips[i];
    devices.push_back(chip.device_id);
    cards.push_back(chip.card_id);
    chips.push_back(chip.chip_id);
    if (!chip.power_w) powerless.insert(i);
    EXPECT_EQ(chip.name, c.name) << i;
    EXPECT_EQ(chip.memory_kind, c.memory) << i;
    EXPECT_GT(chip.memory_total_mib, chip.memory_used_mib) << i;
  }
  EXPECT_EQ(devices, c.devices);
  EXPECT_EQ(cards, c.cards);
  EXPECT_EQ(chips, c.chips);
  EXPECT_EQ(powerless, c.powerless);
  const NpuChip& row = info->chips[c.row];
  EXPECT_EQ(row.health, c.health);
  EXPECT_EQ(row.power_w, c.power);
  EXPECT_EQ(row.memory_used_mib, c.used);
  EXPECT_EQ(row.memory_total_mib, c.total);
}

INSTANTIATE_TEST_SUITE_P(Corpus, NpuSmiInfoCorpusTest, ::testing::ValuesIn(InfoCases()),
                         [](const ::testing::TestParamInfo<InfoCase>& p) {
                           std::string name = p.param.file.substr(0, p.param.file.find(".txt"));
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(NpuSmiInfoTest, EachChipBecomesANodeInfoDeviceNamedByItsDeviceId) {
  auto duo = ParseNpuSmiInfo(InfoFile("300i-duo-310p3-1card-npu-smi-24.1.rc2-id1792.txt"));
  ASSERT_THAT(duo, IsOk());
  std::vector<crest::v1::NpuDevice> devices = ToNpuDevices(*duo);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].id(), 1u);
  EXPECT_EQ(devices[1].card_id(), 1792u);
  EXPECT_EQ(devices[1].chip_id(), 1u);
  EXPECT_EQ(devices[1].memory_kind(), crest::v1::NPU_MEMORY_DDR);
  EXPECT_EQ(devices[1].memory_used_mib(), 1041u);
  EXPECT_EQ(devices[1].hbm_total_mib(), 0u) << "DDR is not HBM";
  EXPECT_FALSE(devices[1].has_power_w());

  auto a3 = ParseNpuSmiInfo(InfoFile("a3-ascend910-2card-4chip-npu-smi-25.2.0-nputop.txt"));
  ASSERT_THAT(a3, IsOk());
  crest::v1::NpuDevice die = ToNpuDevice(a3->chips[2]);
  EXPECT_EQ(die.id(), 2u);
  EXPECT_EQ(die.card_id(), 1u);
  EXPECT_EQ(die.memory_kind(), crest::v1::NPU_MEMORY_HBM);
  EXPECT_EQ(die.hbm_used_mib(), 3116u);
  EXPECT_EQ(die.hbm_total_mib(), 65536u);
  ASSERT_TRUE(die.has_power_w());
  EXPECT_DOUBLE_EQ(die.power_w(), 167.1);
}

// Real tables with one thing changed: each must be refused naming the line
// and what was expected, never read with a guessed id.
struct BrokenCase {
  std::string label;
  std::string file;
  std::string from;
  std::string to;
  std::string error;  // a substring of the message
};

TEST(NpuSmiInfoTest, AnythingUnknownIsAnErrorNamingTheLine) {
  const std::string duo = "300i-duo-310p3-1card-npu-smi-24.1.rc2-id1792.txt";
  const std::string b3 = "910b3-8card-npu-smi-23.0.0-idle.txt";
  const std::vector<BrokenCase> cases = {
      {"an unknown id column", duo, "| Chip    Device     ", "| Chip    Logic-ID   ",
       "line 5: expected the second header row `| Chip [Device|Phy-ID] |"},
      {"an unknown memory column", b3, "HBM-Usage(MB)   ", "SRAM-Usage(MB)  ",
       "line 5: expected the second header row"},
      {"an unknown first header", b3, "Power(W)    Temp(C)", "Temp(C)     Power(W)",
       "line 4: expected the header `| NPU Name | Health | Power(W) Temp(C)"},
      {"a pair without its slash", duo, "1821 / 44280", "1821   44280",
       "line 8: expected the chip's second row `| <Chip> <Device id> | <Bus-Id> |"},
      {"a non-numeric card", b3, "| 3     910B3", "| x3    910B3",
       "line 16: expected a chip's first row `| <NPU id> <Name> |"},
      {"a power that is not a number", b3, "| 94.7 ", "| 9x.7 ", "line 16: expected a power"},
      {"a second chip where no column gives its id", b3,
       "| 0                         | 0000:82:00.0", "| 1                         | 0000:82:00.0",
       "line 17: expected chip 0: this layout has no Device or Phy-ID column"},
      {"a device id twice", duo, "| 1       1                     | 0000:07",
       "| 1       0                     | 0000:07", "line 10: device id 0 again (first on line 7)"},
      {"a chip listed twice", duo, "| 1       1                     | 0000:07",
       "| 0       1                     | 0000:07", "line 10: NPU 1792 chip 0 again"},
      {"a stray line among the chips", b3,
       "+===========================+===============+======"
       "==============================================+\n| 1 ",
       "garbage\n| 1 ", "line 9: expected a `| ... |` row or a `+---+` rule"},
  };
  for (const BrokenCase& c : cases) {
    std::string text = InfoFile(c.file);
    ASSERT_NE(text.find(c.from), std::string::npos) << c.label;
    text.replace(text.find(c.from), c.from.size(), c.to);
    EXPECT_THAT(ParseNpuSmiInfo(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("npu-smi info"), HasSubstr(c.error))))
        << c.label;
  }
}

TEST(NpuSmiInfoTest, OutputWithoutATableOrCutShortIsAnError) {
  EXPECT_THAT(ParseNpuSmiInfo("npu-smi: command not found\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("expected the header `| NPU Name | Health |"),
                             HasSubstr("npu-smi: command not found"))));
  std::string text = InfoFile("910b4-2card-npu-smi-24.1.rc3-ids-3-6.txt");
  text.resize(text.find("| 0                         | 0000:82:00.0"));
  EXPECT_THAT(ParseNpuSmiInfo(text),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 11: expected the chip's second row")));
}

TEST(NpuSmiInfoTest, AHostWithoutChipsListsNone) {
  std::string text = InfoFile("910b4-2card-npu-smi-24.1.rc3-ids-3-6.txt");
  text.resize(text.find("| 3     910B4"));
  auto info = ParseNpuSmiInfo(text);
  ASSERT_THAT(info, IsOk());
  EXPECT_THAT(info->chips, IsEmpty());
}

// What one real `npu-smi info -t topo` output must read as.
struct TopoCase {
  std::string file;
  NpuTopoLabel label;
  std::vector<uint32_t> columns;
  bool has_cpu_affinity;
  // Row -> its link to another column, and its CPU affinity's first CPU and size.
  std::vector<std::tuple<size_t, size_t, std::string>> links;
  std::vector<std::tuple<size_t, uint32_t, size_t>> affinity;
};

TEST(NpuSmiTopoTest, EveryFileOfTheCorpusIsRead) {
  const std::vector<TopoCase> cases = {
      {"910b1-8card-topo-hccs-arthurchiao.txt",
       NpuTopoLabel::kNpu,
       Iota(8),
       true,
       {{0, 7, "HCCS"}, {7, 0, "HCCS"}},
       {{0, 144, 24}, {1, 0, 24}, {4, 96, 24}, {7, 48, 24}}},
      {"910b3-8card-topo-hccs-ms-swift.txt",
       NpuTopoLabel::kNpu,
       Iota(8),
       true,
       {{3, 4, "HCCS"}},
       {{0, 144, 24}, {2, 96, 24}, {4, 0, 24}, {6, 48, 24}}},
      {"a3-2die-container-topo-phyid-sio-sglang.txt",
       NpuTopoLabel::kPhyId,
       {12, 13},
       false,
       {{0, 1, "SIO"}, {1, 0, "SIO"}},
       {}},
      {"doc-example-8npu-pcie-sys-topo-huawei-npu-smi-doc.txt",
       NpuTopoLabel::kNpu,
       Iota(8),
       true,
       {{0, 1, "SYS"}, {7, 6, "SYS"}},
       {{0, 0, 128}, {3, 0, 128}, {4, 64, 128}, {7, 64, 128}}},
      {"doc-example-8npu-ub-2card-topo-huawei-npu-smi-doc.txt",
       NpuTopoLabel::kNpu,
       Iota(8),
       true,
       {{0, 1, "UB"}, {0, 2, "SYS"}, {6, 7, "UB"}, {7, 5, "SYS"}},
       {{1, 0, 128}, {5, 64, 128}}},
  };
  std::set<std::string> covered;
  for (const TopoCase& c : cases) {
    covered.insert(c.file);
    auto topo = ParseNpuSmiTopo(TopoFile(c.file));
    ASSERT_THAT(topo, IsOk()) << c.file;
    EXPECT_EQ(topo->label, c.label) << c.file;
    EXPECT_EQ(topo->columns, c.columns) << c.file;
    EXPECT_EQ(topo->has_cpu_affinity, c.has_cpu_affinity) << c.file;
    ASSERT_EQ(topo->rows.size(), c.columns.size()) << c.file;
    for (size_t r = 0; r < topo->rows.size(); ++r) {
      EXPECT_EQ(topo->rows[r].index, c.columns[r]) << c.file;
      ASSERT_EQ(topo->rows[r].links.size(), c.columns.size()) << c.file;
      EXPECT_EQ(topo->rows[r].links[r], "X") << c.file << " row " << r;
      EXPECT_EQ(topo->rows[r].cpu_affinity.empty(), !c.has_cpu_affinity) << c.file;
    }
    for (const auto& [row, column, link] : c.links) {
      EXPECT_EQ(topo->rows[row].links[column], link) << c.file << " row " << row;
    }
    for (const auto& [row, first, size] : c.affinity) {
      const std::vector<uint32_t>& cpus = topo->rows[row].cpu_affinity;
      ASSERT_EQ(cpus.size(), size) << c.file << " row " << row;
      EXPECT_EQ(cpus.front(), first) << c.file << " row " << row;
    }
  }
  EXPECT_EQ(covered, CorpusFiles(TopoDir()));
}

TEST(NpuSmiTopoTest, AnUnknownAffinityIsLeftEmpty) {
  const std::string topo =
      "\t   NPU0       NPU1       CPU Affinity\n"
      "NPU0       X          HCCS       0-63,128-191\n"
      "NPU1       HCCS       X          NA\n"
      "\n"
      "Legend:\n";
  auto read = ParseNpuSmiTopo(topo);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->rows[0].cpu_affinity.size(), 128u);
  EXPECT_THAT(read->rows[1].cpu_affinity, IsEmpty());
}

TEST(NpuSmiTopoTest, AnythingElseIsAnErrorNamingTheLine) {
  const std::string ms_swift = TopoFile("910b3-8card-topo-hccs-ms-swift.txt");
  const std::vector<BrokenCase> cases = {
      {"a missing link", "", "NPU3       HCCS       HCCS       HCCS       X          HCCS ",
       "NPU3       HCCS       HCCS       X          HCCS ",
       "line 5: expected a row of the label, 8 links and a CPU affinity"},
      {"self elsewhere", "", "NPU1       HCCS       X   ", "NPU1       X          HCCS",
       "line 3: expected X (self) in the row's own column"},
      {"a row twice", "", "NPU7       HCCS", "NPU6       HCCS",
       "line 9: expected a row of the label"},
      {"a bad affinity", "", "96-119\nNPU3", "96-x\nNPU3", "line 4: expected a CPU affinity"},
      {"a missing row", "",
       "NPU7       HCCS       HCCS       HCCS       HCCS       HCCS       "
       "HCCS       HCCS       X          48-71\n",
       "",
       "line 9: expected a row for each of the 8 "
       "columns, got 7 rows"},
      {"mixed labels", "", "NPU1       NPU2", "NPU1       Phy-ID2", "line 1: expected the header"},
  };
  for (const BrokenCase& c : cases) {
    std::string text = ms_swift;
    ASSERT_NE(text.find(c.from), std::string::npos) << c.label;
    text.replace(text.find(c.from), c.from.size(), c.to);
    EXPECT_THAT(ParseNpuSmiTopo(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("npu-smi info -t topo"), HasSubstr(c.error))))
        << c.label;
  }
  EXPECT_THAT(
      ParseNpuSmiTopo("npu-smi: command not supported\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 1: expected the header")));
  EXPECT_THAT(ParseNpuSmiTopo(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(NpuSmiTopoTest, AffinityGoesToDevicesByCardOrPhyId) {
  // NPU<k> is card k: a full 910B host's card k is device k.
  auto b3 = ParseNpuSmiInfo(InfoFile("910b3-8card-npu-smi-23.0.0-idle.txt"));
  auto mesh = ParseNpuSmiTopo(TopoFile("910b3-8card-topo-hccs-ms-swift.txt"));
  ASSERT_THAT(b3, IsOk());
  ASSERT_THAT(mesh, IsOk());
  std::map<uint32_t, std::vector<uint32_t>> by_device = DeviceCpuAffinity(*b3, *mesh);
  ASSERT_EQ(by_device.size(), 8u);
  EXPECT_EQ(by_device[0].front(), 144u);
  EXPECT_EQ(by_device[4].front(), 0u);

  // A container mapping cards 3 and 6 sees devices 0 and 1.
  auto b4 = ParseNpuSmiInfo(InfoFile("910b4-2card-npu-smi-24.1.rc3-ids-3-6.txt"));
  ASSERT_THAT(b4, IsOk());
  EXPECT_THAT(DeviceCpuAffinity(*b4, *mesh), ElementsAre(Pair(0u, mesh->rows[3].cpu_affinity),
                                                         Pair(1u, mesh->rows[6].cpu_affinity)));

  // Both chips of a 300I Duo card share the card's affinity.
  auto duo = ParseNpuSmiInfo(InfoFile("300i-duo-310p3-4card-npu-smi-25.0.rc1.b033-critical.txt"));
  auto cards = ParseNpuSmiTopo(
      "      NPU1   NPU4   CPU Affinity\nNPU1   X   PIX   0-3\nNPU4   PIX   X   4-7\n");
  ASSERT_THAT(duo, IsOk());
  ASSERT_THAT(cards, IsOk());
  std::map<uint32_t, std::vector<uint32_t>> duo_devices = DeviceCpuAffinity(*duo, *cards);
  EXPECT_THAT(duo_devices,
              ElementsAre(Pair(0u, ElementsAre(0, 1, 2, 3)), Pair(1u, ElementsAre(0, 1, 2, 3)),
                          Pair(4u, ElementsAre(4, 5, 6, 7)), Pair(5u, ElementsAre(4, 5, 6, 7))));

  // Phy-ID<k> is device k, whatever its card; no affinity column, no affinity.
  auto a3 = ParseNpuSmiInfo(InfoFile("a3-ascend910-8card-16chip-npu-smi-25.3.rc1.txt"));
  auto dies = ParseNpuSmiTopo(TopoFile("a3-2die-container-topo-phyid-sio-sglang.txt"));
  ASSERT_THAT(a3, IsOk());
  ASSERT_THAT(dies, IsOk());
  EXPECT_THAT(DeviceCpuAffinity(*a3, *dies), IsEmpty());
  auto with_affinity = ParseNpuSmiTopo(
      "   Phy-ID12   Phy-ID13   CPU Affinity\nPhy-ID12   X   SIO   8-9\nPhy-ID13   SIO   X   10\n");
  ASSERT_THAT(with_affinity, IsOk());
  EXPECT_THAT(DeviceCpuAffinity(*a3, *with_affinity),
              ElementsAre(Pair(12u, ElementsAre(8, 9)), Pair(13u, ElementsAre(10))));
}

}  // namespace
}  // namespace crest::agent
