#include "agent/npu_smi.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "common/cpu_list.h"
#include "common/status.h"

namespace crest::agent {
namespace {

using Words = std::vector<std::string>;

Words SplitWords(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

// A cell's words with `/` a word of its own: "20701/ 65536" -> 20701 / 65536.
Words SlashWords(absl::string_view cell) {
  return SplitWords(absl::StrReplaceAll(cell, {{"/", " / "}}));
}

// The lines of `text`, trailing whitespace (and \r) removed.
std::vector<absl::string_view> Lines(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (absl::string_view& l : lines) l = absl::StripTrailingAsciiWhitespace(l);
  return lines;
}

// The cells between the outer bars of a `| a | b |` row, trimmed; nullopt for
// a line that is not one.
std::optional<Words> Cells(absl::string_view line) {
  if (line.size() < 2 || line.front() != '|' || line.back() != '|') return std::nullopt;
  line.remove_prefix(1);
  line.remove_suffix(1);
  Words cells;
  for (absl::string_view c : absl::StrSplit(line, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(c));
  }
  return cells;
}

absl::Status LineError(absl::string_view what, size_t index, absl::string_view expected,
                       absl::string_view got) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " line ", index + 1, ": expected ", expected, ", got \"", got, "\""));
}

// "-" and "NA": npu-smi has no value there.
bool IsNoValue(absl::string_view word) { return word == "-" || word == "NA"; }

// `used / total` at words[at..at+2].
bool ReadPair(const Words& words, size_t at, uint64_t* used, uint64_t* total) {
  return at + 3 <= words.size() && absl::SimpleAtoi(words[at], used) && words[at + 1] == "/" &&
         absl::SimpleAtoi(words[at + 2], total);
}

// What the two header rows say about the chip rows.
struct InfoLayout {
  NpuIdSource id_source = NpuIdSource::kOrder;
  bool hugepages = false;  // a third column on the first row
  bool hbm = false;        // an HBM pair after Memory-Usage on the second row
};

constexpr absl::string_view kInfoCommand = "npu-smi info";
constexpr absl::string_view kHeader1 =
    "the header `| NPU Name | Health | Power(W) Temp(C) [Hugepages-Usage(page)] |`";
constexpr absl::string_view kHeader2 =
    "the second header row `| Chip [Device|Phy-ID] | Bus-Id | AICore(%) Memory-Usage(MB) "
    "[HBM-Usage(MB)] |` (an npu-smi layout this agent knows)";

bool IsFirstHeader(const std::optional<Words>& cells) {
  return cells && cells->size() == 3 && SplitWords((*cells)[0]) == Words{"NPU", "Name"};
}

// The two header rows, lines `index` and `index + 1` (0-based).
absl::StatusOr<InfoLayout> ReadHeaders(const Words& first, absl::string_view line1,
                                       const std::optional<Words>& second, absl::string_view line2,
                                       size_t index) {
  InfoLayout layout;
  const Words power = SplitWords(first[2]);
  if (first[1] != "Health" || power.size() < 2 || power[0] != "Power(W)" || power[1] != "Temp(C)" ||
      power.size() > 3 || (power.size() == 3 && power[2] != "Hugepages-Usage(page)")) {
    return LineError(kInfoCommand, index, kHeader1, line1);
  }
  layout.hugepages = power.size() == 3;
  if (!second || second->size() != 3) return LineError(kInfoCommand, index + 1, kHeader2, line2);
  const Words chip = SplitWords((*second)[0]);
  const Words memory = SplitWords((*second)[2]);
  const bool chip_ok =
      (chip.size() == 1 && chip[0] == "Chip") ||
      (chip.size() == 2 && chip[0] == "Chip" && (chip[1] == "Device" || chip[1] == "Phy-ID"));
  const bool memory_ok = (memory.size() == 2 || memory.size() == 3) && memory[0] == "AICore(%)" &&
                         memory[1] == "Memory-Usage(MB)" &&
                         (memory.size() == 2 || memory[2] == "HBM-Usage(MB)");
  if (!chip_ok || (*second)[1] != "Bus-Id" || !memory_ok) {
    return LineError(kInfoCommand, index + 1, kHeader2, line2);
  }
  if (chip.size() == 2) {
    layout.id_source = chip[1] == "Device" ? NpuIdSource::kDeviceColumn : NpuIdSource::kPhyIdColumn;
  }
  layout.hbm = memory.size() == 3;
  return layout;
}

