// JobQueue: the order in which queued jobs start.
//
// Fairness between tenants comes first, priority second: the next job to
// start belongs to the tenant with the fewest jobs running (ties: the
// tenant served longest ago, a tenant never served before first, and
// among those the one that queued first);
// among that tenant's queued jobs, the highest priority, then the earliest
// submitted. So a tenant flooding the queue, at any priority, delays
// another tenant's first job by at most the time until one running job
// ends, and a priority only reorders the jobs of the tenant that set it.
//
// A tenant may have at most max_running_per_tenant jobs running: its
// further jobs wait even while slots are free, so that a tenant holding
// long jobs can never take every slot and leave other tenants none.
//
// The queue counts the jobs it handed out as running for their tenant
// until Finished is called; jobs removed without starting are not counted.
// Not thread-safe: the owner (JobManager) serialises calls.
#ifndef WEFT_SERVER_JOB_QUEUE_H_
#define WEFT_SERVER_JOB_QUEUE_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace weft::server {

class JobQueue {
 public:
  // One queued job. `seq` is unique and increases with submission order.
  struct Entry {
    std::string id;
    std::string tenant;
    int32_t priority = 0;
    uint64_t seq = 0;
  };

  // max_running_per_tenant: 0 means no bound.
  explicit JobQueue(int64_t max_running_per_tenant = 0)
      : max_running_per_tenant_(max_running_per_tenant) {}

  // Queues a job. REQUIRES: no queued entry has the same seq.
  void Push(Entry entry);

  // Removes a queued job without starting it; false when it is not queued.
  bool Remove(absl::string_view tenant, int32_t priority, uint64_t seq);

  // Removes and returns the next job to start (see the header comment), and
  // counts it as running for its tenant; nullopt when no queued job may
  // start (the queue is empty, or every tenant waiting is at its bound).
  std::optional<Entry> Pop();

  // Whether Pop would return a job.
  bool startable() const { return NextTenant(/*bounded=*/true) != nullptr; }
  // The id of the job Pop would return, or null; valid until the queue
  // changes.
  const std::string* PeekId() const;
  // The ids of the jobs that would start next for each other tenant that
  // may start one (not at its bound), in the order those tenants' turns
  // come; valid until the queue changes. Where the next job cannot start
  // yet, the job manager may start one of these beside it
  // (job_dispatch.cc).
  std::vector<const std::string*> OtherTenantsNext() const;
  // Pops `tenant`'s next job as Pop would pop it on that tenant's turn.
  // REQUIRES: `tenant` has a queued job and is below its bound.
  Entry PopTenant(absl::string_view tenant);

  // Removes every queued job without starting any, in the order Pop would
  // have returned them if none finished meanwhile.
  std::vector<Entry> TakeAll();

  // A job that Pop returned has ended.
  void Finished(absl::string_view tenant);

  int64_t size() const { return size_; }
  // Jobs one tenant may run at once (0: no bound).
  int64_t max_running_per_tenant() const { return max_running_per_tenant_; }
  bool empty() const { return size_ == 0; }
  // Queued jobs of `tenant`.
  int64_t queued(absl::string_view tenant) const;
  // Tenants with queued jobs.
  int tenants_waiting() const { return static_cast<int>(waiting_.size()); }
  // Jobs of `tenant` handed out by Pop and not yet Finished.
  int64_t running(absl::string_view tenant) const;
  // Changes with every call that changes the queue (or what its tenants
  // run): what was read from it holds while this is the same.
  uint64_t version() const { return version_; }

 private:
  // A tenant's queued jobs in start order: priority (highest first), then
  // submission.
  using Key = std::tuple<int64_t, uint64_t>;  // (-priority, seq)
  struct Tenant {
    std::set<Key> order;
    absl::flat_hash_map<uint64_t, std::string> ids;  // seq -> job id
    int64_t running = 0;
    uint64_t last_turn = 0;  // 0: never served
    uint64_t since = 0;      // seq of the job that brought it into the queue
  };

  // The tenant whose job starts next, or null when none may start
  // (`bounded`: tenants at max_running_per_tenant may not).
  const std::string* NextTenant(bool bounded) const;
  // Pops the best job of `name` without checking its bound.
  Entry PopFrom(const std::string& name);
  // Drops a tenant's entry once it has nothing queued or running.
  void MaybeForget(const std::string& tenant);

  const int64_t max_running_per_tenant_;
  uint64_t version_ = 0;
  absl::flat_hash_map<std::string, Tenant> tenants_;
  // Tenants with queued jobs.
  std::set<std::string> waiting_;
  int64_t size_ = 0;
  uint64_t turns_ = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_QUEUE_H_
