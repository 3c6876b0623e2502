#include "runtime/job_events.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/event_pool.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

class JobEventsTest : public ::testing::Test {
 protected:
  JobEventsTest() {
    SimBackend::Options options;
    options.num_devices = 2;
    backend_ = SimBackend::Create(options).value();
    for (int d = 0; d < 2; ++d) {
      owned_.push_back(std::make_unique<EventPool>(backend_.get(), d));
      pools_.push_back(owned_.back().get());
    }
  }

  std::unique_ptr<SimBackend> backend_;
  std::vector<std::unique_ptr<EventPool>> owned_;
  std::vector<EventPool*> pools_;
};

TEST_F(JobEventsTest, PlanEventsStartUnrecorded) {
  JobEvents events(pools_, 3);
  EXPECT_EQ(events.plan_event(0).value, 0u);
  EXPECT_EQ(events.plan_event(2).value, 0u);
  EXPECT_EQ(events.held(), 0);
}

TEST_F(JobEventsTest, SignalFromTheSameDeviceReusesTheEvent) {
  JobEvents events(pools_, 2);
  absl::StatusOr<EventHandle> first = events.ForSignal(1, 0);
  ASSERT_OK(first);
  absl::StatusOr<EventHandle> again = events.ForSignal(1, 0);
  ASSERT_OK(again);
  EXPECT_EQ(*first, *again);
  EXPECT_EQ(events.plan_event(1), *first);
  EXPECT_EQ(events.plan_event(0).value, 0u);
  EXPECT_EQ(events.held(), 1);
}

TEST_F(JobEventsTest, SignalFromAnotherDeviceTakesANewEventAndKeepsTheOld) {
  JobEvents events(pools_, 1);
  absl::StatusOr<EventHandle> on0 = events.ForSignal(0, 0);
  ASSERT_OK(on0);
  absl::StatusOr<EventHandle> on1 = events.ForSignal(0, 1);
  ASSERT_OK(on1);
  EXPECT_FALSE(*on0 == *on1);
  EXPECT_EQ(events.plan_event(0), *on1);
  // The replaced event stays held: a wait enqueued on it still needs it.
  EXPECT_EQ(pools_[0]->in_use(), 1);
  EXPECT_EQ(pools_[1]->in_use(), 1);
  EXPECT_EQ(events.held(), 2);
}

TEST_F(JobEventsTest, ReleaseAllGivesEveryEventBackToItsPool) {
  JobEvents events(pools_, 1);
  ASSERT_OK(events.Acquire(0));
  ASSERT_OK(events.Acquire(1));
  ASSERT_OK(events.ForSignal(0, 1));
  EXPECT_EQ(pools_[0]->in_use(), 1);
  EXPECT_EQ(pools_[1]->in_use(), 2);
  events.ReleaseAll();
  EXPECT_EQ(events.held(), 0);
  EXPECT_EQ(pools_[0]->in_use(), 0);
  EXPECT_EQ(pools_[1]->in_use(), 0);
  EXPECT_EQ(pools_[1]->total(), 2);  // kept for reuse
}

// The next job of the same shape takes the same events in the same order,
// with more events free in the pools than it needs.
TEST_F(JobEventsTest, TheNextJobOfTheSameShapeGetsTheSameEvents) {
  {
    JobEvents spare(pools_, 0);
    for (int i = 0; i < 5; ++i) ASSERT_OK(spare.Acquire(0));
    spare.ReleaseAll();
  }
  std::vector<EventHandle> first;
  for (int run = 0; run < 3; ++run) {
    JobEvents events(pools_, 0);
    std::vector<EventHandle> taken;
    for (int device : {0, 1, 0, 0}) {
      absl::StatusOr<EventHandle> event = events.Acquire(device);
      ASSERT_OK(event);
      taken.push_back(*event);
    }
    if (run == 0) {
      first = taken;
    } else {
      EXPECT_EQ(taken, first) << "run " << run;
    }
    events.ReleaseAll();
  }
  EXPECT_EQ(pools_[0]->total(), 5);
}

}  // namespace
}  // namespace weft::runtime
