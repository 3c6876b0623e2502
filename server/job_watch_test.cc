#include "server/job_watch.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/job_record.h"

namespace weft::server {
namespace {

std::shared_ptr<JobRecord> Record(int64_t max_events, int64_t finished) {
  auto job = std::make_shared<JobRecord>();
  job->id = "job";
  job->finished_events = finished;
  absl::MutexLock lock(&job->mu);
  job->events = JobEventLog(max_events);
  job->state = JobState::kRunning;
  return job;
}

void AddEvents(JobRecord& job, int from, int to) {
  absl::MutexLock lock(&job.mu);
  for (int i = from; i < to; ++i) {
    NodeEventInfo e;
    e.node = "n" + std::to_string(i);
    job.events.Add(e);
  }
  job.Changed();
}

void End(JobRecord& job) {
  absl::MutexLock lock(&job.mu);
  job.state = JobState::kSucceeded;
  job.Changed();
  job.MaybeDropEvents();
}

// Every update until done: the node names, and the dropped counts summed.
std::vector<std::string> Drain(JobWatch& watch, int64_t* dropped) {
  std::vector<std::string> names;
  *dropped = 0;
  WatchUpdate u = watch.Next(absl::Now());
  EXPECT_TRUE(u.changed);
  while (!u.done) {
    u = watch.Next(absl::Now() + absl::Seconds(10), /*max_events=*/3);
    EXPECT_TRUE(u.changed);
    if (!u.changed) break;
    *dropped += u.events_dropped;
    for (const NodeEventInfo& e : u.events) names.push_back(e.node);
  }
  return names;
}

TEST(JobWatchTest, AWatchBegunAfterTheEndGetsTheEventsKept) {
  auto job = Record(/*max_events=*/100, /*finished=*/100);
  AddEvents(*job, 0, 5);
  End(*job);
  JobWatch watch(job);
  int64_t dropped = -1;
  EXPECT_EQ(Drain(watch, &dropped),
            (std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"}));
  EXPECT_EQ(dropped, 0);
}

TEST(JobWatchTest, AFinishedJobNobodyWatchesKeepsItsLastEvents) {
  auto job = Record(/*max_events=*/100, /*finished=*/2);
  AddEvents(*job, 0, 5);
  End(*job);
  JobWatch watch(job);
  int64_t dropped = -1;
  EXPECT_EQ(Drain(watch, &dropped), (std::vector<std::string>{"n3", "n4"}));
  EXPECT_EQ(dropped, 3);
}

TEST(JobWatchTest, AWatchOfTheEndKeepsEveryEventUntilItLeaves) {
  auto job = Record(/*max_events=*/100, /*finished=*/1);
  auto watch = std::make_unique<JobWatch>(job);
  AddEvents(*job, 0, 4);
  End(*job);  // watched: nothing trimmed
  int64_t dropped = -1;
  EXPECT_EQ(Drain(*watch, &dropped).size(), 4u);
  watch.reset();  // the last watch gone: trimmed
  JobWatch late(job);
  EXPECT_EQ(Drain(late, &dropped), (std::vector<std::string>{"n3"}));
  EXPECT_EQ(dropped, 3);
}

TEST(JobWatchTest, AWatchThatFallsBehindIsToldWhatItMissed) {
  auto job = Record(/*max_events=*/4, /*finished=*/4);
  JobWatch watch(job);
  EXPECT_TRUE(watch.Next(absl::Now()).changed);
  AddEvents(*job, 0, 10);  // n0..n5 dropped before the watch reads them
  WatchUpdate u = watch.Next(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(u.events_dropped, 6);
  ASSERT_EQ(u.events.size(), 4u);
  EXPECT_EQ(u.events.front().node, "n6");
  AddEvents(*job, 10, 12);
  u = watch.Next(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(u.events_dropped, 0);
  ASSERT_EQ(u.events.size(), 2u);
  EXPECT_EQ(u.events.front().node, "n10");
}

TEST(JobWatchTest, ARunningJobHoldsAtMostItsCapacity) {
  auto job = Record(/*max_events=*/16, /*finished=*/4);
  AddEvents(*job, 0, 100000);
  absl::MutexLock lock(&job->mu);
  EXPECT_EQ(job->events.end() - job->events.begin(), 16);
  EXPECT_EQ(job->events.end(), 100000);
}

}  // namespace
}  // namespace weft::server
