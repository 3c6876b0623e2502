#include "scheduler/data_location.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::IsEmpty;

TEST(DataLocationsTest, ReadsAddAndWritesReplace) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("r0", "x:r").Node("r1", "x:r").Node("w2", "x:w y:r");
  m.Node("rw1", "y:rw x:r");
  Graph g = m.Build();
  DataLocations loc(g.num_buffers());
  const BufferId x = 0, y = 1;
  EXPECT_TRUE(loc.OnHost(x));
  EXPECT_FALSE(loc.OnSomeDevice(x));

  loc.Apply(g.Uses(0), 0);  // read on 0: {host, 0}
  EXPECT_EQ(loc.mask(x), DataLocations::kHostBit | 1);
  loc.Apply(g.Uses(1), 1);  // read on 1: {host, 0, 1}
  EXPECT_EQ(loc.mask(x), DataLocations::kHostBit | 3);
  EXPECT_TRUE(loc.OnDevice(x, 1));
  loc.Apply(g.Uses(2), 2);  // write on 2: {2}; y read there
  EXPECT_EQ(loc.mask(x), DataLocations::Mask{4});
  EXPECT_FALSE(loc.OnHost(x));
  EXPECT_EQ(loc.mask(y), DataLocations::kHostBit | 4);
  loc.Apply(g.Uses(3), 1);  // y read-write on 1: {1}; x gains 1
  EXPECT_EQ(loc.mask(y), DataLocations::Mask{2});
  EXPECT_EQ(loc.mask(x), DataLocations::Mask{6});
}

TEST(DataLocationsTest, ReadAndWriteOfOneBufferInEitherOrderWrites) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:w x:r").Node("b", "x:r x:w");
  Graph g = m.Build();
  DataLocations loc(1);
  loc.Apply(g.Uses(0), 3);
  EXPECT_EQ(loc.mask(0), DataLocations::Mask{8});
  loc.Apply(g.Uses(1), 62);
  EXPECT_EQ(loc.mask(0), DataLocations::Mask{1} << 62);
}

TEST(CopySourceDevicesTest, CopiesFromTheDeviceHoldingMostOfTheirInput) {
  GraphMaker m;
  m.Buffer("big", 4096).Buffer("small", 64).Buffer("out", 8192);
  m.Buffer("host", 64);
  m.Node("wb", "big:w").Node("ws", "small:w");
  m.Node("cp", "big:r small:r out:w", {.engine = Engine::kCopy});
  m.Node("local", "out:r host:w", {.engine = Engine::kCopy});
  m.Node("back", "host:r", {.engine = Engine::kCopy});
  m.Node("compute", "out:r");
  Graph g = m.Build();
  const std::vector<NodeId> order = {0, 1, 2, 3, 4, 5};
  // big written on 2, small on 1; cp runs on 0: big's 4096 bytes win.
  // local reads out on 0, where cp wrote it: no source; back reads on 1
  // what local wrote on 0. compute is no copy.
  std::vector<int> device = {2, 1, 0, 0, 1, 3};
  EXPECT_THAT(CopySourceDevices(g, order, device),
              ElementsAre(-1, -1, 2, -1, 0, -1));
  // Everything on one device: no copies between devices at all.
  device.assign(6, 0);
  EXPECT_THAT(CopySourceDevices(g, order, device), IsEmpty());
  // Equal bytes: the lower device.
  GraphMaker m2;
  m2.Buffer("a", 64).Buffer("b", 64).Buffer("c", 64);
  m2.Node("wa", "a:w").Node("wb", "b:w");
  m2.Node("cp", "b:r a:r c:w", {.engine = Engine::kCopy});
  Graph g2 = m2.Build();
  EXPECT_THAT(CopySourceDevices(g2, {0, 1, 2}, {3, 1, 0}),
              ElementsAre(-1, -1, 1));
}

TEST(CopySourceDevicesTest, InputOnlyOnTheHostHasNoSource) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("r", "y:r");
  Graph g = m.Build();
  EXPECT_THAT(CopySourceDevices(g, {0, 1}, {1, 0}), IsEmpty());
}

}  // namespace
}  // namespace weft::scheduler
