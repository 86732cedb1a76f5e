#include "controller/search/node_effects.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace crest::controller {
namespace {

// Alternating least squares converges geometrically on a connected design;
// far fewer sweeps than this reach a change below kConverged.
constexpr int kMaxSweeps = 500;
constexpr double kConverged = 1e-12;
// A node's factor applies beyond kBandSigmas standard errors of its
// contrast with the others (2 would let one node in twenty through on alike
// nodes, each time it is estimated), and shrunk towards 1 by the share of
// it the band could explain (positive-part James-Stein): an estimate just
// past the band is mostly its own noise, and a false factor applied in full
// can lift a point past the knee above the peak (decision 0023 has the
// measurements of each variant against raw figures).
constexpr double kBandSigmas = 3;

// Union-find over node indices: the groups of nodes linked by shared points.
size_t Root(std::vector<size_t>& parent, size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::map<std::string, NodeFactor> NodeFactors(const std::vector<NodeRun>& runs, double noise) {
  std::map<std::string, NodeFactor> out;
  std::map<std::string, size_t> node_index;
  std::map<int64_t, std::set<std::string>> nodes_at;
  for (const NodeRun& r : runs) {
    out.emplace(r.node, NodeFactor{});
    node_index.emplace(r.node, node_index.size());
    if (r.speed > 0) nodes_at[r.point].insert(r.node);
  }
  // Only a point that two nodes measured says anything about either node;
  // a point of one node is its own effect plus the node's, inseparably.
  std::vector<const NodeRun*> shared;
  for (const NodeRun& r : runs) {
    if (r.speed > 0 && nodes_at[r.point].size() > 1) shared.push_back(&r);
  }
  if (shared.empty()) return out;
  std::vector<size_t> parent(node_index.size());
  std::iota(parent.begin(), parent.end(), 0);
  for (const auto& [point, nodes] : nodes_at) {
    if (nodes.size() < 2) continue;
    const size_t first = Root(parent, node_index.at(*nodes.begin()));
    for (const auto& n : nodes) parent[Root(parent, node_index.at(n))] = first;
  }
  std::map<int64_t, double> point_effect;
  std::vector<double> node_effect(node_index.size(), 0);
  std::vector<size_t> node_runs(node_index.size(), 0);
  for (const NodeRun* r : shared) ++node_runs[node_index.at(r->node)];
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    std::map<int64_t, std::pair<double, size_t>> by_point;
    for (const NodeRun* r : shared) {
      auto& [sum, n] = by_point[r->point];
      sum += std::log(r->speed) - node_effect[node_index.at(r->node)];
      ++n;
    }
    for (const auto& [point, s] : by_point) {
      point_effect[point] = s.first / static_cast<double>(s.second);
    }
    std::vector<double> sum(node_index.size(), 0);
    for (const NodeRun* r : shared) {
      sum[node_index.at(r->node)] += std::log(r->speed) - point_effect.at(r->point);
    }
    // Each group of linked nodes is centred on its mean node: only
    // differences within a group are identified.
    std::map<size_t, std::pair<double, size_t>> group_mean;
    std::vector<double> next(node_index.size(), 0);
    for (size_t i = 0; i < next.size(); ++i) {
      if (node_runs[i] == 0) continue;
      next[i] = sum[i] / static_cast<double>(node_runs[i]);
      auto& [total, n] = group_mean[Root(parent, i)];
      total += next[i];
      ++n;
    }
    double change = 0;
    for (size_t i = 0; i < next.size(); ++i) {
      if (node_runs[i] == 0) continue;
      const auto& [total, n] = group_mean.at(Root(parent, i));
      next[i] -= total / static_cast<double>(n);
      change = std::max(change, std::abs(next[i] - node_effect[i]));
    }
    node_effect = std::move(next);
    if (change < kConverged) break;
  }
  std::map<size_t, size_t> group_runs;
  std::map<size_t, size_t> group_nodes;
  for (size_t i = 0; i < node_runs.size(); ++i) {
    if (node_runs[i] == 0) continue;
    group_runs[Root(parent, i)] += node_runs[i];
    ++group_nodes[Root(parent, i)];
  }
  for (auto& [node, f] : out) {
    const size_t i = node_index.at(node);
    f.shared_runs = node_runs[i];
    if (node_runs[i] == 0) continue;
    const size_t group = Root(parent, i);
    const size_t others = group_runs.at(group) - node_runs[i];
    // The effect is against the group's mean node, itself included; the
    // band is for the contrast with the others' mean, n/(n-1) times larger.
    const auto n = static_cast<double>(group_nodes.at(group));
    const double contrast = std::abs(node_effect[i]) * n / (n - 1);
    const double band =
        kBandSigmas * noise *
        std::sqrt(1.0 / static_cast<double>(node_runs[i]) + 1.0 / static_cast<double>(others));
    if (contrast > band) {
      f.factor = std::exp(node_effect[i] * (1 - (band * band) / (contrast * contrast)));
    }
  }
  return out;
}

}  // namespace crest::controller
