#include "runtime/sim/sim_device_model.h"

#include <memory>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "scheduler/occupancy.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using Engine = SimDeviceModel::Engine;
using Ticket = SimDeviceModel::Ticket;
using ::weft::testing::StatusIs;

constexpr int32_t kFull = scheduler::kOccupancyUnits;

class SimDeviceModelTest : public ::testing::Test {
 protected:
  // Books `duration` of `units` on `engine`, ready at `ready`; the timing.
  SimStream::Timing Book(SimDeviceModel& model, Engine engine, double ready,
                         double duration, int32_t units = kFull,
                         Ticket* ticket = nullptr) {
    SimStream::Timing timing(ready, &no_waker_);
    EXPECT_OK(model.BookInTurn(engine, duration, units, ticket, timing));
    return timing;
  }

  const std::shared_ptr<SimStream::Waker> no_waker_;
  SimClock unpaced_{0};
  SimClock paced_{1};
};

TEST_F(SimDeviceModelTest, KernelsShareTheDeviceByOccupancy) {
  SimDeviceModel model(&unpaced_, /*max_concurrent_kernels=*/32);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull / 2).end_us, 10);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull / 2).end_us, 10);
  // Full: the next waits until both have ended.
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull).end_us, 20);
}

TEST_F(SimDeviceModelTest, MaxConcurrentKernelsBoundsSmallKernels) {
  SimDeviceModel model(&unpaced_, /*max_concurrent_kernels=*/2);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, 1).end_us, 10);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, 1).end_us, 10);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, 1).end_us, 20);
}

TEST_F(SimDeviceModelTest, EachCopyEngineRunsOneCopyAtATime) {
  SimDeviceModel model(&unpaced_, 32);
  EXPECT_EQ(Book(model, Engine::kHostToDevice, 0, 5).end_us, 5);
  EXPECT_EQ(Book(model, Engine::kHostToDevice, 0, 5).end_us, 10);
  // Other engines are free.
  EXPECT_EQ(Book(model, Engine::kDeviceToHost, 0, 5).end_us, 5);
  EXPECT_EQ(Book(model, Engine::kDeviceToDevice, 2, 5).end_us, 7);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 5).end_us, 5);
}

TEST_F(SimDeviceModelTest, WorkOfNoDurationBooksNothing) {
  SimDeviceModel model(&unpaced_, 32);
  EXPECT_EQ(Book(model, Engine::kKernels, 3, 0).end_us, 3);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 4).end_us, 4);
}

TEST_F(SimDeviceModelTest, TicketsBookInTheirOrder) {
  SimDeviceModel model(&unpaced_, 32);
  Ticket first(&model, Engine::kKernels, false, 0, 0);
  Ticket second(&model, Engine::kKernels, false, 0, 1);
  // The second arrives first: it parks until the first has booked.
  SimStream::Timing early =
      Book(model, Engine::kKernels, 0, 10, kFull, &second);
  EXPECT_TRUE(early.parked());
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull, &first).end_us, 10);
  SimStream::Timing again =
      Book(model, Engine::kKernels, 0, 10, kFull, &second);
  EXPECT_FALSE(again.parked());
  EXPECT_EQ(again.end_us, 20);
}

TEST_F(SimDeviceModelTest, ATicketGivenUpPassesItsTurn) {
  SimDeviceModel model(&unpaced_, 32);
  auto dropped =
      std::make_unique<Ticket>(&model, Engine::kKernels, false, 0, 0);
  Ticket next(&model, Engine::kKernels, false, 0, 1);
  EXPECT_TRUE(Book(model, Engine::kKernels, 0, 10, kFull, &next).parked());
  dropped.reset();  // its work never ran
  SimStream::Timing booked = Book(model, Engine::kKernels, 0, 10, kFull, &next);
  EXPECT_FALSE(booked.parked());
  EXPECT_EQ(booked.end_us, 10);
}

TEST_F(SimDeviceModelTest, EnqueueInTurnTakesTicketsOnlyForTimedWork) {
  SimStream stream("s", &unpaced_);
  SimDeviceModel unpaced(&unpaced_, 32);
  SimDeviceModel paced(&paced_, 32);
  auto nothing = [](SimStream::Timing&) { return absl::OkStatus(); };
  std::optional<Ticket> timed, untimed, on_paced;
  stream.Hold(1);  // the work must not run before the checks
  unpaced.EnqueueInTurn(stream, Engine::kKernels, 5, &timed, nothing);
  unpaced.EnqueueInTurn(stream, Engine::kKernels, 0, &untimed, nothing);
  paced.EnqueueInTurn(stream, Engine::kKernels, 5, &on_paced, nothing);
  EXPECT_TRUE(timed.has_value());
  EXPECT_FALSE(untimed.has_value());
  EXPECT_TRUE(on_paced.has_value());
  stream.Stop();
}

TEST_F(SimDeviceModelTest, PacedWorkBooksInTurnWithinItsScopeOnly) {
  SimStream first_job("a", &paced_);
  SimStream second_job("b", &paced_);
  first_job.SetScope(1);
  second_job.SetScope(2);
  SimDeviceModel model(&paced_, 32);
  auto nothing = [](SimStream::Timing&) { return absl::OkStatus(); };
  std::optional<Ticket> a1, b1, a2;
  first_job.Hold(1);  // the work must not run: the test books it
  second_job.Hold(1);
  model.EnqueueInTurn(first_job, Engine::kKernels, 10, &a1, nothing);
  model.EnqueueInTurn(second_job, Engine::kKernels, 10, &b1, nothing);
  model.EnqueueInTurn(first_job, Engine::kKernels, 10, &a2, nothing);
  // The first job's second kernel waits for its first; the other job's
  // does not wait for either.
  EXPECT_TRUE(Book(model, Engine::kKernels, 0, 10, kFull, &*a2).parked());
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull, &*b1).end_us, 10);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10, kFull, &*a1).end_us, 20);
  SimStream::Timing again = Book(model, Engine::kKernels, 0, 10, kFull, &*a2);
  EXPECT_FALSE(again.parked());
  EXPECT_EQ(again.end_us, 30);
  // A scope whose tickets have all booked starts again: a new ticket of
  // the first job books at once.
  std::optional<Ticket> a3;
  model.EnqueueInTurn(first_job, Engine::kKernels, 10, &a3, nothing);
  EXPECT_FALSE(Book(model, Engine::kKernels, 0, 10, kFull, &*a3).parked());
  first_job.Stop();
  second_job.Stop();
}

TEST_F(SimDeviceModelTest, InterruptedBookingGivesBackTheRest) {
  SimDeviceModel model(&paced_, 32);
  SimStream::Timing long_one = Book(model, Engine::kKernels, 0, 100);
  EXPECT_EQ(long_one.end_us, 100);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10).end_us, 110);
  // Stopped at 50: booked work keeps its time, and the gap is free.
  long_one.TakeInterruptHook()(50);
  EXPECT_EQ(Book(model, Engine::kKernels, 0, 10).end_us, 60);
}

TEST_F(SimDeviceModelTest, ClosedModelRefusesTurns) {
  SimDeviceModel model(&unpaced_, 32);
  Ticket ticket(&model, Engine::kKernels, false, 0, 0);
  model.Close();
  SimStream::Timing timing(0, &no_waker_);
  EXPECT_THAT(model.BookInTurn(Engine::kKernels, 10, kFull, &ticket, timing),
              StatusIs(absl::StatusCode::kAborted));
}

}  // namespace
}  // namespace weft::runtime
