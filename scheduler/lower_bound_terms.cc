#include "scheduler/lower_bound_terms.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
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

namespace {

// The sum of the q shortest of the times added so far, for q that never
// decreases from one call to the next: the shortest in a max-heap, the
// rest in a min-heap. O(log k) a call.
class ShortestSum {
 public:
  void Add(double us) {
    if (!shortest_.empty() && us < shortest_.top()) {
      shortest_.push(us);
      sum_ += us;
      Demote();
    } else {
      rest_.push(us);
    }
  }
  // REQUIRES: q at most the number added, and at least the last call's.
  double Sum(size_t q) {
    while (shortest_.size() < q) {
      sum_ += rest_.top();
      shortest_.push(rest_.top());
      rest_.pop();
    }
    return sum_;
  }

 private:
  // The longest of the shortest goes back to the rest.
  void Demote() {
    sum_ -= shortest_.top();
    rest_.push(shortest_.top());
    shortest_.pop();
  }

  std::priority_queue<double> shortest_;
  std::priority_queue<double, std::vector<double>, std::greater<double>> rest_;
  double sum_ = 0;
};

// The jobs one engine of `lanes` runs at least, of `k` (at most as many
// engines as lanes rounded up).
size_t OnOneEngine(size_t k, double lanes) {
  const size_t engines = static_cast<size_t>(std::max(std::ceil(lanes), 1.0));
  return (k + engines - 1) / engines;
}

// DeliveryBound and ReleaseBound alike: jobs by decreasing `when`, each
// prefix's work over the lanes and the shortest ceil(k / lanes) of it end
// to end, after or before the least `when` of it.
double PrefixBound(std::vector<Job>& jobs, double lanes) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.when > b.when; });
  double work = 0, best = 0;
  ShortestSum shortest;
  for (size_t k = 1; k <= jobs.size(); ++k) {
    const Job& job = jobs[k - 1];
    work += job.us;
    shortest.Add(job.us);
    best = std::max({best, work / lanes + job.when, job.us + job.when,
                     shortest.Sum(OnOneEngine(k, lanes)) + job.when});
  }
  return best;
}

}  // namespace

void EndLoad::Add(double head, double work, double time, bool fills_half) {
  least_head_ = std::min(least_head_, head);
  work_ += work;
  time_ += time;
  double after = std::max(work_ / devices_, time_ / devices_ / slots_);
  if (fills_half) {
    ++halves_;
    shortest_half_ = std::min(shortest_half_, time);
  }
  if (halves_ > 0) {
    after = std::max(after,
                     static_cast<double>((halves_ + devices_ - 1) / devices_) *
                         shortest_half_);
  }
  bound_ = std::max(bound_, least_head_ + after);
}

double DeliveryBound(std::vector<Job>& jobs, double lanes) {
  return PrefixBound(jobs, lanes);
}

double ReleaseBound(std::vector<Job>& jobs, double lanes) {
  return PrefixBound(jobs, lanes);
}

namespace {

// WindowedWork with the kernels that may start before h counted by what
// they cannot do before it (the file comment), on one side: the mirrored
// call swaps heads and tails.
double WindowedWorkFromHeads(std::vector<KernelSpan>& spans, double devices,
                             double slots,
                             const std::vector<SpanGroup>& groups) {
  const size_t n = spans.size();
  std::vector<double> heads(n);
  for (size_t i = 0; i < n; ++i) heads[i] = spans[i].head;
  // Any h bounds; where a group's buffer reaches a second device is where
  // its cap binds most.
  for (const SpanGroup& g : groups) heads.push_back(g.release + g.delay);
  std::sort(heads.begin(), heads.end(), std::greater<double>());
  std::sort(
      spans.begin(), spans.end(),
      [](const KernelSpan& a, const KernelSpan& b) { return a.tail > b.tail; });
  // Passes over up to n kernels: about 2^22 kernels visited in all.
  const size_t m = heads.size();
  const size_t windows = std::clamp<size_t>((size_t{1} << 22) / n, 4, 64);
  const size_t step = std::max<size_t>(1, m / windows);
  double best = 0;
  // By group: the work its kernels so far could run before h, and what
  // their buffer lets them run there.
  std::vector<double> before(groups.size()), cap(groups.size());
  for (size_t end = std::min(step, m);; end = std::min(end + step, m)) {
    // Every kernel with the same head as the last one taken.
    while (end < m && heads[end] == heads[end - 1]) ++end;
    const double h = heads[end - 1];
    for (size_t g = 0; g < groups.size(); ++g) {
      before[g] = 0;
      const double first = h - groups[g].release;
      cap[g] = std::max(first, 0.0) +
               (devices - 1) * std::max(first - groups[g].delay, 0.0);
    }
    // Work that must run after h because its group's buffer is not there.
    double held = 0;
    double work = 0, time = 0;
    for (const KernelSpan& k : spans) {
      double w = k.work, t = k.time;
      if (k.head < h) {
        // Never faster than its cost: it runs at most h - head before h.
        const double left = k.time - (h - k.head);
        if (left > 0) {
          w = k.work * (left / k.time);
          t = left;
        } else {
          w = t = 0;
        }
      }
      if (k.group >= 0 && !groups.empty()) {
        double& b = before[k.group];
        const double over = std::max(b - cap[k.group], 0.0);
        b += k.work - w;
        held += std::max(b - cap[k.group], 0.0) - over;
      }
      if (!(w > 0) && !(held > 0)) continue;
      work += w;
      time += t;
      best = std::max(
          best, h + std::max(work + held, time / slots) / devices + k.tail);
    }
    if (end == m) break;
  }
  return best;
}

}  // namespace

