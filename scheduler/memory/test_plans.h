// Helpers for memory-planning tests: random graphs with the features
// lifetimes depend on (host data, outputs, several devices, copy and host
// nodes), their plans, and happens-before by brute force.
#ifndef WEFT_SCHEDULER_MEMORY_TEST_PLANS_H_
#define WEFT_SCHEDULER_MEMORY_TEST_PLANS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/graph.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler::memory::testing {

struct RandomGraphOptions {
  int num_nodes = 30;
  int num_buffers = 20;
  int max_uses = 4;
  double initial_data = 0.2;  // fraction of buffers with host data
  double output = 0.2;        // fraction of buffers that are outputs
  double copy_nodes = 0.1;    // fraction of COPY-engine nodes
  double host_nodes = 0.05;   // fraction of HOST-engine nodes
};

// A random graph of `spin` nodes: each uses 1..max_uses distinct buffers,
// each READ, WRITE or READ_WRITE; sizes from 1 byte to 64 KiB.
Graph RandomGraph(uint32_t seed, const RandomGraphOptions& options = {});

// `graph` with the named buffers marked as outputs and the ones in
// `with_data` given host data (BufferSpec::Init::kData).
Graph WithBuffers(const Graph& graph, const std::vector<std::string>& outputs,
                  const std::vector<std::string>& with_data = {});

// Bit j of row i: the node at issue position j finishes before the node at
// issue position i starts, by the transitive closure of stream order, peer
// joins and event waits of `plan` (nothing else). O(V^2 / 64) memory.
std::vector<std::vector<uint64_t>> BruteForceBefore(const Plan& plan);
inline bool BitSet(const std::vector<uint64_t>& row, int j) {
  return (row[j / 64] >> (j % 64)) & 1;
}

// Whether every use of copy `a` happens before every use of copy `b` by
// `before` (BruteForceBefore of the plan); an upload happens before every
// other use of every copy uploaded at or after it on its device.
bool BruteBefore(const Lifetimes& lifetimes,
                 const std::vector<std::vector<uint64_t>>& before, int a,
                 int b);

// A random graph's shape and planner options for property tests: 10 to 49
// nodes, 1 to 3 devices, 1 to 4 streams per device.
struct RandomPlanCase {
  RandomGraphOptions graph;
  PlannerOptions planner;
};
RandomPlanCase RandomCase(uint32_t seed);

}  // namespace weft::scheduler::memory::testing

#endif  // WEFT_SCHEDULER_MEMORY_TEST_PLANS_H_
