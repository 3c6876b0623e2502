// The conversion boundary between the job manager's values (job_info.h)
// and the weft.v1 wire messages. Only the service uses it.
#ifndef WEFT_SERVER_JOB_PROTO_H_
#define WEFT_SERVER_JOB_PROTO_H_

#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "server/job_info.h"
#include "server/job_state.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

weft::v1::JobState JobStateToProto(JobState state);
// INVALID_ARGUMENT (naming `state`) for JOB_STATE_UNSPECIFIED and unknown
// values.
absl::StatusOr<JobState> JobStateFromProto(weft::v1::JobState state);

weft::v1::Job JobToProto(const JobInfo& job);
weft::v1::DType DTypeToProto(scheduler::DType dtype);
weft::v1::NodeEvent NodeEventToProto(const NodeEventInfo& event);

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_PROTO_H_
