#include "scheduler/data_location.h"

#include "gtest/gtest.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;

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

}  // namespace
}  // namespace weft::scheduler
