#include "server/plan_cache.h"

#include <utility>

namespace weft::server {

PlanCache::PlanCache(Options options) : options_(options) {}

std::optional<runtime::CheckedPlan> PlanCache::Find(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->plan;
}

void PlanCache::Insert(std::string key, runtime::CheckedPlan plan) {
  const int64_t nodes = plan.graph()->num_nodes();
  if (options_.max_entries <= 0 || nodes > options_.max_nodes) return;
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) EraseLocked(it->second);
  lru_.push_front(Entry{std::move(key), std::move(plan), nodes});
  index_.emplace(lru_.front().key, lru_.begin());
  nodes_ += nodes;
  while (static_cast<int64_t>(lru_.size()) > options_.max_entries ||
         nodes_ > options_.max_nodes) {
    EraseLocked(std::prev(lru_.end()));
  }
}

PlanCache::Stats PlanCache::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{hits_, misses_, static_cast<int64_t>(lru_.size()), nodes_};
}

void PlanCache::EraseLocked(Lru::iterator it) {
  nodes_ -= it->nodes;
  index_.erase(it->key);
  lru_.erase(it);
}

}  // namespace weft::server
