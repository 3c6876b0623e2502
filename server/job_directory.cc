#include "server/job_directory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::server {

std::string JobDirectory::RequestKey(absl::string_view tenant,
                                     absl::string_view request_id) {
  return absl::StrCat(tenant, "\x1f", request_id);
}

void JobDirectory::Name(JobRecord& job) {
  while (true) {
    job.id = absl::StrFormat("j-%016x", absl::Uniform<uint64_t>(bitgen_));
    if (!jobs_.contains(job.id)) break;
  }
  job.seq = next_seq_++;
}

void JobDirectory::Add(const std::shared_ptr<JobRecord>& job) {
  jobs_[job->id] = job;
  if (!job->request_id.empty()) {
    request_ids_[RequestKey(job->tenant, job->request_id)] = job->id;
  }
}

void JobDirectory::Remove(const JobRecord& job) {
  if (!job.request_id.empty()) {
    auto it = request_ids_.find(RequestKey(job.tenant, job.request_id));
    if (it != request_ids_.end() && it->second == job.id) {
      request_ids_.erase(it);
    }
  }
  jobs_.erase(job.id);
}

std::shared_ptr<JobRecord> JobDirectory::Find(absl::string_view id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<JobRecord> JobDirectory::FindRequest(
    absl::string_view tenant, absl::string_view request_id) const {
  if (request_id.empty()) return nullptr;
  auto it = request_ids_.find(RequestKey(tenant, request_id));
  if (it == request_ids_.end()) return nullptr;
  return Find(it->second);
}

}  // namespace weft::server