// The chip's first row: `| <NPU> <Name> | <Health> | <Power> <Temp> [<used> / <total>] |`.
absl::Status ReadFirstRow(const InfoLayout& layout, const Words& cells, size_t index,
                          absl::string_view line, NpuChip* chip) {
  const std::string expected =
      absl::StrCat("a chip's first row `| <NPU id> <Name> | <Health> | <Power(W)> <Temp(C)>",
                   layout.hugepages ? " <used> / <total>" : "", " |`");
  if (cells.size() != 3) return LineError(kInfoCommand, index, expected, line);
  const Words id_name = SplitWords(cells[0]);
  const Words values = SlashWords(cells[2]);
  uint64_t pages_used = 0;
  uint64_t pages_total = 0;
  double temp = 0;
  if (id_name.size() < 2 || !absl::SimpleAtoi(id_name[0], &chip->card_id) || cells[1].empty() ||
      values.size() != (layout.hugepages ? 5u : 2u) ||
      (!IsNoValue(values[1]) && !absl::SimpleAtod(values[1], &temp)) ||
      (layout.hugepages && !ReadPair(values, 2, &pages_used, &pages_total))) {
    return LineError(kInfoCommand, index, expected, line);
  }
  chip->name = absl::StrJoin(id_name.begin() + 1, id_name.end(), " ");
  chip->health = cells[1];
  if (!IsNoValue(values[0])) {
    double power = 0;
    if (!absl::SimpleAtod(values[0], &power) || !std::isfinite(power) || power < 0) {
      return LineError(kInfoCommand, index, "a power in watts, `-` or `NA` in the Power(W) column",
                       line);
    }
    chip->power_w = power;
  }
  chip->line = index + 1;
  return absl::OkStatus();
}

// The chip's second row: `| <Chip> [<Device|Phy-ID>] | <Bus-Id> | <AICore> <used> / <total>
// [<HBM used> / <HBM total>] |`.
absl::Status ReadSecondRow(const InfoLayout& layout, const std::optional<Words>& cells,
                           size_t index, absl::string_view line, NpuChip* chip) {
  const bool id_column = layout.id_source != NpuIdSource::kOrder;
  const std::string expected =
      absl::StrCat("the chip's second row `| <Chip>", id_column ? " <Device id>" : "",
                   " | <Bus-Id> | <AICore(%)> <used> / <total>",
                   layout.hbm ? " <HBM used> / <HBM total>" : "", " |`");
  if (!cells || cells->size() != 3) return LineError(kInfoCommand, index, expected, line);
  const Words ids = SplitWords((*cells)[0]);
  const Words values = SlashWords((*cells)[2]);
  double aicore = 0;
  uint64_t ddr_used = 0;
  uint64_t ddr_total = 0;
  uint64_t hbm_used = 0;
  uint64_t hbm_total = 0;
  if (ids.size() != (id_column ? 2u : 1u) || !absl::SimpleAtoi(ids[0], &chip->chip_id) ||
      (id_column && !absl::SimpleAtoi(ids[1], &chip->device_id)) || (*cells)[1].empty() ||
      SplitWords((*cells)[1]).size() != 1 || values.size() != (layout.hbm ? 7u : 4u) ||
      (!IsNoValue(values[0]) && !absl::SimpleAtod(values[0], &aicore)) ||
      !ReadPair(values, 1, &ddr_used, &ddr_total) ||
      (layout.hbm && !ReadPair(values, 4, &hbm_used, &hbm_total))) {
    return LineError(kInfoCommand, index, expected, line);
  }
  if (!id_column && chip->chip_id != 0) {
    return LineError(kInfoCommand, index,
                     "chip 0: this layout has no Device or Phy-ID column, so another chip's "
                     "device id cannot be known",
                     line);
  }
  chip->bus_id = (*cells)[1];
  chip->memory_kind = layout.hbm ? NpuMemoryKind::kHbm : NpuMemoryKind::kDdr;
  chip->memory_used_mib = layout.hbm ? hbm_used : ddr_used;
  chip->memory_total_mib = layout.hbm ? hbm_total : ddr_total;
  return absl::OkStatus();
}

// The process table's header ends the chips.
bool IsProcessHeader(const Words& cells) {
  return cells.size() >= 2 && SplitWords(cells[0]) == Words{"NPU", "Chip"} &&
         cells[1] == "Process id";
}

