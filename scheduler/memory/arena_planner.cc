// Per device: the conflict graph, the lower bound as far as it is needed,
// the placement orders tried until one meets it, and the local search that
// lowers the best (arena_planner.h).
#include "scheduler/memory/arena_planner.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/memory/arena_bounds.h"
#include "scheduler/memory/arena_placement.h"
#include "scheduler/memory/conflict_graph.h"
#include "scheduler/memory/release_placement.h"

namespace weft::scheduler::memory {
namespace {

int64_t AlignUp(uint64_t size, uint64_t alignment) {
  return static_cast<int64_t>((size + alignment - 1) / alignment * alignment);
}

// ArenaOptions::max_conflicts, its default filled in.
int64_t MaxConflicts(const Lifetimes& lifetimes, const ArenaOptions& options) {
  if (options.max_conflicts > 0) return options.max_conflicts;
  return 64 * int64_t{lifetimes.num_copies()} + (int64_t{1} << 20);
}

}  // namespace

const char* ArenaHeuristicName(ArenaHeuristic heuristic) {
  switch (heuristic) {
    case ArenaHeuristic::kBySize:
      return "by_size";
    case ArenaHeuristic::kInOrder:
      return "in_order";
    case ArenaHeuristic::kByConflicts:
      return "by_conflicts";
    case ArenaHeuristic::kByLifetime:
      return "by_lifetime";
    case ArenaHeuristic::kTwoEnded:
      return "two_ended";
    case ArenaHeuristic::kReleaseOrder:
      return "release_order";
  }
  return "?";
}

ArenaPlan PlanArenas(const Lifetimes& lifetimes, const ArenaOptions& options) {
  ArenaPlan plan;
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 1);
  const int num_copies = lifetimes.num_copies();
  plan.offsets.assign(num_copies, 0);
  plan.sizes.resize(num_copies);
  for (int c = 0; c < num_copies; ++c) {
    plan.sizes[c] = AlignUp(lifetimes.copy(c).size_bytes, alignment);
  }
  std::vector<ArenaHeuristic> heuristics =
      options.heuristics.empty()
          ? std::vector<ArenaHeuristic>(std::begin(kAllArenaHeuristics),
                                        std::end(kAllArenaHeuristics))
          : options.heuristics;
  // Both ends second: chains of inverted residual blocks meet the bound only
  // that way, and the search stops there. Ties go to the earlier order.
  if (heuristics.size() > 2) {
    const auto two_ended = std::find(heuristics.begin() + 1, heuristics.end(),
                                     ArenaHeuristic::kTwoEnded);
    if (two_ended != heuristics.end()) {
      std::rotate(heuristics.begin() + 1, two_ended, two_ended + 1);
    }
  }
  const int num_positions = lifetimes.num_positions();
  for (int d = 0; d < lifetimes.num_devices(); ++d) {
    DeviceArena arena;
    arena.device = d;
    if (d < static_cast<int>(options.budget_bytes.size())) {
      arena.budget_bytes = options.budget_bytes[d];
    }
    const int64_t max_conflicts = MaxConflicts(lifetimes, options);
    int64_t max_large_conflicts = options.max_large_conflicts;
    if (max_large_conflicts == 0) {
      max_large_conflicts =
          128 * int64_t{lifetimes.num_copies()} + (int64_t{1} << 22);
    }
    std::vector<int32_t> copies;
    for (int c = 0; c < num_copies; ++c) {
      if (lifetimes.copy(c).device == d) copies.push_back(c);
    }
    const int n = static_cast<int>(copies.size());
    arena.num_copies = n;
    std::vector<int64_t> sizes(n);
    // Live bytes along issue order: +size at first use, -size after the
    // last (uploads at -1, so everything shifts by one).
    std::vector<int64_t> delta(num_positions + 3, 0);
    bool all_sized = true;
    for (int k = 0; k < n; ++k) {
      const BufferCopy& copy = lifetimes.copy(copies[k]);
      sizes[k] = plan.sizes[copies[k]];
      all_sized = all_sized && sizes[k] > 0;
      arena.no_reuse_bytes += sizes[k];
      arena.lower_bound_bytes = std::max(arena.lower_bound_bytes, sizes[k]);
      delta[copy.first + 1] += sizes[k];
      delta[copy.last + 2] -= sizes[k];
    }
    // The peak along issue order, and the peak of each of kWindows equal
    // stretches of it (where cliques grow from).
    constexpr int kWindows = 16;
    const int window = std::max<int>(
        1, (static_cast<int>(delta.size()) + kWindows - 1) / kWindows);
    std::vector<std::pair<int64_t, int32_t>> window_peaks;  // (bytes, at)
    int64_t live = 0;
    for (size_t i = 0; i < delta.size(); ++i) {
      live += delta[i];
      arena.peak_live_bytes = std::max(arena.peak_live_bytes, live);
      if (i % window == 0) window_peaks.emplace_back(0, 0);
      if (live > window_peaks.back().first) {
        window_peaks.back() = {live, static_cast<int32_t>(i) - 1};
      }
    }
    arena.lower_bound_bytes =
        std::max(arena.lower_bound_bytes, arena.peak_live_bytes);
    // Cliques: the copies live at each peak, grown by local search. No
    // bound exceeds the sum of the sizes: where the issue-order peak is
    // that sum already (a small job's few buffers), the executions' peaks
    // have nothing to add.
    std::vector<std::vector<int32_t>> seeds(Lifetimes::kExecutions);
    for (int e = 0; e < Lifetimes::kExecutions &&
                    arena.lower_bound_bytes < arena.no_reuse_bytes;
         ++e) {
      arena.lower_bound_bytes =
          std::max(arena.lower_bound_bytes,
                   ExecutionPeak(lifetimes, copies, sizes, e, &seeds[e]));
    }
    if (arena.lower_bound_bytes == arena.no_reuse_bytes && all_sized &&
        (heuristics[0] == ArenaHeuristic::kBySize ||
         heuristics[0] == ArenaHeuristic::kInOrder)) {
      // Every copy is live at one instant of some execution: they conflict
      // pairwise and no arena is smaller than their sum. The first order
      // stacks them so, with no conflict graph to build.
      std::vector<int32_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      if (heuristics[0] == ArenaHeuristic::kBySize) {
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          return sizes[a] > sizes[b];
        });
      }
      int64_t top = 0;
      for (const int32_t k : order) {
        plan.offsets[copies[k]] = top;
        top += sizes[k];
      }
      arena.conflicts = int64_t{n} * (n - 1) / 2;
      arena.heuristic = heuristics[0];
      arena.arena_bytes = top;
      arena.unimproved_arena_bytes = top;
      plan.devices.push_back(arena);
      continue;
    }
    ConflictGraph graph = BuildConflictGraph(lifetimes, d, max_conflicts);
    arena.conflicts =
        graph.complete ? static_cast<int64_t>(graph.conflicts.items.size()) / 2
                       : -1;
    // Whether a large graph (over max_conflicts) was built after all: the
    // copies are placed against it by size only.
    bool large = false;
    // The dearer bounds, computed only while no order meets the bound:
    // cliques grown from the peaks (stopping once one meets the best
    // arena), then the heaviest antichain.
    auto raise_by_cliques = [&](int64_t best) {
      if (graph.complete && options.clique_rounds > 0) {
        const size_t first_window = seeds.size();
        seeds.resize(first_window + window_peaks.size());
        for (int k = 0; k < n; ++k) {
          const BufferCopy& copy = lifetimes.copy(graph.copies[k]);
          // Windows whose peak lies in the copy's issue interval.
          const int lo = std::max(copy.first + 1, 0) / window;
          const int hi =
              std::min<int>(copy.last + 1, static_cast<int>(delta.size()) - 1) /
              window;
          for (int w = lo; w <= hi && w < static_cast<int>(window_peaks.size());
               ++w) {
            const int32_t at = window_peaks[w].second;
            if (window_peaks[w].first > 0 && copy.first <= at &&
                at <= copy.last) {
              seeds[first_window + w].push_back(k);
            }
          }
        }
      }
      if (graph.complete && options.clique_rounds > 0) {
        for (std::vector<int32_t>& seed : seeds) {
          int64_t bytes = 0;
          for (const int32_t k :
               GrowClique(graph.conflicts, sizes, std::move(seed),
                          options.clique_rounds)) {
            bytes += sizes[k];
          }
          arena.lower_bound_bytes = std::max(arena.lower_bound_bytes, bytes);
          if (arena.lower_bound_bytes >= best) break;
        }
      }
    };
    auto raise_by_antichain = [&] {
      if (num_positions <= options.antichain_max_positions) {
        arena.lower_bound_bytes =
            std::max(arena.lower_bound_bytes,
                     AntichainBound(lifetimes, graph.copies, sizes));
      }
    };

    std::vector<int32_t> order(n);
    std::vector<int64_t> offsets;
    std::vector<int64_t> best_offsets;
    int64_t best = -1;
    // The heaviest cliques around the copies at the top of the best
    // arena: the bytes stacked there are what the arena must hold.
    int64_t top_checked = -1;  // the arena whose top was searched
    int64_t clique_work_left =
        std::max(options.top_clique_search_work,
                 options.top_clique_work_per_copy * int64_t{n});
    auto raise_by_top_cliques = [&] {
      if (!graph.complete || top_checked == best ||
          best <= arena.lower_bound_bytes) {
        return;
      }
      top_checked = best;
      int seeds = 0;
      for (int k = 0; k < n && seeds < options.top_clique_seeds &&
                      clique_work_left > 0 && arena.lower_bound_bytes < best;
           ++k) {
        if (sizes[k] == 0 || best_offsets[k] + sizes[k] != best) continue;
        ++seeds;
        int64_t bytes = 0;
        for (const int32_t c : HeaviestCliqueAround(
                 graph.conflicts, sizes, k,
                 std::min(clique_work_left, options.top_clique_search_work),
                 &clique_work_left)) {
          bytes += sizes[c];
        }
        arena.lower_bound_bytes = std::max(arena.lower_bound_bytes, bytes);
      }
    };
    // Without a conflict graph: cliques among the copies nearest the
    // issue-order peaks and the first uses of the copies at the top, then
    // among the copies that may be live together with those ending
    // highest.
    auto raise_by_neighborhoods = [&](int64_t best) {
      if (options.neighborhood_clique_neighbors <= 0) return;
      // (-end, local index) of the copies ending highest.
      std::vector<std::pair<int64_t, int32_t>> ends;
      for (int k = 0; k < n; ++k) {
        if (sizes[k] > 0) ends.emplace_back(-(best_offsets[k] + sizes[k]), k);
      }
      const size_t seeds = std::min<size_t>(
          ends.size(),
          static_cast<size_t>(std::max(options.top_clique_seeds, 0)));
      std::partial_sort(ends.begin(), ends.begin() + seeds, ends.end());
      for (size_t i = 0; i < seeds && arena.lower_bound_bytes < best; ++i) {
        arena.lower_bound_bytes =
            std::max(arena.lower_bound_bytes,
                     NeighborhoodCliqueBound(
                         lifetimes, graph.copies, sizes, ends[i].second,
                         options.neighborhood_clique_neighbors,
                         options.top_clique_search_work));
      }
    };
    auto raise_by_local_cliques = [&](int64_t best) {
      raise_by_neighborhoods(best);
      if (options.local_clique_candidates <= 0) return;
      std::vector<int32_t> at;
      for (const auto& [bytes, position] : window_peaks) {
        if (bytes > 0) at.push_back(position);
      }
      int tops = 0;
      for (int k = 0; k < n && tops < options.top_clique_seeds; ++k) {
        if (sizes[k] > 0 && best_offsets[k] + sizes[k] == best) {
          at.push_back(lifetimes.copy(graph.copies[k]).first);
          ++tops;
        }
      }
      for (const int32_t position : at) {
        if (arena.lower_bound_bytes >= best) break;
        arena.lower_bound_bytes =
            std::max(arena.lower_bound_bytes,
                     LocalCliqueBound(lifetimes, graph.copies, sizes, position,
                                      options.local_clique_candidates,
                                      options.local_clique_search_work));
      }
    };
    if (!graph.complete) {
      best = PlaceByRelease(lifetimes, graph.copies, sizes, &best_offsets);
      arena.heuristic = ArenaHeuristic::kReleaseOrder;
      raise_by_local_cliques(best);
      const bool over_budget =
          arena.budget_bytes > 0 && best > arena.budget_bytes;
      if ((over_budget || options.place_large_graphs) &&
          max_large_conflicts > max_conflicts &&
          best > arena.lower_bound_bytes) {
        ConflictGraph larger =
            BuildConflictGraph(lifetimes, d, max_large_conflicts);
        if (larger.complete) {
          graph = std::move(larger);
          arena.conflicts =
              static_cast<int64_t>(graph.conflicts.items.size()) / 2;
          large = true;
        }
      }
    }
    int64_t two_ended_height = -1;  // the bound both ends last used
    auto try_heuristic = [&](ArenaHeuristic h) {
      if (h == ArenaHeuristic::kTwoEnded) {
        two_ended_height = arena.lower_bound_bytes;
      }
      std::iota(order.begin(), order.end(), 0);
      auto lifetime = [&](int32_t k) {
        const BufferCopy& copy = lifetimes.copy(graph.copies[k]);
        return copy.last - copy.first;
      };
      auto degree = [&](int32_t k) {
        return graph.conflicts.offsets[k + 1] - graph.conflicts.offsets[k];
      };
      switch (h) {
        case ArenaHeuristic::kBySize:
          std::stable_sort(
              order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return sizes[a] > sizes[b]; });
          break;
        case ArenaHeuristic::kInOrder:
        case ArenaHeuristic::kReleaseOrder:
          break;  // copies are numbered by first use
        case ArenaHeuristic::kByConflicts:
          std::stable_sort(
              order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return degree(a) != degree(b) ? degree(a) > degree(b)
                                              : sizes[a] > sizes[b];
              });
          break;
        case ArenaHeuristic::kByLifetime:
        case ArenaHeuristic::kTwoEnded:
          std::stable_sort(
              order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return lifetime(a) != lifetime(b) ? lifetime(a) > lifetime(b)
                                                  : sizes[a] > sizes[b];
              });
          break;
      }
      const int64_t size =
          h == ArenaHeuristic::kReleaseOrder
              ? PlaceByRelease(lifetimes, graph.copies, sizes, &offsets)
              : Place(graph.conflicts, sizes, order, /*first_fit=*/false,
                      &offsets,
                      h == ArenaHeuristic::kTwoEnded ? two_ended_height : 0);
      if (best < 0 || size < best) {
        best = size;
        best_offsets.swap(offsets);
        arena.heuristic = h;
      }
    };
    // Heuristics in turn, stopping at an arena of the bound; the cliques
    // raise the bound after the first, the antichain after the last (both
    // ends then retried under the raised bound).
    bool two_ended = false;
    bool cliques = false;
    static constexpr ArenaHeuristic kLargeHeuristics[] = {
        ArenaHeuristic::kBySize};
    for (const ArenaHeuristic h : large ? absl::MakeConstSpan(kLargeHeuristics)
                                        : absl::MakeConstSpan(heuristics)) {
      if (!graph.complete) break;
      two_ended = two_ended || h == ArenaHeuristic::kTwoEnded;
      try_heuristic(h);
      if (best > arena.lower_bound_bytes && !cliques) {
        raise_by_cliques(best);
        cliques = true;
      }
      raise_by_top_cliques();
      if (best == arena.lower_bound_bytes) break;  // cannot do better
    }
    if (best > arena.lower_bound_bytes) {
      if (!cliques) raise_by_cliques(best);
      raise_by_antichain();
      if (graph.complete && two_ended && best > arena.lower_bound_bytes &&
          arena.lower_bound_bytes > two_ended_height) {
        try_heuristic(ArenaHeuristic::kTwoEnded);
        raise_by_top_cliques();
      }
    }
    // Lower the top step by step while the work lasts, each new top
    // searched for a clique that proves it.
    if (graph.complete && best > arena.lower_bound_bytes &&
        options.lower_top_work_per_copy > 0) {
      int64_t work_left = options.lower_top_work_per_copy * n;
      while (best > arena.lower_bound_bytes && work_left > 0) {
        const int64_t lowered =
            LowerTop(graph.conflicts, sizes, best, &work_left, &best_offsets);
        if (lowered >= best) break;
        best = lowered;
        raise_by_top_cliques();
      }
    }
    // Holes may cost more than reuse saves (below).
    arena.unimproved_arena_bytes =
        std::max<int64_t>(std::min(best, arena.no_reuse_bytes), 0);
    if (graph.complete && !large && best > arena.lower_bound_bytes) {
      best = Improve(graph.conflicts, sizes, arena.lower_bound_bytes,
                     options.improve_rounds, best, &best_offsets);
    }
    if (best > arena.no_reuse_bytes) {
      // Holes cost more than reuse saved: one copy after another.
      best = 0;
      for (int k = 0; k < n; ++k) {
        best_offsets[k] = best;
        best += sizes[k];
      }
    }
    arena.arena_bytes = std::max<int64_t>(best, 0);
    for (int k = 0; k < n; ++k) {
      plan.offsets[graph.copies[k]] = best_offsets[k];
    }
    plan.devices.push_back(arena);
  }
  return plan;
}

