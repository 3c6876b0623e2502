#include "server/job_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::weft::testing::StatusIs;

TEST(JobProtoTest, JobStatesRoundTrip) {
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
        JobState::kFailed, JobState::kCancelled}) {
    absl::StatusOr<JobState> back = JobStateFromProto(JobStateToProto(state));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, state);
  }
  EXPECT_THAT(JobStateFromProto(weft::v1::JOB_STATE_UNSPECIFIED),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(JobStateFromProto(static_cast<weft::v1::JobState>(42)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JobProtoTest, JobCarriesEveryField) {
  JobInfo info;
  info.id = "j-1";
  info.graph_name = "g";
  info.state = JobState::kFailed;
  info.error = absl::InternalError("boom");
  info.failed_node = "n3";
  info.nodes_done = 2;
  info.nodes_total = 5;
  info.priority = 7;
  info.request_id = "r";
  info.tenant = "t";
  info.create_time = absl::FromUnixNanos(1'700'000'000'123'456'789);
  info.start_time = absl::FromUnixSeconds(1'700'000'001);
  info.output_buffers = {"y", "z"};
  info.device_memory_bytes = {0, 4096};
  const weft::v1::Job job = JobToProto(info);
  EXPECT_EQ(job.id(), "j-1");
  EXPECT_EQ(job.graph_name(), "g");
  EXPECT_EQ(job.state(), weft::v1::FAILED);
  EXPECT_EQ(job.error().code(), static_cast<int>(absl::StatusCode::kInternal));
  EXPECT_EQ(job.error().message(), "boom");
  EXPECT_EQ(job.error().node(), "n3");
  EXPECT_EQ(job.nodes_done(), 2);
  EXPECT_EQ(job.nodes_total(), 5);
  EXPECT_EQ(job.priority(), 7);
  EXPECT_EQ(job.request_id(), "r");
  EXPECT_EQ(job.tenant(), "t");
  EXPECT_EQ(job.create_time().seconds(), 1'700'000'000);
  EXPECT_EQ(job.create_time().nanos(), 123'456'789);
  EXPECT_EQ(job.start_time().seconds(), 1'700'000'001);
  EXPECT_FALSE(job.has_end_time());
  EXPECT_THAT(job.output_buffers(), ::testing::ElementsAre("y", "z"));
  EXPECT_THAT(job.device_memory_bytes(), ::testing::ElementsAre(0, 4096));
  EXPECT_FALSE(JobToProto(JobInfo()).has_error());
}

TEST(JobProtoTest, NodeEvents) {
  NodeEventInfo info;
  info.node = "n";
  info.kind = runtime::NodeEventKind::kFailed;
  info.device = 1;
  info.stream = 4;
  info.time = absl::FromUnixSeconds(-1) + absl::Nanoseconds(1);
  info.message = "why";
  const weft::v1::NodeEvent event = NodeEventToProto(info);
  EXPECT_EQ(event.node(), "n");
  EXPECT_EQ(event.kind(), weft::v1::NODE_FAILED);
  EXPECT_EQ(event.device(), 1);
  EXPECT_EQ(event.stream(), 4);
  // Timestamps before the epoch keep nanos in [0, 1e9).
  EXPECT_EQ(event.time().seconds(), -1);
  EXPECT_EQ(event.time().nanos(), 1);
  EXPECT_EQ(event.message(), "why");
}

TEST(JobProtoTest, ControlEvents) {
  NodeEventInfo info;
  info.node = "loop";
  info.control = runtime::ControlEventKind::kIteration;
  info.value = 37;
  weft::v1::NodeEvent event = NodeEventToProto(info);
  EXPECT_EQ(event.kind(), weft::v1::NODE_ITERATION);
  EXPECT_EQ(event.iteration(), 37);
  info.control = runtime::ControlEventKind::kBranch;
  info.value = -1;
  info.message = "selector 5 picks none of 2 branches";
  event = NodeEventToProto(info);
  EXPECT_EQ(event.kind(), weft::v1::NODE_BRANCH);
  EXPECT_EQ(event.branch(), -1);
  EXPECT_EQ(event.message(), "selector 5 picks none of 2 branches");
}

}  // namespace
}  // namespace weft::server