double WindowedWork(std::vector<KernelSpan>& spans, double devices,
                    double slots, const std::vector<SpanGroup>& groups) {
  if (spans.empty() || spans.size() > kMaxWindowedKernels) return 0;
  double best = WindowedWorkFromHeads(spans, devices, slots, groups);
  // The same with time running backwards: tails for heads (the groups
  // hold at the start only).
  for (KernelSpan& k : spans) std::swap(k.head, k.tail);
  best = std::max(best, WindowedWorkFromHeads(spans, devices, slots, {}));
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

namespace {

// Whether `costs` (at most 16) fit on `devices` devices running each
// device's one after another within `capacity`: a dynamic program over
// subsets keeping, for each set placed, the fewest devices it fills and
// the least load on the last of them.
bool FitsOnDevices(const std::vector<double>& costs, int devices,
                   double capacity) {
  const int k = static_cast<int>(costs.size());
  const uint32_t all = (uint32_t{1} << k) - 1;
  struct Packed {
    int bins;
    double last;
  };
  constexpr int kNever = std::numeric_limits<int>::max();
  std::vector<Packed> best(all + 1, Packed{kNever, 0});
  best[0] = {1, 0};
  for (uint32_t set = 0; set < all; ++set) {
    const Packed p = best[set];
    if (p.bins > devices) continue;
    for (int i = 0; i < k; ++i) {
      if (set & (uint32_t{1} << i)) continue;
      Packed next = p;
      if (p.last + costs[i] <= capacity) {
        next.last += costs[i];
      } else {
        ++next.bins;
        next.last = costs[i];
      }
      Packed& slot = best[set | (uint32_t{1} << i)];
      if (next.bins < slot.bins ||
          (next.bins == slot.bins && next.last < slot.last)) {
        slot = next;
      }
    }
  }
  return best[all].bins <= devices;
}

}  // namespace

double LongestKernelsPartitionUs(std::vector<double> costs, int devices) {
  if (costs.empty() || devices < 1) return 0;
  double sum = 0, most = 0;
  for (const double c : costs) {
    sum += c;
    most = std::max(most, c);
  }
  // The least capacity known too small, and one known enough.
  double low = std::max(most, sum / devices);
  if (FitsOnDevices(costs, devices, low)) return low;
  double high = sum;
  for (int step = 0; step < 30 && high - low > 1e-6 * high; ++step) {
    const double mid = 0.5 * (low + high);
    (FitsOnDevices(costs, devices, mid) ? high : low) = mid;
  }
  return low;
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
  // The j + 1 that some device runs take at least the j + 1 shortest of
  // the j x devices + 1 longest: a window of j + 1 in the sorted order.
  double least_head = kInf, least_tail = kInf, best = 0, window = 0;
  size_t window_start = 0;
  for (size_t i = 0; i < keep; ++i) {
    least_head = std::min(least_head, kernels[i].head);
    least_tail = std::min(least_tail, kernels[i].tail);
    window += kernels[i].cost;
    if (i == 0 || i % devices != 0) continue;
    const size_t j = i / devices;
    while (window_start + j + 1 <= i) window -= kernels[window_start++].cost;
    best = std::max(best, least_head + window + least_tail);
  }
  // The few longest exactly: however they are spread over the devices,
  // some device runs a share no smaller than the best split's largest,
  // between their least head and least tail. Each prefix of them counts,
  // the longest before a shorter one lowers the least head or tail.
  const size_t few = std::min<size_t>(keep, kExactLongKernels);
  std::vector<double> costs;
  least_head = least_tail = kInf;
  for (size_t i = 0; i < few; ++i) {
    costs.push_back(kernels[i].cost);
    least_head = std::min(least_head, kernels[i].head);
    least_tail = std::min(least_tail, kernels[i].tail);
    const bool last = i + 1 == few || kernels[i + 1].head < least_head ||
                      kernels[i + 1].tail < least_tail;
    if (costs.size() > static_cast<size_t>(devices) && last) {
      best = std::max(
          best,
          least_head + LongestKernelsPartitionUs(costs, devices) + least_tail);
    }
  }
  return best;
}

}  // namespace weft::scheduler::bounds