void ImproveArenaPlan(const Lifetimes& lifetimes, const ArenaOptions& options,
                      ArenaPlan* plan) {
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 1);
  plan->sizes.resize(lifetimes.num_copies());
  for (int c = 0; c < lifetimes.num_copies(); ++c) {
    plan->sizes[c] = AlignUp(lifetimes.copy(c).size_bytes, alignment);
  }
  if (options.improve_rounds <= 0) return;
  const int64_t max_conflicts = MaxConflicts(lifetimes, options);
  for (DeviceArena& arena : plan->devices) {
    if (arena.arena_bytes <= arena.lower_bound_bytes) continue;
    ConflictGraph graph =
        BuildConflictGraph(lifetimes, arena.device, max_conflicts);
    if (!graph.complete) continue;  // placed without one: no rounds
    const int n = static_cast<int>(graph.copies.size());
    std::vector<int64_t> sizes(n), offsets(n);
    for (int k = 0; k < n; ++k) {
      sizes[k] = plan->sizes[graph.copies[k]];
      offsets[k] = plan->offsets[graph.copies[k]];
    }
    const int64_t improved =
        Improve(graph.conflicts, sizes, arena.lower_bound_bytes,
                options.improve_rounds, arena.arena_bytes, &offsets);
    if (improved >= arena.arena_bytes) continue;
    arena.arena_bytes = improved;
    for (int k = 0; k < n; ++k) plan->offsets[graph.copies[k]] = offsets[k];
  }
}

}  // namespace weft::scheduler::memory
