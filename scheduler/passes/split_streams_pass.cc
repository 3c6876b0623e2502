#include "scheduler/passes/split_streams_pass.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status SplitStreamsPass::Run(StreamContext& c) const {
  const int cap = c.options.max_nodes_per_stream;
  if (cap == 0) return absl::OkStatus();
  if (cap < kMinTasksPerStream) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_nodes_per_stream: must be 0 (no limit) or at least ",
        kMinTasksPerStream, ", got ", cap));
  }
  if (!c.events_planned) {
    return absl::InternalError("streams split before events are planned");
  }
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  auto tasks = [&](int32_t pos) {
    const NodeId v = c.dag.order[pos];
    return 1 + (c.waits.offsets[pos + 1] - c.waits.offsets[pos]) +
           (c.signal[v] >= 0 ? 1 : 0);
  };
  // Quick exit: no stream over the limit.
  std::vector<int64_t> load(num_streams, 0);
  bool over = false;
  for (int32_t i = 0; i < n; ++i) {
    int64_t& l = load[c.stream_of[c.dag.order[i]]];
    l += tasks(i);
    over = over || l > cap;
  }
  if (!over) return absl::OkStatus();

  // Issue positions of each stream's nodes.
  Csr members;
  members.offsets.assign(num_streams + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    ++members.offsets[c.stream_of[c.dag.order[i]] + 1];
  }
  for (int s = 0; s < num_streams; ++s) {
    members.offsets[s + 1] += members.offsets[s];
  }
  members.items.resize(n);
  {
    std::vector<int32_t> fill(members.offsets.begin(),
                              members.offsets.end() - 1);
    for (int32_t i = 0; i < n; ++i) {
      members.items[fill[c.stream_of[c.dag.order[i]]]++] = i;
    }
  }
  std::vector<NodeId> signaller(c.num_events, -1);
  for (NodeId v = 0; v < n; ++v) {
    if (c.signal[v] >= 0) signaller[c.signal[v]] = v;
  }
  // Does node at `pos` already know, through its waits, that `last` (on
  // its original stream `s`) finished?
  auto implied = [&](int32_t pos, NodeId last, int32_t s) {
    for (int32_t k = c.waits.offsets[pos]; k < c.waits.offsets[pos + 1];
         ++k) {
      const NodeId p = signaller[c.waits.items[k]];
      if (c.clocks.Known(c.clock_of[p], s) >= c.seq[last]) {
        return true;
      }
    }
    return false;
  };

  std::vector<std::pair<int32_t, int32_t>> links;  // (position, event)
  for (int s = 0; s < num_streams; ++s) {
    if (load[s] <= cap) continue;
    auto row = members.Row(s);
    int segment = s;
    int64_t count = 0;
    NodeId prev = -1;
    for (size_t k = 0; k < row.size(); ++k) {
      const int32_t pos = row[k];
      const NodeId x = c.dag.order[pos];
      int64_t t = tasks(pos);
      // Keep one task of room for a record continuing the stream, unless
      // this is the stream's last node.
      const int64_t limit = k + 1 == row.size() ? cap : cap - 1;
      if (prev >= 0 && count + t > limit) {
        const LogicalStream& from = c.streams[segment];
        const int next = c.NewStream(from.device, from.engine, from.kind,
                                     from.label);
        c.streams[next].split_from = segment;
        if (!implied(pos, prev, s)) {
          if (c.signal[prev] < 0) c.signal[prev] = c.num_events++;
          links.emplace_back(pos, c.signal[prev]);
          ++t;
        }
        segment = next;
        count = 0;
      }
      c.stream_of[x] = segment;
      count += t;
      prev = x;
    }
  }
  if (!links.empty()) {
    // Rebuild the waits with the links: rows without one are copied
    // whole, the others get the link and are sorted.
    std::sort(links.begin(), links.end());
    Csr waits;
    waits.offsets.resize(n + 1);
    waits.items.resize(c.waits.items.size() + links.size());
    int32_t out = 0;
    int32_t copied_from = 0;  // position from which rows are copied as is
    waits.offsets[0] = 0;
    auto copy_rows = [&](int32_t from, int32_t to) {
      // Rows [from, to) keep their contents, shifted by the links so far.
      const int32_t begin = c.waits.offsets[from];
      const int32_t end = c.waits.offsets[to];
      std::copy(c.waits.items.begin() + begin, c.waits.items.begin() + end,
                waits.items.begin() + out);
      const int32_t shift = out - begin;
      for (int32_t r = from; r < to; ++r) {
        waits.offsets[r + 1] = c.waits.offsets[r + 1] + shift;
      }
      out += end - begin;
    };
    for (size_t l = 0; l < links.size();) {
      const int32_t pos = links[l].first;
      copy_rows(copied_from, pos);
      auto row = c.waits.Row(pos);
      const int32_t row_start = out;
      std::copy(row.begin(), row.end(), waits.items.begin() + out);
      out += static_cast<int32_t>(row.size());
      for (; l < links.size() && links[l].first == pos; ++l) {
        waits.items[out++] = links[l].second;
      }
      std::sort(waits.items.begin() + row_start, waits.items.begin() + out);
      waits.offsets[pos + 1] = out;
      copied_from = pos + 1;
    }
    copy_rows(copied_from, n);
    c.waits = std::move(waits);
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
