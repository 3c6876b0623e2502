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
  // Every signalled event gets its place in issue order of its signaller,
  // which is its new id if all of them are waited on (as they usually
  // are); the waits are renumbered to places in one walk that also marks
  // the places waited on. Only if some event is not waited on are the
  // places numbered again without it: a monotone map, which keeps rows
  // sorted.
  if (c.num_events < 0) {
    return absl::InternalError(
        absl::StrCat("negative event count ", c.num_events));
  }
  const int32_t num_events = c.num_events;
  // By event; one more entry absorbs the stores of nodes without a signal.
  std::vector<int32_t> place(num_events + 1, -1);
  int32_t* signal = c.signal.data();
  int32_t next = 0;
  // Without a branch per node: a bad signal is only noted (the first), and
  // reported after the walk.
  bool bad = false;
  int32_t bad_event = -1;
  for (NodeId v : c.dag.order) {
    const int32_t e = signal[v];
    const bool signals = e >= 0;
    const bool known =
        static_cast<uint32_t>(e) < static_cast<uint32_t>(num_events);
    const int32_t at = known ? e : num_events;
    const bool wrong = signals & (!known | (place[at] >= 0));
    bad_event = (wrong & !bad) ? e : bad_event;
    bad |= wrong;
    place[at] = next;
    signal[v] = signals ? next : -1;
    next += signals;
  }
  if (bad) {
    return absl::InternalError(
        absl::StrCat("event ", bad_event, " is signalled twice or unknown"));
  }
  place[num_events] = -1;
  // By place, and one more for waits on bad events.
  std::vector<uint8_t> waited(next + 1, 0);
  int32_t num_waited = 0;
  for (int32_t& e : c.waits.items) {
    const bool known =
        static_cast<uint32_t>(e) < static_cast<uint32_t>(num_events);
    const int32_t p = place[known ? e : num_events];
    const bool wrong = p < 0;
    bad_event = (wrong & !bad) ? e : bad_event;
    bad |= wrong;
    const int32_t at = wrong ? next : p;
    num_waited += waited[at] == 0;
    waited[at] = 1;
    e = p;
  }
  if (bad) {
    return absl::InternalError(
        static_cast<uint32_t>(bad_event) >= static_cast<uint32_t>(num_events)
            ? absl::StrCat("wait on unknown event ", bad_event)
            : absl::StrCat("wait on event ", bad_event,
                           " that nothing signals"));
  }
  // Rows of two or more items are sorted; they are short (insertion
  // sort). They are listed first, a block of rows at a time, without a
  // branch per row.
  int32_t* items = c.waits.items.data();
  const int32_t* offsets = c.waits.offsets.data();
  const int rows = c.waits.rows();
  constexpr int kBlock = 1024;
  int32_t long_rows[kBlock];
  for (int block = 0; block < rows; block += kBlock) {
    const int block_end = std::min(rows, block + kBlock);
    int num_long = 0;
    for (int r = block; r < block_end; ++r) {
      long_rows[num_long] = r;
      num_long += offsets[r + 1] - offsets[r] >= 2;
    }
    for (int j = 0; j < num_long; ++j) {
      const int32_t begin = offsets[long_rows[j]];
      const int32_t end = offsets[long_rows[j] + 1];
      if (end - begin > 16) {
        std::sort(items + begin, items + end);
        continue;
      }
      for (int32_t k = begin + 1; k < end; ++k) {
        const int32_t e = items[k];
        int32_t i = k;
        for (; i > begin && items[i - 1] > e; --i) items[i] = items[i - 1];
        items[i] = e;
      }
    }
  }
  if (num_waited < next) {
    // Drop the events nobody waits on.
    std::vector<int32_t> final_id(next, -1);
    int32_t kept = 0;
    for (int32_t p = 0; p < next; ++p) final_id[p] = waited[p] ? kept++ : -1;
    for (NodeId v : c.dag.order) {
      if (signal[v] >= 0) signal[v] = final_id[signal[v]];
    }
    for (int32_t& e : c.waits.items) e = final_id[e];
    next = kept;
  }
  c.num_events = next;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
