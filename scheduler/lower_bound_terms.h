// The bound terms of lower_bound.h that reason about sets of jobs, apart
// from any graph: transfers on identical engines ordered by release or
// delivery time, kernel work in windows of head and tail, where a node's
// neighbours meet, and long kernels that cannot share a device. Each
// function is a valid lower bound on its own model, so their maximum is
// too (lower_bound.cc combines them).
#ifndef WEFT_SCHEDULER_LOWER_BOUND_TERMS_H_
#define WEFT_SCHEDULER_LOWER_BOUND_TERMS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "scheduler/topology.h"

namespace weft::scheduler::bounds {

// Kernels the windowed work term looks at: beyond them its sorts would
// cost more than the rest of the bound, and the plain work term stands.
inline constexpr size_t kMaxWindowedKernels = size_t{1} << 16;
// The longest kernels per device the long-kernel term looks at.
inline constexpr int kLongKernelsPerDevice = 64;

// Microseconds `bytes` take over the fastest link from the host to one of
// the first `num_devices` devices (to_host: from a device to the host).
double FastestHostLinkUs(const Topology& topology, int num_devices,
                         uint64_t bytes, bool to_host);

// One transfer a bound term orders: its time and when it may start
// (release) or what must follow it (delivery).
struct Job {
  double us;
  double when;
};

// Jobs on `lanes` identical engines (each runs one job at a time), each
// with a delivery time: the one of any set that ends last ends after the
// set's work over the lanes, and its delivery follows; each job ends after
// itself; and some engine runs ceil(k / lanes) of a set of k jobs one
// after another, at least the work of that many of its shortest, before
// the set's least delivery. The best such set is a prefix by decreasing
// delivery. Reorders `jobs`.
double DeliveryBound(std::vector<Job>& jobs, double lanes);

// Jobs on `lanes` identical engines (each runs one job at a time), each
// with a release time: the jobs released at or after some time all run
// after it, over the lanes and (k of them) ceil(k / lanes) of the shortest
// on one engine; each job runs after its own release. Reorders `jobs`.
double ReleaseBound(std::vector<Job>& jobs, double lanes);

// A kernel's work and where it may run: after its head, before its tail;
// `group`: the SpanGroup whose buffer it waits for, or -1.
struct KernelSpan {
  double head, tail, work, time;
  int32_t group = -1;
};

// Kernels that read one host buffer no node writes: the first device to
// hold it has it no earlier than `release`, every other device no earlier
// than `delay` after that (a copy from a device that has it, as the
// executor makes it: only a buffer's first user uploads it). So before
// time h they can run at most h - release on one device and h - release -
// delay on each of the others.
struct SpanGroup {
  double release, delay;
};

// The kernels whose tail is at least t run between h and t before the
// end all of their time but what they can run before h: a kernel never
// runs faster than its cost, so one with head below h runs at most h -
// head before h (and its work shrinks with its time). The busiest of
// `devices` devices (`slots` kernels each at once) runs its share of that
// work in between. The largest such bound over a bounded number of values
// of h (every distinct head on small graphs) and every t, and the same
// with heads and tails swapped (time running backwards): one pass over
// the kernels by decreasing tail per value of h. 0 for more than
// kMaxWindowedKernels kernels. With `groups` (indexed by
// KernelSpan::group), forward in time the work a group's kernels can run
// before h is also capped by when their buffer reaches the devices.
// Reorders `spans`.
double WindowedWork(std::vector<KernelSpan>& spans, double devices,
                    double slots, const std::vector<SpanGroup>& groups = {});

// The kernels of a set that must all end before some point (a join's
// ancestors; mirrored in time, a fork's descendants), added one by one in
// any order: after each, every kernel added so far starts no earlier than
// the least head among them, and then they take their work over the
// devices, their time over all the devices' slots, and, of the k of them
// that fill more than half a device (no two of those share a device),
// ceil(k / devices) one after another on one device, each at least as
// long as the shortest of them. bound() is the largest over the prefixes:
// adding kernels by decreasing head tries every threshold. O(1) a kernel.
class EndLoad {
 public:
  EndLoad(int devices, double slots)
      : devices_(std::max(devices, 1)), slots_(std::max(slots, 1.0)) {}
  void Add(double head, double work, double time, bool fills_half);
  double bound() const { return bound_; }

 private:
  const int devices_;
  const double slots_;
  double least_head_ = std::numeric_limits<double>::infinity();
  double work_ = 0, time_ = 0;
  int64_t halves_ = 0;
  double shortest_half_ = std::numeric_limits<double>::infinity();
  double bound_ = 0;
};

// A neighbour of a node (a predecessor whose data it uses, or a successor
// that uses its data), for the bound on where they meet.
struct Neighbour {
  double apart;  // the node's bound if the neighbour is on another device
  double work;   // the neighbour's occupancy-weighted kernel work
  double time;   // and its kernel time
  double edge;   // the neighbour's head (or tail)
};

// The node's bound over every choice of the neighbours S on its device:
// those apart bound it by their `apart`; those in S run on one device, from
// the least head of S (or until the least tail of S), one device's worth of
// their work. For each choice the larger, and the least over the choices:
// S is a prefix by decreasing `apart`. 0 without neighbours. Reorders
// `near`.
double MeetBound(std::vector<Neighbour>& near, double slots);

// A kernel that fills more than half a device: no other such kernel runs
// beside it.
struct LongKernel {
  double cost, head, tail;
};

// Among the j x devices + 1 longest kernels of `kernels`, some device runs
// j + 1 one after another, between their least head and least tail: at
// least the j + 1 shortest of them end to end; and of the
// kExactLongKernels longest, at least the best split's largest share.
// Looks at the kLongKernelsPerDevice x devices + 1 longest only (the work
// term is as strong beyond them); 0 for at most `devices` kernels.
// Reorders `kernels`.
double LongKernelsBound(std::vector<LongKernel>& kernels, int devices);

// The longest kernels LongKernelsBound splits over the devices exactly.
inline constexpr size_t kExactLongKernels = 8;

// The least time in which `costs` (at most 16 kernels that never share a
// device) can run over `devices` devices, each device's one after
// another, without their heads and tails (the best split's largest share;
// from below, to within a millionth).
double LongestKernelsPartitionUs(std::vector<double> costs, int devices);

}  // namespace weft::scheduler::bounds

#endif  // WEFT_SCHEDULER_LOWER_BOUND_TERMS_H_
