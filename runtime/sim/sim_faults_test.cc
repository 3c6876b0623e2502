#include "runtime/sim/sim_faults.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

TEST(SimFaultsTest, NothingFailsWithoutFaults) {
  SimFaults faults(2);
  for (int i = 0; i < 10; ++i) EXPECT_OK(faults.Next(i % 2, "spin"));
}

TEST(SimFaultsTest, FailsTheNthLaunchOnItsDeviceCountedFromArming) {
  SimFaults faults(2);
  EXPECT_OK(faults.Next(1, "spin"));  // before arming: not counted
  ASSERT_OK(
      faults.Inject(SimLaunchFault{1, 2, absl::DataLossError("bad page")}));
  EXPECT_OK(faults.Next(0, "spin"));
  EXPECT_OK(faults.Next(1, "spin"));
  EXPECT_OK(faults.Next(0, "spin"));
  EXPECT_THAT(faults.Next(1, "add"),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("bad page (launch 3 on device 1, op 'add')")));
  EXPECT_OK(faults.Next(1, "add"));  // once
}

TEST(SimFaultsTest, AnyDeviceCountsEveryLaunch) {
  SimFaults faults(2);
  ASSERT_OK(faults.Inject(SimLaunchFault{-1, 3}));
  EXPECT_OK(faults.Next(0, "spin"));
  EXPECT_OK(faults.Next(1, "spin"));
  EXPECT_THAT(faults.Next(0, "fill"),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("(launch 3 overall on device 0, op 'fill')")));
}

TEST(SimFaultsTest, RejectsBadFaults) {
  SimFaults faults(2);
  EXPECT_THAT(faults.Inject(SimLaunchFault{2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("there are 2 devices")));
  EXPECT_THAT(faults.Inject(SimLaunchFault{0, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nth counts from 1")));
  EXPECT_THAT(faults.Inject(SimLaunchFault{0, 1, absl::OkStatus()}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be an error")));
}

}  // namespace
}  // namespace weft::runtime