// Device ids (and card/chip pairs) are unique.
absl::Status CheckUnique(const std::vector<NpuChip>& chips) {
  std::map<uint32_t, const NpuChip*> devices;
  std::map<std::pair<uint32_t, uint32_t>, const NpuChip*> places;
  for (const NpuChip& c : chips) {
    if (auto [it, fresh] = devices.emplace(c.device_id, &c); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat("npu-smi info line ", c.line, ": device id ",
                                                     c.device_id, " again (first on line ",
                                                     it->second->line, "); expected each once"));
    }
    if (auto [it, fresh] = places.emplace(std::pair(c.card_id, c.chip_id), &c); !fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat("npu-smi info line ", c.line, ": NPU ", c.card_id, " chip ", c.chip_id,
                       " again (first on line ", it->second->line, "); expected each chip once"));
    }
  }
  return absl::OkStatus();
}

// `NPU<k>` or `Phy-ID<k>`.
std::optional<std::pair<NpuTopoLabel, uint32_t>> TopoLabel(absl::string_view word) {
  NpuTopoLabel label = NpuTopoLabel::kNpu;
  if (absl::ConsumePrefix(&word, "Phy-ID")) {
    label = NpuTopoLabel::kPhyId;
  } else if (!absl::ConsumePrefix(&word, "NPU")) {
    return std::nullopt;
  }
  uint32_t k = 0;
  if (word.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(word[0])) ||
      !absl::SimpleAtoi(word, &k)) {
    return std::nullopt;
  }
  return std::pair(label, k);
}

constexpr absl::string_view kTopoCommand = "npu-smi info -t topo";

absl::Status ReadTopoHeader(absl::string_view line, size_t index, NpuSmiTopo* topo) {
  constexpr absl::string_view kExpected =
      "the header `NPU0 NPU1 ... [CPU Affinity]` or `Phy-ID0 Phy-ID1 ... [CPU Affinity]`";
  Words words = SplitWords(line);
  if (words.size() >= 2 && words[words.size() - 2] == "CPU" && words.back() == "Affinity") {
    topo->has_cpu_affinity = true;
    words.resize(words.size() - 2);
  }
  if (words.empty()) return LineError(kTopoCommand, index, kExpected, line);
  std::set<uint32_t> seen;
  for (size_t i = 0; i < words.size(); ++i) {
    auto label = TopoLabel(words[i]);
    if (!label || (i > 0 && label->first != topo->label) || !seen.insert(label->second).second) {
      return LineError(kTopoCommand, index, kExpected, line);
    }
    topo->label = label->first;
    topo->columns.push_back(label->second);
  }
  return absl::OkStatus();
}

// One matrix row: its label, a link per column (X on its own) and the CPU affinity.
absl::Status ReadTopoRow(const Words& words, size_t index, absl::string_view line,
                         NpuSmiTopo* topo) {
  const size_t n = topo->columns.size();
  const std::string expected =
      absl::StrCat("a row of the label, ", n, " links",
                   topo->has_cpu_affinity ? " and a CPU affinity (a CPU list or NA)" : "",
                   " for a label of the header, once each");
  NpuTopoRow row;
  row.index = TopoLabel(words[0])->second;
  const auto column = std::find(topo->columns.begin(), topo->columns.end(), row.index);
  const bool repeated = std::any_of(topo->rows.begin(), topo->rows.end(),
                                    [&](const NpuTopoRow& r) { return r.index == row.index; });
  if (words.size() != 1 + n + (topo->has_cpu_affinity ? 1 : 0) || column == topo->columns.end() ||
      repeated) {
    return LineError(kTopoCommand, index, expected, line);
  }
  row.links.assign(words.begin() + 1, words.begin() + 1 + static_cast<std::ptrdiff_t>(n));
  if (row.links[static_cast<size_t>(column - topo->columns.begin())] != "X") {
    return LineError(kTopoCommand, index, "X (self) in the row's own column", line);
  }
  if (topo->has_cpu_affinity && words.back() != "NA") {
    auto cpus = ParseCpuList(words.back());
    if (!cpus.ok()) {
      return LineError(kTopoCommand, index,
                       "a CPU affinity like 0-23,48-71 or NA in the last column", line);
    }
    row.cpu_affinity = *std::move(cpus);
  }
  topo->rows.push_back(std::move(row));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NpuSmiInfo> ParseNpuSmiInfo(absl::string_view text) {
  const std::vector<absl::string_view> lines = Lines(text);
  NpuSmiInfo info;
  size_t i = 0;
  for (; i < lines.size() && !IsFirstHeader(Cells(lines[i])); ++i) {
    std::optional<Words> cells = Cells(lines[i]);
    if (!cells || cells->size() != 1) continue;
    const Words version = SplitWords((*cells)[0]);
    if (version.size() >= 2 && version[0] == "npu-smi") info.version = version[1];
  }
  if (i >= lines.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("npu-smi info: expected ", kHeader1, " followed by ", kHeader2,
                     ", found none in ", lines.size(), " lines (first: \"", lines.front(), "\")"));
  }
  const absl::string_view line2 = i + 1 < lines.size() ? lines[i + 1] : absl::string_view();
  CREST_ASSIGN_OR_RETURN(InfoLayout layout,
                         ReadHeaders(*Cells(lines[i]), lines[i], Cells(line2), line2, i));
  info.id_source = layout.id_source;
  for (i += 2; i < lines.size(); ++i) {
    if (lines[i].empty() || lines[i].front() == '+') continue;  // rules between chips
    std::optional<Words> cells = Cells(lines[i]);
    if (!cells) return LineError(kInfoCommand, i, "a `| ... |` row or a `+---+` rule", lines[i]);
    if (IsProcessHeader(*cells)) break;  // the processes on each chip: not read
    NpuChip chip;
    CREST_RETURN_IF_ERROR(ReadFirstRow(layout, *cells, i, lines[i], &chip));
    ++i;
    const absl::string_view second = i < lines.size() ? lines[i] : absl::string_view();
    CREST_RETURN_IF_ERROR(ReadSecondRow(layout, Cells(second), i, second, &chip));
    if (layout.id_source == NpuIdSource::kOrder) {
      chip.device_id = static_cast<uint32_t>(info.chips.size());
    }
    info.chips.push_back(std::move(chip));
  }
  CREST_RETURN_IF_ERROR(CheckUnique(info.chips));
  return info;
}

