// Node effects: on a cluster whose nodes differ (a warmer card, a slower
// host CPU, a busy neighbour), one point measures faster on one node than on
// another, and comparing points measured on different nodes mixes that
// difference into the curve. So points are compared within a node first:
// each node's relative speed is estimated from the points that several nodes
// measured (log speed = point effect + node effect, least squares), and a
// run's figure is divided by its node's factor before points are compared.
// Runs on one node, slots included, share its factor, so their comparison is
// the node's own. A factor applies only beyond the noise band of the runs
// that estimate it; a node that shares no point with another keeps 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace crest::controller {

// One trusted run: where it ran and what it measured (GenerateSpeed > 0).
struct NodeRun {
  int64_t point = 0;
  std::string node;
  double speed = 0;
};

// A node's speed relative to the mean node of those it shares points with,
// and how many of its runs estimate it.
struct NodeFactor {
  double factor = 1;
  size_t shared_runs = 0;
};

// Node -> factor for every node of `runs`; `noise` is the relative noise of
// one run (the band a factor must exceed: three standard errors of the
// node's contrast with the others). A factor stays 1 within the band and is
// shrunk towards 1 past it (node_effects.cc).
std::map<std::string, NodeFactor> NodeFactors(const std::vector<NodeRun>& runs, double noise);

// `node`'s factor in `factors`, 1 for a node it does not list.
inline double FactorOf(const std::map<std::string, NodeFactor>& factors, const std::string& node) {
  auto it = factors.find(node);
  return it == factors.end() ? 1.0 : it->second.factor;
}

}  // namespace crest::controller
