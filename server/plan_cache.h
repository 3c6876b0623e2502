// PlanCache: the checked plans of graphs submitted lately, so that a graph
// submitted again with the same options is neither built nor planned again.
//
// A serving loop submits one graph over and over; building, planning and
// checking it each time is most of what weftd spends on a small job's
// submission. An entry is keyed by the bytes of the graph and of the
// options as they came over the wire (SchedulerService::Submit makes the
// key, and leaves out what plans differently from one submission to the
// next: STREAM_AWARE, which weighs the streams other jobs keep busy, and
// graphs with user code, whose modules are prepared at every submission).
// It holds the CheckedPlan (the graph, spills and fills included, and its
// plan, both immutable and shared with the jobs that run them). Bounded by
// entries and by the nodes of the graphs held; past either, the least
// recently used entries go first. Thread-safe.
#ifndef WEFT_SERVER_PLAN_CACHE_H_
#define WEFT_SERVER_PLAN_CACHE_H_

#include <cstdint>
#include <list>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/plan_check.h"

namespace weft::server {

class PlanCache {
 public:
  struct Options {
    int max_entries = 256;  // 0: nothing is kept
    // Nodes of the graphs held, in all; a graph of more is never kept.
    int64_t max_nodes = 65536;
  };
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t entries = 0;
    int64_t nodes = 0;
  };

  explicit PlanCache(Options options);
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The plan kept for `key` (counted as a hit, and made the most recently
  // used), or nullopt (a miss).
  std::optional<runtime::CheckedPlan> Find(absl::string_view key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `plan` for `key` (replacing an entry of that key), evicting the
  // least recently used entries past the bounds.
  void Insert(std::string key, runtime::CheckedPlan plan)
      ABSL_LOCKS_EXCLUDED(mu_);

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string key;
    runtime::CheckedPlan plan;
    int64_t nodes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first

  void EraseLocked(Lru::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  // Views into the entries' keys.
  absl::flat_hash_map<absl::string_view, Lru::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t nodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_PLAN_CACHE_H_
