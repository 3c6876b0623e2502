#include "server/job_event_log.h"

#include <string>

#include "gtest/gtest.h"

namespace weft::server {
namespace {

NodeEventInfo Event(int i) {
  NodeEventInfo e;
  e.node = "n" + std::to_string(i);
  return e;
}

TEST(JobEventLogTest, KeepsEveryEventUpToItsCapacity) {
  JobEventLog log(4);
  for (int i = 0; i < 3; ++i) log.Add(Event(i));
  EXPECT_EQ(log.begin(), 0);
  EXPECT_EQ(log.end(), 3);
  EXPECT_EQ(log.at(0).node, "n0");
  EXPECT_EQ(log.at(2).node, "n2");
}

TEST(JobEventLogTest, DropsTheOldestBeyondItsCapacity) {
  JobEventLog log(4);
  for (int i = 0; i < 10; ++i) log.Add(Event(i));
  EXPECT_EQ(log.begin(), 6);
  EXPECT_EQ(log.end(), 10);
  EXPECT_EQ(log.at(6).node, "n6");
  EXPECT_EQ(log.at(9).node, "n9");
}

TEST(JobEventLogTest, TrimKeepsTheLastAndLowersTheCapacity) {
  JobEventLog log(8);
  for (int i = 0; i < 6; ++i) log.Add(Event(i));
  log.Trim(2);
  EXPECT_EQ(log.begin(), 4);
  EXPECT_EQ(log.end(), 6);
  EXPECT_EQ(log.at(4).node, "n4");
  EXPECT_EQ(log.capacity(), 2);
  log.Add(Event(6));
  EXPECT_EQ(log.begin(), 5);
  // Trimming never raises the capacity.
  log.Trim(100);
  EXPECT_EQ(log.capacity(), 2);
}

TEST(JobEventLogTest, TrimToNothingCountsEveryEventAsDropped) {
  JobEventLog log(8);
  for (int i = 0; i < 5; ++i) log.Add(Event(i));
  log.Trim(0);
  EXPECT_EQ(log.begin(), 5);
  EXPECT_EQ(log.end(), 5);
  log.Add(Event(5));  // counted, not kept
  EXPECT_EQ(log.begin(), 6);
  EXPECT_EQ(log.end(), 6);
}

TEST(JobEventLogTest, CapacityIsAtLeastOne) {
  JobEventLog log(0);
  EXPECT_EQ(log.capacity(), 1);
  log.Add(Event(0));
  log.Add(Event(1));
  EXPECT_EQ(log.begin(), 1);
  EXPECT_EQ(log.at(1).node, "n1");
}

}  // namespace
}  // namespace weft::server
