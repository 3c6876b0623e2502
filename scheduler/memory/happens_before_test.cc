#include "scheduler/memory/happens_before.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::scheduler::memory {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

// Streams 0..num_streams-1, stream s on device devices[s].
Plan Streams(std::vector<int> devices, int num_events) {
  Plan plan;
  for (size_t s = 0; s < devices.size(); ++s) {
    plan.streams.push_back(
        {static_cast<int>(s), devices[s], "", Engine::kCompute});
  }
  plan.num_events = num_events;
  plan.num_devices = 2;
  return plan;
}

void Add(Plan& plan, int stream, int signal, std::vector<int32_t> waits,
         int peer = -1) {
  PlannedNode pn;
  pn.node = plan.num_nodes();
  pn.device = plan.streams[stream].device;
  pn.stream = stream;
  pn.signal_event = signal;
  pn.peer_stream = peer;
  plan.AddNode(pn, {}, waits);
}

TEST(HappensBeforeTest, StreamOrderAndEventWaits) {
  Plan plan = Streams({0, 0}, 1);
  Add(plan, 0, 0, {});    // 0: a, records e0
  Add(plan, 1, -1, {});   // 1: b
  Add(plan, 1, -1, {0});  // 2: c waits e0
  Add(plan, 0, -1, {});   // 3: d
  absl::StatusOr<HappensBefore> built = HappensBefore::Build(plan, {0}, {});
  ASSERT_OK(built);
  const HappensBefore& hb = *built;
  EXPECT_FALSE(hb.Before(hb.point(0), 0));
  EXPECT_FALSE(hb.Before(hb.point(0), 1));
  EXPECT_TRUE(hb.Before(hb.point(0), 2));
  EXPECT_TRUE(hb.Before(hb.point(1), 2));
  EXPECT_TRUE(hb.Before(hb.point(0), 3));
  EXPECT_FALSE(hb.Before(hb.point(1), 3));
  EXPECT_FALSE(hb.Before(hb.point(2), 3));
  EXPECT_FALSE(hb.Before(hb.point(3), 2));
  EXPECT_EQ(hb.point(2), (Point{1, 2}));
}

TEST(HappensBeforeTest, KnowledgePassesThroughThirdStreams) {
  Plan plan = Streams({0, 0, 0}, 2);
  Add(plan, 0, 0, {});    // 0: records e0
  Add(plan, 1, 1, {0});   // 1: waits e0, records e1
  Add(plan, 2, -1, {1});  // 2: waits e1, so knows 0 too
  absl::StatusOr<HappensBefore> built = HappensBefore::Build(plan, {0}, {});
  ASSERT_OK(built);
  const HappensBefore& hb = *built;
  EXPECT_TRUE(hb.Before(hb.point(0), 2));
  EXPECT_TRUE(hb.Before(hb.point(1), 2));
}

TEST(HappensBeforeTest, PeerCopyJoinsBothStreams) {
  Plan plan = Streams({0, 1}, 0);
  Add(plan, 0, -1, {});     // 0: a on device 0
  Add(plan, 1, -1, {});     // 1: b on device 1
  Add(plan, 1, -1, {}, 0);  // 2: copy on stream 1, peer stream 0
  Add(plan, 0, -1, {});     // 3: d after the copy on stream 0
  Add(plan, 1, -1, {});     // 4: e
  absl::StatusOr<HappensBefore> built = HappensBefore::Build(plan, {0, 0}, {});
  ASSERT_OK(built);
  const HappensBefore& hb = *built;
  EXPECT_TRUE(hb.Before(hb.point(0), 2));
  EXPECT_TRUE(hb.Before(hb.point(2), 3));
  EXPECT_TRUE(hb.Before(hb.point(1), 3));
  EXPECT_TRUE(hb.Before(hb.point(0), 4));
  EXPECT_FALSE(hb.Before(hb.point(3), 4));
  EXPECT_FALSE(hb.Before(hb.point(4), 3));
}

TEST(HappensBeforeTest, UploadsInFifoOrder) {
  Plan plan = Streams({0, 0}, 0);
  Add(plan, 0, -1, {});
  Add(plan, 1, -1, {});
  Add(plan, 1, -1, {});
  const std::vector<UploadWait> waits = {{1, 0, 2}};
  absl::StatusOr<HappensBefore> built =
      HappensBefore::Build(plan, {2, 0}, waits);
  ASSERT_OK(built);
  const HappensBefore& hb = *built;
  EXPECT_FALSE(hb.Before(hb.upload(0, 1), 0));
  EXPECT_TRUE(hb.Before(hb.upload(0, 1), 1));
  EXPECT_TRUE(hb.Before(hb.upload(0, 2), 1));
  EXPECT_TRUE(hb.Before(hb.upload(0, 2), 2));
  EXPECT_EQ(hb.num_streams(), 4);
}

TEST(HappensBeforeTest, RejectsAWaitOnAnEventNotYetRecorded) {
  Plan plan = Streams({0, 0}, 1);
  Add(plan, 1, -1, {0});
  Add(plan, 0, 0, {});
  EXPECT_THAT(HappensBefore::Build(plan, {0}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("plan.nodes[0].waits: event 0")));
}

TEST(HappensBeforeTest, RejectsAStreamOutOfRange) {
  Plan plan = Streams({0}, 0);
  Add(plan, 0, -1, {});
  plan.nodes[0].stream = 3;
  EXPECT_THAT(HappensBefore::Build(plan, {0}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("plan.nodes[0].stream")));
}

}  // namespace
}  // namespace weft::scheduler::memory
