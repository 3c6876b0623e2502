#include "server/job_retention.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000);

// A finished job holding `bytes` of one output.
std::shared_ptr<JobRecord> Finished(const std::string& id, int64_t bytes) {
  auto job = std::make_shared<JobRecord>();
  job->id = id;
  absl::MutexLock lock(&job->mu);
  job->state = JobState::kSucceeded;
  OutputBuffer out;
  out.data =
      std::make_shared<const runtime::HostBuffer>(std::string(bytes, 'x'));
  job->outputs["y"] = out;
  job->output_bytes = bytes;
  return job;
}

bool HoldsOutputs(const std::shared_ptr<JobRecord>& job) {
  absl::MutexLock lock(&job->mu);
  return !job->outputs.empty();
}

TEST(JobRetentionTest, KeepsAtMostMaxJobs) {
  JobRetention retention({/*max_jobs=*/2, absl::InfiniteDuration(), 1 << 30});
  auto a = Finished("a", 1), b = Finished("b", 1), c = Finished("c", 1);
  retention.Add(a, kT0, 1);
  retention.Add(b, kT0, 1);
  EXPECT_TRUE(retention.Expire(kT0).empty());
  retention.Add(c, kT0, 1);
  std::vector<std::shared_ptr<JobRecord>> gone = retention.Expire(kT0);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0]->id, "a");
  EXPECT_FALSE(HoldsOutputs(a));
  EXPECT_EQ(retention.output_bytes(), 2);
  EXPECT_EQ(retention.size(), 2);
}

TEST(JobRetentionTest, ExpiresByAge) {
  JobRetention retention({1000, absl::Seconds(10), 1 << 30});
  EXPECT_EQ(retention.UntilNextExpiry(kT0), absl::InfiniteDuration());
  retention.Add(Finished("a", 1), kT0, 1);
  retention.Add(Finished("b", 1), kT0 + absl::Seconds(5), 1);
  EXPECT_EQ(retention.UntilNextExpiry(kT0 + absl::Seconds(4)),
            absl::Seconds(6));
  EXPECT_TRUE(retention.Expire(kT0 + absl::Seconds(9)).empty());
  EXPECT_EQ(retention.Expire(kT0 + absl::Seconds(10)).size(), 1u);
  EXPECT_EQ(retention.Expire(kT0 + absl::Seconds(15)).size(), 1u);
  EXPECT_EQ(retention.output_bytes(), 0);
}

TEST(JobRetentionTest, OutputBytesReleaseTheOldestFirst) {
  JobRetention retention({1000, absl::InfiniteDuration(), /*bytes=*/100});
  auto a = Finished("a", 60), b = Finished("b", 30), c = Finished("c", 50);
  retention.Add(a, kT0, 60);
  retention.Add(b, kT0, 30);
  EXPECT_TRUE(HoldsOutputs(a));
  retention.Add(c, kT0, 50);  // 140 > 100: a's 60 go
  EXPECT_FALSE(HoldsOutputs(a));
  EXPECT_TRUE(HoldsOutputs(b));
  EXPECT_TRUE(HoldsOutputs(c));
  EXPECT_EQ(retention.output_bytes(), 80);
  {
    absl::MutexLock lock(&a->mu);
    EXPECT_NE(a->outputs_released.find("--retain_output_bytes"),
              std::string::npos);
  }
  // The job itself stays.
  EXPECT_EQ(retention.size(), 3);
  // One job alone over the bound keeps nothing.
  auto huge = Finished("huge", 500);
  retention.Add(huge, kT0, 500);
  EXPECT_FALSE(HoldsOutputs(huge));
  EXPECT_LE(retention.output_bytes(), 100);
}

// A finished job holding a trace of `bytes` (and no outputs).
std::shared_ptr<JobRecord> Traced(const std::string& id, int64_t bytes) {
  auto job = std::make_shared<JobRecord>();
  job->id = id;
  absl::MutexLock lock(&job->mu);
  job->state = JobState::kSucceeded;
  job->trace = std::make_shared<const runtime::RecordedTrace>();
  job->trace_bytes = bytes;
  return job;
}

bool HoldsTrace(const std::shared_ptr<JobRecord>& job) {
  absl::MutexLock lock(&job->mu);
  return job->trace != nullptr;
}

TEST(JobRetentionTest, TraceBytesReleaseTheOldestFirst) {
  JobRetention::Options options;
  options.max_jobs = 10;
  options.max_trace_bytes = 100;
  JobRetention retention(options);
  auto a = Traced("a", 40), b = Traced("b", 40), c = Traced("c", 40);
  retention.Add(a, kT0, 0, 40);
  retention.Add(b, kT0, 0, 40);
  EXPECT_EQ(retention.trace_bytes(), 80);
  EXPECT_TRUE(HoldsTrace(a));
  retention.Add(c, kT0, 0, 40);  // 120 > 100: a's trace goes
  EXPECT_EQ(retention.trace_bytes(), 80);
  EXPECT_FALSE(HoldsTrace(a));
  EXPECT_TRUE(HoldsTrace(b));
  EXPECT_TRUE(HoldsTrace(c));
  {
    absl::MutexLock lock(&a->mu);
    EXPECT_NE(a->trace_released.find("--retain_trace_bytes"),
              std::string::npos);
  }
  // The jobs stay; expiring one returns its trace's bytes.
  EXPECT_EQ(retention.size(), 3);
  JobRetention small(
      {/*max_jobs=*/1, absl::InfiniteDuration(), 1 << 30, 1 << 30});
  small.Add(Traced("x", 30), kT0, 0, 30);
  small.Add(Traced("y", 20), kT0, 0, 20);
  EXPECT_EQ(small.Expire(kT0).size(), 1u);
  EXPECT_EQ(small.trace_bytes(), 20);
}

}  // namespace
}  // namespace weft::server
