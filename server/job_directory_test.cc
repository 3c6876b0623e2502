#include "server/job_directory.h"

#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "server/job_record.h"

namespace weft::server {
namespace {

std::shared_ptr<JobRecord> Job(const std::string& tenant = "",
                               const std::string& request_id = "") {
  auto job = std::make_shared<JobRecord>();
  job->tenant = tenant;
  job->request_id = request_id;
  return job;
}

TEST(JobDirectoryTest, NamesJobsUniquelyInSubmissionOrder) {
  JobDirectory directory;
  std::set<std::string> ids;
  for (uint64_t i = 0; i < 100; ++i) {
    std::shared_ptr<JobRecord> job = Job();
    directory.Name(*job);
    EXPECT_EQ(job->seq, i);
    EXPECT_EQ(job->id.size(), 18u);
    EXPECT_EQ(job->id.substr(0, 2), "j-");
    EXPECT_TRUE(ids.insert(job->id).second);
    directory.Add(job);
  }
  EXPECT_EQ(directory.size(), 100);
}

TEST(JobDirectoryTest, FindsByIdUntilRemoved) {
  JobDirectory directory;
  std::shared_ptr<JobRecord> job = Job();
  directory.Name(*job);
  EXPECT_EQ(directory.Find(job->id), nullptr);  // named, not published
  directory.Add(job);
  EXPECT_EQ(directory.Find(job->id), job);
  EXPECT_EQ(directory.Find("j-0000000000000000"), nullptr);
  directory.Remove(*job);
  EXPECT_EQ(directory.Find(job->id), nullptr);
  EXPECT_EQ(directory.size(), 0);
}

TEST(JobDirectoryTest, RequestIdsAreScopedByTenant) {
  JobDirectory directory;
  std::shared_ptr<JobRecord> a = Job("t", "r");
  std::shared_ptr<JobRecord> b = Job("u", "r");
  std::shared_ptr<JobRecord> none = Job("t", "");
  for (const auto& job : {a, b, none}) {
    directory.Name(*job);
    directory.Add(job);
  }
  EXPECT_EQ(directory.FindRequest("t", "r"), a);
  EXPECT_EQ(directory.FindRequest("u", "r"), b);
  EXPECT_EQ(directory.FindRequest("t", ""), nullptr);
  EXPECT_EQ(directory.FindRequest("v", "r"), nullptr);
  // The key's parts cannot run into each other.
  EXPECT_EQ(directory.FindRequest("t\x1fr", ""), nullptr);
}

TEST(JobDirectoryTest, RemovingAnOlderJobKeepsANewerJobsRequestId) {
  JobDirectory directory;
  std::shared_ptr<JobRecord> old_job = Job("t", "r");
  directory.Name(*old_job);
  directory.Add(old_job);
  std::shared_ptr<JobRecord> new_job = Job("t", "r");
  directory.Name(*new_job);
  directory.Add(new_job);  // took the request id over
  directory.Remove(*old_job);
  EXPECT_EQ(directory.FindRequest("t", "r"), new_job);
  directory.Remove(*new_job);
  EXPECT_EQ(directory.FindRequest("t", "r"), nullptr);
}

}  // namespace
}  // namespace weft::server