crest::v1::NpuDevice ToNpuDevice(const NpuChip& chip) {
  crest::v1::NpuDevice d;
  d.set_id(chip.device_id);
  d.set_card_id(chip.card_id);
  d.set_chip_id(chip.chip_id);
  d.set_name(chip.name);
  d.set_health(chip.health);
  if (chip.power_w) d.set_power_w(*chip.power_w);
  d.set_memory_used_mib(chip.memory_used_mib);
  d.set_memory_total_mib(chip.memory_total_mib);
  if (chip.memory_kind == NpuMemoryKind::kHbm) {
    d.set_memory_kind(crest::v1::NPU_MEMORY_HBM);
    d.set_hbm_used_mib(chip.memory_used_mib);
    d.set_hbm_total_mib(chip.memory_total_mib);
  } else {
    d.set_memory_kind(crest::v1::NPU_MEMORY_DDR);
  }
  return d;
}

std::vector<crest::v1::NpuDevice> ToNpuDevices(const NpuSmiInfo& info) {
  std::vector<crest::v1::NpuDevice> out;
  out.reserve(info.chips.size());
  for (const NpuChip& chip : info.chips) out.push_back(ToNpuDevice(chip));
  return out;
}

absl::StatusOr<NpuSmiTopo> ParseNpuSmiTopo(absl::string_view text) {
  const std::vector<absl::string_view> lines = Lines(text);
  size_t i = 0;
  while (i < lines.size() && absl::StripLeadingAsciiWhitespace(lines[i]).empty()) ++i;
  NpuSmiTopo topo;
  CREST_RETURN_IF_ERROR(ReadTopoHeader(i < lines.size() ? lines[i] : "", i, &topo));
  for (++i; i < lines.size(); ++i) {
    const Words words = SplitWords(lines[i]);
    auto label = words.empty() ? std::nullopt : TopoLabel(words[0]);
    if (!label || label->first != topo.label) break;  // the matrix ends (Legend:)
    CREST_RETURN_IF_ERROR(ReadTopoRow(words, i, lines[i], &topo));
  }
  if (topo.rows.size() != topo.columns.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("npu-smi info -t topo line ", i + 1, ": expected a row for each of the ",
                     topo.columns.size(), " columns, got ", topo.rows.size(), " rows"));
  }
  return topo;
}

std::map<uint32_t, std::vector<uint32_t>> DeviceCpuAffinity(const NpuSmiInfo& info,
                                                            const NpuSmiTopo& topo) {
  std::map<uint32_t, std::vector<uint32_t>> out;
  for (const NpuTopoRow& row : topo.rows) {
    if (row.cpu_affinity.empty()) continue;
    for (const NpuChip& chip : info.chips) {
      const uint32_t id = topo.label == NpuTopoLabel::kPhyId ? chip.device_id : chip.card_id;
      if (id == row.index) out[chip.device_id] = row.cpu_affinity;
    }
  }
  return out;
}

}  // namespace crest::agent
