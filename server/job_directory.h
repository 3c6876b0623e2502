// JobDirectory: the job manager's retained jobs by id, and by idempotency
// key.
//
// Every retained job (queued, running or finished) is here under its id, a
// fresh "j-" and 16 hex digits that no retained job has; a job submitted
// with a request_id is also found by (tenant, request_id) while it is
// retained (AIP-155), so that a repeated submission returns it. Jobs are
// numbered in submission order (seq).
//
// Not thread-safe: the job manager calls it under its lock.
#ifndef WEFT_SERVER_JOB_DIRECTORY_H_
#define WEFT_SERVER_JOB_DIRECTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/string_view.h"
#include "server/job_record.h"

namespace weft::server {

class JobDirectory {
 public:
  using Map = absl::flat_hash_map<std::string, std::shared_ptr<JobRecord>>;

  // Names `job` (a fresh id and the next seq); Add publishes it.
  void Name(JobRecord& job);

  // Publishes a named job under its id and its request_id, if any.
  void Add(const std::shared_ptr<JobRecord>& job);

  // Forgets a job; its request_id too unless a newer job took it over.
  void Remove(const JobRecord& job);

  // The job of `id`, or null.
  std::shared_ptr<JobRecord> Find(absl::string_view id) const;

  // The retained job submitted by `tenant` with `request_id`, or null;
  // always null for an empty request_id.
  std::shared_ptr<JobRecord> FindRequest(absl::string_view tenant,
                                         absl::string_view request_id) const;

  const Map& jobs() const { return jobs_; }
  int64_t size() const { return static_cast<int64_t>(jobs_.size()); }

 private:
  static std::string RequestKey(absl::string_view tenant,
                                absl::string_view request_id);

  Map jobs_;
  // (tenant, request_id) -> job id.
  absl::flat_hash_map<std::string, std::string> request_ids_;
  uint64_t next_seq_ = 0;
  absl::BitGen bitgen_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_DIRECTORY_H_
