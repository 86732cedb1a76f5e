#include "agent/slots.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace crest::agent {
namespace {

// `cpus` in `parts` contiguous shares whose sizes differ by one at most.
std::vector<std::vector<uint32_t>> Split(const std::vector<uint32_t>& cpus, size_t parts) {
  std::vector<std::vector<uint32_t>> out(parts);
  size_t at = 0;
  for (size_t i = 0; i < parts; ++i) {
    const size_t n = cpus.size() / parts + (i < cpus.size() % parts ? 1 : 0);
    out[i].assign(cpus.begin() + static_cast<std::ptrdiff_t>(at),
                  cpus.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

std::vector<uint32_t> OnlineOf(const Topology& t, const NumaNodeInfo& node) {
  std::vector<uint32_t> out;
  for (uint32_t c : node.cpus) {
    if (t.IsOnline(c)) out.push_back(c);
  }
  return out;
}

// The host's device ids, as a message names them: "0,1" plus which card and
// chip each is when that differs from the id (a 300I Duo's "0=NPU 1792 chip 0").
std::string DescribeHost(const std::vector<HostNpu>& npus, const std::vector<uint32_t>& ids) {
  std::vector<std::string> places;
  bool plain = true;
  for (const HostNpu& n : npus) {
    plain &= n.card_id == n.id && n.chip_id == 0;
    places.push_back(absl::StrCat(n.id, "=NPU ", n.card_id, " chip ", n.chip_id));
  }
  return absl::StrCat("device ids ", absl::StrJoin(ids, ","),
                      plain ? "" : absl::StrCat(": ", absl::StrJoin(places, ", ")));
}

absl::StatusOr<std::vector<std::vector<uint32_t>>> Groups(const SlotsSpec& spec,
                                                          const std::vector<HostNpu>& npus,
                                                          uint32_t world_size) {
  std::vector<uint32_t> ids;
  ids.reserve(npus.size());
  for (const HostNpu& n : npus) ids.push_back(n.id);
  std::sort(ids.begin(), ids.end());
  const std::set<uint32_t> have(ids.begin(), ids.end());
  if (auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
    // Two daemons would share a chip.
    return absl::InvalidArgumentError(absl::StrCat("slots: npu-smi lists device id ", *twice,
                                                   " twice (", DescribeHost(npus, ids),
                                                   "); expected each chip once"));
  }
  std::vector<std::vector<uint32_t>> groups;
  switch (spec.kind) {
    case SlotsSpec::Kind::kList: {
      std::map<uint32_t, size_t> owner;
      for (size_t i = 0; i < spec.npus.size(); ++i) {
        if (spec.npus[i].empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("slots[", i, "].npus: expected at least one NPU id, got none"));
        }
        for (uint32_t id : spec.npus[i]) {
          if (!npus.empty() && have.count(id) == 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "slots[", i, "].npus: NPU ", id, " is not on this host (npu-smi lists ",
                DescribeHost(npus, ids), "; npus takes device ids, as npuDeviceIds does)"));
          }
          if (auto [it, fresh] = owner.emplace(id, i); !fresh) {
            return absl::InvalidArgumentError(absl::StrCat(
                "slots[", i, "].npus: NPU ", id, " is already in slots[", it->second, "]"));
          }
        }
      }
      return spec.npus;
    }
    case SlotsSpec::Kind::kAuto: {
      if (npus.empty()) {
        return absl::InvalidArgumentError(
            "slots: auto needs the NPUs npu-smi lists, and npu-smi listed none");
      }
      if (ids.size() < world_size) {
        return absl::InvalidArgumentError(absl::StrCat("slots: auto: the host has ", ids.size(),
                                                       " NPUs, fewer than the model's worldSize ",
                                                       world_size));
      }
      for (size_t at = 0; at + world_size <= ids.size(); at += world_size) {
        groups.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at),
                            ids.begin() + static_cast<std::ptrdiff_t>(at + world_size));
      }
      return groups;
    }
    case SlotsSpec::Kind::kCount: {
      const uint64_t needed = uint64_t{spec.count} * world_size;
      if (spec.count == 0) return absl::InvalidArgumentError("slots: 0, expected at least 1");
      if (npus.empty()) {
        // No npu-smi: the daemon's own config says which cards; count them
        // from 0 as the real runtime numbers them.
        ids.clear();
        for (uint32_t i = 0; i < needed; ++i) ids.push_back(i);
      } else if (needed > ids.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slots: ", spec.count, " slots of worldSize ", world_size, " need ", needed,
            " NPUs, and the host has ", ids.size(), " (", DescribeHost(npus, ids), ")"));
      }
      const auto width = static_cast<std::ptrdiff_t>(world_size);
      for (std::ptrdiff_t s = 0; s < static_cast<std::ptrdiff_t>(spec.count); ++s) {
        groups.emplace_back(ids.begin() + s * width, ids.begin() + (s + 1) * width);
      }
      return groups;
    }
  }
  return absl::InternalError("unknown slots kind");
}

}  // namespace

