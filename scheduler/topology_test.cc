#include "scheduler/topology.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

// Two devices; the device pair is measured differently in each direction
// and a third device's rows must be dropped.
constexpr char kTwoDevices[] =
    "From,To,Bandwidth\n"
    "0,0,30.6\n"
    "0,1,40\n"
    "1,0,50.9\n"
    "1,1,60\n"
    "-1,0,10.2\n"
    "-1,1,20.7\n"
    "2,0,99\n"
    "0,2,99\n";

TEST(TopologyTest, ReadsGrcudaCsvLikeGrcuda) {
  absl::StatusOr<Topology> t = Topology::FromCsv(kTwoDevices, 2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_devices(), 2);
  // Floored, device pairs averaged (40 and 50 -> 45), host links both ways.
  EXPECT_THAT(t->Matrix(),
              ElementsAre(ElementsAre(30, 45, 10), ElementsAre(45, 60, 20),
                          ElementsAre(10, 20, 0)));
  EXPECT_EQ(t->gbps(Topology::kHost, 1), 20);
  EXPECT_EQ(t->gbps(1, Topology::kHost), 20);
}

TEST(TopologyTest, FewerDevicesDropRows) {
  absl::StatusOr<Topology> t = Topology::FromCsv(kTwoDevices, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->Matrix(),
              ElementsAre(ElementsAre(30, 10), ElementsAre(10, 0)));
}

TEST(TopologyTest, MissingHostLinkIsAnError) {
  absl::StatusOr<Topology> t = Topology::FromCsv(kTwoDevices, 3);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device 2 has no link to and from the host")));
}

TEST(TopologyTest, MalformedRowNamesTheLine) {
  absl::StatusOr<Topology> t =
      Topology::FromCsv("From,To,GB/s\n-1,0,12\n0;1;3\n", 1);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("topology line 3: expected `From,To,GB/s`")));
  t = Topology::FromCsv("-1,0,-4\n", 1);
  EXPECT_THAT(t.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("line 1")));
}

TEST(TopologyTest, HeaderIsOptional) {
  absl::StatusOr<Topology> t = Topology::FromCsv("-1,0,12\n", 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->gbps(0, Topology::kHost), 12);
}

TEST(TopologyTest, DefaultMatchesTheSimulatedMachine) {
  Topology t = Topology::Default(3);
  EXPECT_EQ(t.num_devices(), 3);
  EXPECT_EQ(t.gbps(Topology::kHost, 2), Topology::kDefaultHostGbps);
  EXPECT_EQ(t.gbps(0, Topology::kHost), Topology::kDefaultHostGbps);
  EXPECT_EQ(t.gbps(0, 2), Topology::kDefaultPeerGbps);
  // 25 GB/s = 25000 bytes per microsecond.
  EXPECT_THAT(t.TransferUs(50000, Topology::kHost, 1), DoubleEq(2.0));
  EXPECT_EQ(t.TransferUs(50000, 1, 1), 0);
}

TEST(TopologyTest, TransfersWithoutADirectLinkGoThroughTheHost) {
  absl::StatusOr<Topology> t =
      Topology::FromMatrix({{0, 0, 10}, {0, 0, 20}, {10, 20, 0}});
  ASSERT_TRUE(t.ok()) << t.status();
  // 1e6 bytes: 100 us up to the host at 10 GB/s, 50 us down at 20 GB/s.
  EXPECT_THAT(t->TransferUs(1000000, 0, 1), DoubleEq(150.0));
}

TEST(TopologyTest, FromMatrixValidates) {
  absl::StatusOr<Topology> t = Topology::FromMatrix({{1, 2}, {3}});
  EXPECT_THAT(t.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("row 1 has 1")));
  t = Topology::FromMatrix({{1}});
  EXPECT_THAT(t.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Topology::FromMatrix({{1, -2}, {3, 0}});
  EXPECT_THAT(t.status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is -2")));
}

TEST(TopologyTest, LoadsAFile) {
  const std::string path =
      std::string(::testing::TempDir()) + "/topology_test.csv";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kTwoDevices, f);
  std::fclose(f);
  absl::StatusOr<Topology> t = Topology::LoadCsvFile(path, 2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->gbps(0, 1), 45);
  t = Topology::LoadCsvFile(path + ".missing", 2);
  EXPECT_THAT(t.status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(".missing")));
}

}  // namespace
}  // namespace weft::scheduler
