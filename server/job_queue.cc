#include "server/job_queue.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace weft::server {

void JobQueue::Push(Entry entry) {
  auto [it, created] = tenants_.try_emplace(entry.tenant);
  Tenant& tenant = it->second;
  if (created) tenant.since = entry.seq;
  const Key key{-static_cast<int64_t>(entry.priority), entry.seq};
  tenant.order.insert(key);
  tenant.ids.emplace(entry.seq, std::move(entry.id));
  waiting_.insert(entry.tenant);
  ++size_;
  ++version_;
}

bool JobQueue::Remove(absl::string_view tenant_name, int32_t priority,
                      uint64_t seq) {
  auto it = tenants_.find(tenant_name);
  if (it == tenants_.end()) return false;
  Tenant& tenant = it->second;
  if (tenant.order.erase(Key{-static_cast<int64_t>(priority), seq}) == 0) {
    return false;
  }
  tenant.ids.erase(seq);
  --size_;
  ++version_;
  const std::string name = it->first;
  if (tenant.order.empty()) waiting_.erase(name);
  MaybeForget(name);
  return true;
}

const std::string* JobQueue::NextTenant(bool bounded) const {
  // O(tenants waiting): the queue's length bounds it.
  const std::string* best = nullptr;
  const Tenant* best_tenant = nullptr;
  for (const std::string& name : waiting_) {
    const Tenant& t = tenants_.find(name)->second;
    if (bounded && max_running_per_tenant_ > 0 &&
        t.running >= max_running_per_tenant_) {
      continue;
    }
    if (best == nullptr ||
        std::tie(t.running, t.last_turn, t.since) <
            std::tie(best_tenant->running, best_tenant->last_turn,
                     best_tenant->since)) {
      best = &name;
      best_tenant = &t;
    }
  }
  return best;
}

const std::string* JobQueue::PeekId() const {
  const std::string* next = NextTenant(/*bounded=*/true);
  if (next == nullptr) return nullptr;
  const Tenant& tenant = tenants_.find(*next)->second;
  return &tenant.ids.find(std::get<1>(*tenant.order.begin()))->second;
}

std::vector<const std::string*> JobQueue::OtherTenantsNext() const {
  const std::string* next = NextTenant(/*bounded=*/true);
  std::vector<std::pair<const Tenant*, const std::string*>> others;
  for (const std::string& name : waiting_) {
    if (next == nullptr || name == *next) continue;
    const Tenant& t = tenants_.find(name)->second;
    if (max_running_per_tenant_ > 0 && t.running >= max_running_per_tenant_) {
      continue;
    }
    others.emplace_back(&t, &t.ids.find(std::get<1>(*t.order.begin()))->second);
  }
  std::sort(others.begin(), others.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first->running, a.first->last_turn, a.first->since) <
           std::tie(b.first->running, b.first->last_turn, b.first->since);
  });
  std::vector<const std::string*> ids;
  ids.reserve(others.size());
  for (const auto& [tenant, id] : others) ids.push_back(id);
  return ids;
}

JobQueue::Entry JobQueue::PopTenant(absl::string_view tenant) {
  return PopFrom(std::string(tenant));
}

std::optional<JobQueue::Entry> JobQueue::Pop() {
  const std::string* next = NextTenant(/*bounded=*/true);
  if (next == nullptr) return std::nullopt;
  return PopFrom(*next);
}

JobQueue::Entry JobQueue::PopFrom(const std::string& tenant_name) {
  ++version_;
  const std::string name = tenant_name;
  Tenant& tenant = tenants_.find(name)->second;
  const Key key = *tenant.order.begin();
  tenant.order.erase(tenant.order.begin());
  Entry entry;
  entry.tenant = name;
  entry.priority = static_cast<int32_t>(-std::get<0>(key));
  entry.seq = std::get<1>(key);
  auto id = tenant.ids.find(entry.seq);
  entry.id = std::move(id->second);
  tenant.ids.erase(id);
  ++tenant.running;
  tenant.last_turn = ++turns_;
  --size_;
  if (tenant.order.empty()) waiting_.erase(name);
  return entry;
}

std::vector<JobQueue::Entry> JobQueue::TakeAll() {
  std::vector<Entry> taken;
  taken.reserve(size_);
  // In start order as if every job could start (no bound), none finishing.
  while (!empty()) taken.push_back(PopFrom(*NextTenant(/*bounded=*/false)));
  // None started: take back what Pop counted.
  for (const Entry& entry : taken) {
    --tenants_.find(entry.tenant)->second.running;
  }
  for (const Entry& entry : taken) MaybeForget(entry.tenant);
  return taken;
}

void JobQueue::Finished(absl::string_view tenant_name) {
  auto it = tenants_.find(tenant_name);
  if (it == tenants_.end() || it->second.running == 0) return;
  --it->second.running;
  ++version_;
  MaybeForget(it->first);
}

void JobQueue::MaybeForget(const std::string& name) {
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return;
  // A tenant with nothing queued or running starts afresh, as if never
  // served: coming back after idling must not cost it its turn.
  if (it->second.order.empty() && it->second.running == 0) {
    tenants_.erase(it);
  }
}

int64_t JobQueue::queued(absl::string_view tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0
                              : static_cast<int64_t>(it->second.order.size());
}

int64_t JobQueue::running(absl::string_view tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.running;
}

}  // namespace weft::server
