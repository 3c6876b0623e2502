#include "scheduler/passes/event_id_continuity_pass.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status EventIdContinuityPass::Run(StreamContext& c) const {
  if (!c.events_planned) {
    return absl::InternalError("event ids renumbered before events exist");
  }
  std::vector<int32_t> waiters(c.num_events, 0);
  for (int32_t e : c.waits.items) {
    if (e < 0 || e >= c.num_events) {
      return absl::InternalError(absl::StrCat("wait on unknown event ", e));
    }
    ++waiters[e];
  }
  std::vector<int32_t> renumber(c.num_events, -1);
  int32_t next = 0;
  for (NodeId v : c.dag.order) {
    const int32_t e = c.signal[v];
    if (e < 0) continue;
    if (e >= c.num_events || renumber[e] >= 0) {
      return absl::InternalError(
          absl::StrCat("event ", e, " is signalled twice or unknown"));
    }
    if (waiters[e] == 0) {
      c.signal[v] = -1;
      continue;
    }
    renumber[e] = next++;
    c.signal[v] = renumber[e];
  }
  for (int32_t& e : c.waits.items) {
    if (renumber[e] < 0) {
      return absl::InternalError(
          absl::StrCat("wait on event ", e, " that nothing signals"));
    }
    e = renumber[e];
  }
  for (int r = 0; r < c.waits.rows(); ++r) {
    if (c.waits.offsets[r + 1] - c.waits.offsets[r] < 2) continue;
    std::sort(c.waits.items.begin() + c.waits.offsets[r],
              c.waits.items.begin() + c.waits.offsets[r + 1]);
  }
  c.num_events = next;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
