#include "scheduler/passes/event_id_continuity_pass.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status EventIdContinuityPass::Run(StreamContext& c) const {
  if (!c.events_planned) {
    return absl::InternalError("event ids renumbered before events exist");
  }
  // Which events someone waits on.
  std::vector<uint8_t> waited(c.num_events, 0);
  const uint32_t num_events = static_cast<uint32_t>(c.num_events);
  for (int32_t e : c.waits.items) {
    if (static_cast<uint32_t>(e) >= num_events) {
      return absl::InternalError(absl::StrCat("wait on unknown event ", e));
    }
    waited[e] = 1;
  }
  std::vector<int32_t> renumber(c.num_events, -1);
  int32_t next = 0;
  bool identity = true;  // every event keeps its id
  for (NodeId v : c.dag.order) {
    const int32_t e = c.signal[v];
    if (e < 0) continue;
    if (e >= c.num_events || renumber[e] >= 0) {
      return absl::InternalError(
          absl::StrCat("event ", e, " is signalled twice or unknown"));
    }
    if (!waited[e]) {
      c.signal[v] = -1;
      identity = false;
      continue;
    }
    identity = identity && e == next;
    renumber[e] = next++;
    c.signal[v] = renumber[e];
  }
  if (!identity || next != c.num_events) {
    for (int32_t& e : c.waits.items) {
      if (renumber[e] < 0) {
        return absl::InternalError(
            absl::StrCat("wait on event ", e, " that nothing signals"));
      }
      e = renumber[e];
    }
  }
  // Rows are short (insertion sort) and mostly sorted already.
  int32_t* items = c.waits.items.data();
  for (int r = 0; r < c.waits.rows(); ++r) {
    const int32_t begin = c.waits.offsets[r];
    const int32_t end = c.waits.offsets[r + 1];
    if (end - begin > 16) {
      std::sort(items + begin, items + end);
      continue;
    }
    for (int32_t k = begin + 1; k < end; ++k) {
      const int32_t e = items[k];
      int32_t j = k;
      for (; j > begin && items[j - 1] > e; --j) items[j] = items[j - 1];
      items[j] = e;
    }
  }
  c.num_events = next;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
