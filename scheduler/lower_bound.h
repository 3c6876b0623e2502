// The plan's lower bound: a makespan no schedule of a graph can beat on the
// cost model's machine (cost_model.h), whatever its devices, streams and
// order.
//
// It is the largest of:
//   - the critical path with compulsory transfers: a node starts only
//     after its predecessors have finished (its head), and after the host
//     data it uses has reached a device (a buffer with initial data takes
//     at least its bytes over the fastest host link; several of them
//     together at least their sum over all the devices' upload engines;
//     the buffers only it can use first go up to its device one after
//     another, on that device's upload stream);
//     after it, its successors and the downloads of the outputs it writes
//     last still take time (its tail). Where a device node uses what other
//     device nodes wrote last, either they share its device (and run one
//     after another there, by occupancy) or that data crosses the fastest
//     link between two devices after its writer ends; the head takes the
//     least over every choice of which of them share the device, and the
//     tail likewise over the users of a node's data. On graphs of at most
//     4096 nodes a join starts only after all its ancestors' kernels have
//     run, and a fork's descendants' kernels run after it ends
//     (bounds::EndLoad);
//   - the occupancy-weighted kernel work spread over the devices (a kernel
//     of occupancy o keeps o of a device busy for its cost; at most
//     max_concurrent_kernels kernels run on a device at once), after the
//     least head and before the least tail of any kernel; and likewise for
//     the kernels whose tail is at least t, between h and t before the
//     end, each counting what it cannot run before h (a kernel never runs
//     faster than its cost), over every t and up to 64 values of h, and
//     the same with time running backwards;
//   - kernels that fill more than half a device never overlap one another
//     on a device: among the j x devices + 1 longest of them some device
//     runs j + 1 one after the other, between their least head and least
//     tail;
//   - the work of the copy engines, each kind over every device's engine
//     of that kind: COPY nodes (between their least head and tail), every
//     host buffer a device uses uploaded at least once (before the least
//     tail of a node that uses one), every output downloaded (after the
//     least end of its last writer);
//   - host data in order: each host buffer crosses a host link before the
//     first device node to use it starts (one of its users up to its first
//     writer; the writer only where no device node reads the buffer before
//     it, since it waits for those readers), and after that node the rest of
//     the graph still takes its time: its path, the kernel work of it and its
//     descendants over the devices, and the downloads of the outputs they write
//     last, each after the work between that node and the output's writer. Over
//     the upload engines, the buffer that comes up last among any set of them
//     ends after the set's work (and after its share on the busiest engine:
//     the ceil(k / engines) shortest of k end to end), then its rest;
//   - outputs in order: each download starts after its last writer ends,
//     which is after the writer's path and after the kernel work of its
//     ancestors over the devices; the outputs released at or after any
//     time share the download engines from then on.
//
// lower_bound.cc finds every node's head and tail and the work terms;
// lower_bound_terms.h holds the bounds on sets of jobs they use, and
// lower_bound_transfers.h the transfer-order terms.
//
// O(V + E + A) plus a sort of the long kernels, for A buffer uses; graphs
// of at most 4096 nodes also weigh the work between nodes, from bitsets of
// every node's ancestors and descendants (O(V^2 / 64) memory and O(V x E /
// 64) time, and a bounded number of weighed sets).
#ifndef WEFT_SCHEDULER_LOWER_BOUND_H_
#define WEFT_SCHEDULER_LOWER_BOUND_H_

#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

struct LowerBoundOptions {
  int num_devices = 1;
  // Not owned; null: Topology::Default(num_devices).
  const Topology* topology = nullptr;
  int max_concurrent_kernels = 32;
  int copy_engines_per_device = 1;
  // False: data is everywhere at no cost (no transfer terms).
  bool model_transfers = true;
};

// The terms above, apart, and their maximum.
struct LowerBoundTerms {
  double critical_path_us = 0;  // with compulsory transfers
  double kernel_work_us = 0;    // occupancy-weighted, over the devices
  double long_kernels_us = 0;   // kernels that cannot share a device
  double copy_work_us = 0;      // copy engines
  double uploads_us = 0;        // host data before its first users
  double downloads_us = 0;      // outputs after their last writers
  double bound_us = 0;          // the largest
};

// REQUIRES: `dag` is InferDependencies(graph); options.num_devices >= 1
// and the topology (if any) describes at least that many devices.
LowerBoundTerms ComputeLowerBound(const Graph& graph, const Dag& dag,
                                  const LowerBoundOptions& options);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_LOWER_BOUND_H_
