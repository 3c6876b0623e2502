#include "runtime/sim/sim_copy.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_device_model.h"
#include "runtime/sim/sim_memory.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using Engine = SimDeviceModel::Engine;
constexpr double kInf = std::numeric_limits<double>::infinity();

class SimCopiesTest : public ::testing::Test {
 protected:
  SimCopiesTest()
      : memory_({"gpu0", "gpu1"}, 1 << 20),
        model0_(&clock_, 32),
        model1_(&clock_, 32),
        // GB/s, source row by destination column, the host last: 1e3 bytes
        // per microsecond from the host, 2e3 to it, no link between the
        // devices, copies within a device instantaneous.
        copies_({kInf, 0, 2,  //
                 0, kInf, 2,  //
                 1, 1, 0},
                &memory_, {&model0_, &model1_}) {}

  SimClock clock_{0};
  SimMemory memory_;
  SimDeviceModel model0_;
  SimDeviceModel model1_;
  SimCopies copies_;
};

TEST_F(SimCopiesTest, DurationsComeFromTheBandwidthMatrix) {
  EXPECT_EQ(copies_.DurationUs(1000, 2, 0), 1);    // upload
  EXPECT_EQ(copies_.DurationUs(1000, 1, 2), 0.5);  // download
  EXPECT_EQ(copies_.DurationUs(1000, 0, 0), 0);    // within: instantaneous
  // No link: both legs through the host.
  EXPECT_EQ(copies_.DurationUs(1000, 0, 1), 1.5);
}

TEST(SimCopiesMatrixTest, ScalarsFillTheMatrixAndZeroIsInstantaneous) {
  absl::StatusOr<std::vector<double>> m =
      SimCopies::BandwidthMatrix(1, {}, 25, 20, 0);
  ASSERT_OK(m);
  // Rows and columns: device 0, then the host (a row of uploads).
  EXPECT_THAT(*m, ::testing::ElementsAre(kInf, 20, 25, 25));
}

TEST(SimCopiesMatrixTest, RejectsBadMatrices) {
  using ::testing::HasSubstr;
  using ::weft::testing::StatusIs;
  EXPECT_THAT(SimCopies::BandwidthMatrix(1, {}, std::nan(""), 1, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NaN")));
  EXPECT_THAT(SimCopies::BandwidthMatrix(1, {{1, 1}}, 1, 1, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must have num_devices + 1 = 2 rows")));
  EXPECT_THAT(SimCopies::BandwidthMatrix(1, {{1, -1}, {1, 1}}, 1, 1, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bandwidth_gbps[0][1] must be >= 0")));
  EXPECT_THAT(
      SimCopies::BandwidthMatrix(1, {{1, 0}, {1, 1}}, 1, 1, 1),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("device 0 needs a link to and from the host")));
  absl::StatusOr<std::vector<double>> given =
      SimCopies::BandwidthMatrix(1, {{kInf, 3}, {4, 0}}, 1, 1, 1);
  ASSERT_OK(given);
  EXPECT_THAT(*given, ::testing::ElementsAre(kInf, 3, 4, 0));
}

TEST_F(SimCopiesTest, EachCopyBooksTheEngineItRunsOn) {
  const DevicePtr on0{0, 1};
  const DevicePtr on1{1, 1};
  char host[4] = {};
  std::unique_ptr<SimCopyRecord> up = copies_.Upload(on1, host, 4, 4);
  EXPECT_EQ(up->model, &model1_);
  EXPECT_EQ(up->engine, Engine::kHostToDevice);
  std::unique_ptr<SimCopyRecord> down = copies_.Download(host, on0, 4);
  EXPECT_EQ(down->model, &model0_);
  EXPECT_EQ(down->engine, Engine::kDeviceToHost);
  std::unique_ptr<SimCopyRecord> peer = copies_.Copy(on1, on0, 4000);
  EXPECT_EQ(peer->model, &model1_);  // the destination's
  EXPECT_EQ(peer->engine, Engine::kDeviceToDevice);
  EXPECT_EQ(peer->duration, 6);
}

TEST_F(SimCopiesTest, MovesTheBytesAndTakesItsTime) {
  const DevicePtr a = memory_.Allocate(0, 4000).value();
  const DevicePtr b = memory_.Allocate(1, 4000).value();
  const std::string in(4000, 'w');
  std::string out(4000, '\0');
  SimStream stream("s", &clock_);
  copies_.Enqueue(stream, copies_.Upload(a, in.data(), 4000, 4000));  // 4 us
  copies_.Enqueue(stream, copies_.Copy(b, a, 4000));                  // 6 us
  copies_.Enqueue(stream, copies_.Download(out.data(), b, 4000));     // 2 us
  std::shared_ptr<SimStream::Mark> done = stream.Record();
  ASSERT_OK(stream.Synchronize());
  EXPECT_EQ(out, in);
  EXPECT_EQ(stream.MarkTime(*done), 12);
}

TEST_F(SimCopiesTest, MemoryWithoutContentsCopiesAsZeros) {
  const DevicePtr a = memory_.Allocate(0, 64).value();
  const DevicePtr b = memory_.Allocate(1, 64).value();
  std::string out(64, 'x');
  SimStream stream("s", &clock_);
  copies_.Enqueue(stream, copies_.Copy(b, a, 64));
  copies_.Enqueue(stream, copies_.Download(out.data(), b, 64));
  ASSERT_OK(stream.Synchronize());
  EXPECT_EQ(out, std::string(64, '\0'));
  EXPECT_EQ(memory_.materialized_bytes(0), 0u);
  EXPECT_EQ(memory_.materialized_bytes(1), 0u);
}

TEST_F(SimCopiesTest, ACopyToALostDeviceFails) {
  const DevicePtr a = memory_.Allocate(0, 64).value();
  model0_.health().Lose(absl::UnavailableError("gone"));
  std::string out(64, 'x');
  SimStream stream("s", &clock_);
  copies_.Enqueue(stream, copies_.Download(out.data(), a, 64));
  EXPECT_THAT(stream.Synchronize(),
              ::weft::testing::StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(out, std::string(64, 'x'));
}

}  // namespace
}  // namespace weft::runtime
