// Event-id continuity: drops events nobody waits on (clearing their
// signal) and renumbers the rest densely from 0 in issue order of their
// signalling nodes; each node's waits are listed in ascending id order.
// Runs after every pass that inserts or deletes events.
#ifndef WEFT_SCHEDULER_PASSES_EVENT_ID_CONTINUITY_PASS_H_
#define WEFT_SCHEDULER_PASSES_EVENT_ID_CONTINUITY_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class EventIdContinuityPass final : public StreamPass {
 public:
  absl::string_view name() const override { return "event_id_continuity"; }
  // REQUIRES: events planned. INTERNAL otherwise, or for a wait on an
  // event no node signals.
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_EVENT_ID_CONTINUITY_PASS_H_
