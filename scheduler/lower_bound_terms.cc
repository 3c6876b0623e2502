#include "scheduler/lower_bound_terms.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

namespace weft::scheduler::bounds {

double FastestHostLinkUs(const Topology& topology, int num_devices,
                         uint64_t bytes, bool to_host) {
  double best = std::numeric_limits<double>::infinity();
  for (int d = 0; d < num_devices; ++d) {
    best = std::min(best, to_host
                              ? topology.TransferUs(bytes, d, Topology::kHost)
                              : topology.TransferUs(bytes, Topology::kHost, d));
  }
  return best;
}

double DeliveryBound(std::vector<Job>& jobs, double lanes) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.when > b.when; });
  double work = 0, best = 0;
  for (const Job& job : jobs) {
    work += job.us;
    best = std::max({best, work / lanes + job.when, job.us + job.when});
  }
  return best;
}

double ReleaseBound(std::vector<Job>& jobs, double lanes) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.when > b.when; });
  double work = 0, best = 0;
  for (const Job& job : jobs) {
    work += job.us;
    best = std::max({best, job.when + work / lanes, job.when + job.us});
  }
  return best;
}

namespace {

// WindowedWork with the kernels that may start before h counted by what
// they cannot do before it (the file comment), on one side: the mirrored
// call swaps heads and tails.
double WindowedWorkFromHeads(std::vector<KernelSpan>& spans, double devices,
                             double slots) {
  const size_t n = spans.size();
  std::vector<double> heads(n);
  for (size_t i = 0; i < n; ++i) heads[i] = spans[i].head;
  std::sort(heads.begin(), heads.end(), std::greater<double>());
  std::sort(
      spans.begin(), spans.end(),
      [](const KernelSpan& a, const KernelSpan& b) { return a.tail > b.tail; });
  // Passes over up to n kernels: about 2^22 kernels visited in all.
  const size_t windows = std::clamp<size_t>((size_t{1} << 22) / n, 4, 64);
  const size_t step = std::max<size_t>(1, n / windows);
  double best = 0;
  for (size_t end = std::min(step, n);; end = std::min(end + step, n)) {
    // Every kernel with the same head as the last one taken.
    while (end < n && heads[end] == heads[end - 1]) ++end;
    const double h = heads[end - 1];
    double work = 0, time = 0;
    for (const KernelSpan& k : spans) {
      double w = k.work, t = k.time;
      if (k.head < h) {
        // Never faster than its cost: it runs at most h - head before h.
        const double left = k.time - (h - k.head);
        if (!(left > 0)) continue;
        w = k.work * (left / k.time);
        t = left;
      }
      work += w;
      time += t;
      best =
          std::max(best, h + std::max(work, time / slots) / devices + k.tail);
    }
    if (end == n) break;
  }
  return best;
}

}  // namespace

double WindowedWork(std::vector<KernelSpan>& spans, double devices,
                    double slots) {
  if (spans.empty() || spans.size() > kMaxWindowedKernels) return 0;
  double best = WindowedWorkFromHeads(spans, devices, slots);
  // The same with time running backwards: tails for heads.
  for (KernelSpan& k : spans) std::swap(k.head, k.tail);
  best = std::max(best, WindowedWorkFromHeads(spans, devices, slots));
  for (KernelSpan& k : spans) std::swap(k.head, k.tail);
  return best;
}

double MeetBound(std::vector<Neighbour>& near, double slots) {
  if (near.empty()) return 0;
  std::sort(
      near.begin(), near.end(),
      [](const Neighbour& a, const Neighbour& b) { return a.apart > b.apart; });
  double best = near[0].apart;  // none on the node's device
  double work = 0, time = 0;
  double edge = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < near.size(); ++k) {
    work += near[k].work;
    time += near[k].time;
    edge = std::min(edge, near[k].edge);
    const double outside = k + 1 < near.size() ? near[k + 1].apart : 0;
    best =
        std::min(best, std::max(outside, edge + std::max(work, time / slots)));
  }
  return best;
}

double LongKernelsBound(std::vector<LongKernel>& kernels, int devices) {
  if (static_cast<int>(kernels.size()) <= devices) return 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // A full sort of millions of kernels would cost more than the rest of
  // the bound.
  const size_t keep = std::min(
      kernels.size(), static_cast<size_t>(kLongKernelsPerDevice) * devices + 1);
  auto longer = [](const LongKernel& a, const LongKernel& b) {
    return a.cost > b.cost;
  };
  if (keep < kernels.size()) {
    std::nth_element(kernels.begin(), kernels.begin() + keep, kernels.end(),
                     longer);
  }
  std::sort(kernels.begin(), kernels.begin() + keep, longer);
  double least_head = kInf, least_tail = kInf, best = 0;
  for (size_t i = 0; i < keep; ++i) {
    least_head = std::min(least_head, kernels[i].head);
    least_tail = std::min(least_tail, kernels[i].tail);
    if (i == 0 || i % devices != 0) continue;
    const size_t j = i / devices;
    best = std::max(
        best,
        least_head + static_cast<double>(j + 1) * kernels[i].cost + least_tail);
  }
  return best;
}

}  // namespace weft::scheduler::bounds