absl::StatusOr<SlotsSpec> ParseSlotsSpec(const YAML::Node& node, const std::string& where) {
  constexpr uint32_t kMaxSlots = 64;  // one per card of the largest host
  SlotsSpec spec;
  auto bad = [&where, &node](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", what, ", got \"", YAML::Dump(node), "\""));
  };
  if (node.IsScalar()) {
    if (node.Scalar() == "auto") {
      spec.kind = SlotsSpec::Kind::kAuto;
      return spec;
    }
    uint32_t n = 0;
    if (!YAML::convert<uint32_t>::decode(node, n) || n < 1 || n > kMaxSlots) {
      return bad(absl::StrCat("expected a count in [1, ", kMaxSlots,
                              "], \"auto\" or a list of {npus: [...]}"));
    }
    spec.count = n;
    return spec;
  }
  if (!node.IsSequence() || node.size() == 0 || node.size() > kMaxSlots) {
    return bad(absl::StrCat("expected a count in [1, ", kMaxSlots,
                            "], \"auto\" or a list of {npus: [...]}"));
  }
  spec.kind = SlotsSpec::Kind::kList;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node slot = node[i];
    const std::string at = absl::StrCat(where, "[", i, "]");
    if (!slot.IsMap() || slot.size() != 1 || !slot["npus"] || !slot["npus"].IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": expected {npus: [ids...]}, got \"", YAML::Dump(slot), "\""));
    }
    std::vector<uint32_t>& ids = spec.npus.emplace_back();
    for (size_t j = 0; j < slot["npus"].size(); ++j) {
      uint32_t id = 0;
      if (!YAML::convert<uint32_t>::decode(slot["npus"][j], id) || id >= kMaxSlots) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".npus[", j, "]: expected an NPU id in [0, ", kMaxSlots - 1, "], got \"",
            YAML::Dump(slot["npus"][j]),
            "\" (a device id as npuDeviceIds takes: npu-smi's Device or Phy-ID column, "
            "not its NPU column)"));
      }
      ids.push_back(id);
    }
  }
  return spec;
}

absl::StatusOr<SlotPlan> PlanSlots(const SlotsSpec& spec, const std::vector<HostNpu>& npus,
                                   uint32_t world_size, const Topology& topology) {
  if (world_size == 0) return absl::InvalidArgumentError("worldSize 0, expected at least 1");
  auto groups = Groups(spec, npus, world_size);
  if (!groups.ok()) return groups.status();
  SlotPlan plan;
  for (size_t i = 0; i < groups->size(); ++i) {
    SlotLayout slot;
    slot.index = static_cast<uint32_t>(i);
    slot.npus = (*groups)[i];
    plan.slots.push_back(std::move(slot));
  }
  const size_t n = plan.slots.size();

  // odd-numa: whole odd nodes' CPUs, shared out in node order.
  size_t odd_nodes = 0;
  std::vector<uint32_t> odd_cpus;
  std::vector<uint32_t> even_cpus;
  for (const NumaNodeInfo& node : topology.numa_nodes) {
    std::vector<uint32_t> cpus = OnlineOf(topology, node);
    if (cpus.empty()) continue;
    if (node.id % 2 == 1) {
      ++odd_nodes;
      odd_cpus.insert(odd_cpus.end(), cpus.begin(), cpus.end());
    } else {
      even_cpus.insert(even_cpus.end(), cpus.begin(), cpus.end());
    }
  }
  if (odd_nodes >= n && !even_cpus.empty()) {
    std::vector<std::vector<uint32_t>> shares = Split(odd_cpus, n);
    for (size_t i = 0; i < n; ++i) plan.slots[i].cpus = std::move(shares[i]);
    plan.client_cpus = std::move(even_cpus);
    plan.cpu_rule = "odd-numa";
    return plan;
  }

  // npu-affinity: each slot on the node of its first NPU.
  std::map<uint32_t, std::optional<uint32_t>> node_of;
  for (const HostNpu& npu : npus) node_of[npu.id] = npu.numa_node;
  std::map<uint32_t, std::vector<size_t>> slots_on;  // node -> slots
  bool known = !npus.empty();
  for (size_t i = 0; i < n && known; ++i) {
    auto it = node_of.find(plan.slots[i].npus.front());
    known = it != node_of.end() && it->second.has_value();
    if (known) slots_on[*it->second].push_back(i);
  }
  if (known) {
    std::vector<uint32_t> clients;
    bool every_node_fits = true;
    for (const NumaNodeInfo& node : topology.numa_nodes) {
      std::vector<uint32_t> cpus = OnlineOf(topology, node);
      auto on = slots_on.find(node.id);
      if (on == slots_on.end()) {
        clients.insert(clients.end(), cpus.begin(), cpus.end());
        continue;
      }
      if (cpus.size() < on->second.size()) every_node_fits = false;
      std::vector<std::vector<uint32_t>> shares = Split(cpus, on->second.size());
      for (size_t k = 0; k < on->second.size(); ++k) {
        plan.slots[on->second[k]].cpus = std::move(shares[k]);
      }
    }
    bool every_slot_placed = true;
    for (const auto& [node, slots] : slots_on) {
      every_slot_placed &=
          std::any_of(topology.numa_nodes.begin(), topology.numa_nodes.end(),
                      [node = node](const NumaNodeInfo& x) { return x.id == node; });
    }
    if (!clients.empty() && every_node_fits && every_slot_placed) {
      plan.client_cpus = std::move(clients);
      plan.cpu_rule = "npu-affinity";
      return plan;
    }
    for (SlotLayout& slot : plan.slots) slot.cpus.clear();
  }

  // even-split: one share per slot, the last for the clients.
  const std::vector<uint32_t>& online = topology.online_cpus;
  if (online.size() >= n + 1) {
    std::vector<std::vector<uint32_t>> shares = Split(online, n + 1);
    for (size_t i = 0; i < n; ++i) plan.slots[i].cpus = std::move(shares[i]);
    plan.client_cpus = std::move(shares[n]);
    plan.cpu_rule = "even-split";
    return plan;
  }
  plan.cpu_rule = "unpinned";
  plan.cpu_note = absl::StrCat(online.size(), " online CPUs cannot give ", n,
                               " daemons and the benchmark clients a CPU each");
  return plan;
}

}  // namespace crest::agent
