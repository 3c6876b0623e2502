#include "scheduler/passes/split_streams_pass.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

namespace {

// Adds a wait on event `second` to the node at issue position `first` for
// each link, keeping every row sorted. In place, from the end: rows before
// the first link stay where they are, and the rows between two links move
// together.
void AddLinks(StreamContext& c,
              std::vector<std::pair<int32_t, int32_t>>& links) {
  if (links.empty()) return;
  std::sort(links.begin(), links.end());
  std::vector<int32_t>& items_vector = c.waits.items;
  items_vector.resize(items_vector.size() + links.size());
  int32_t* items = items_vector.data();
  int32_t* offsets = c.waits.offsets.data();
  const int32_t rows = c.waits.rows();
  // Items first, by the offsets as they were: each link's row, and the
  // rows between it and the next link's, move by the links up to it.
  int32_t above = rows;  // the row of the link before, from the end
  int32_t shift = static_cast<int32_t>(links.size());
  for (int64_t l = static_cast<int64_t>(links.size()) - 1; l >= 0;) {
    const int32_t r = links[l].first;
    int32_t added = 0;
    for (; l >= 0 && links[l].first == r; --l) ++added;
    const int32_t end = offsets[r + 1];
    std::memmove(items + end + shift, items + end,
                 static_cast<size_t>(offsets[above] - end) * sizeof(int32_t));
    shift -= added;
    const int32_t begin = offsets[r];
    std::memmove(items + begin + shift, items + begin,
                 static_cast<size_t>(end - begin) * sizeof(int32_t));
    for (int32_t k = 0; k < added; ++k) {
      items[end + shift + k] = links[l + 1 + k].second;
    }
    std::sort(items + begin + shift, items + end + shift + added);
    above = r;
  }
  // Then the offsets after the first link's row.
  size_t l = 0;
  for (int32_t r = links[0].first; r < rows; ++r) {
    while (l < links.size() && links[l].first == r) ++l;
    offsets[r + 1] += static_cast<int32_t>(l);
  }
}

// Splitting when no node has a peer stream: every node is on one stream,
// so one walk in issue order, with a counter per stream, decides every
// split; the parts get their ids and the links their events afterwards, in
// the order of the rules (stream by stream, each in issue order), and a
// second walk, only if something split, moves the nodes to their parts.
absl::Status SplitWithoutPeers(StreamContext& c, int cap) {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  // Raw pointers in locals: the walk below stores into vectors of the same
  // element type, after which members would be reloaded.
  const NodeId* order = c.dag.order.data();
  const int32_t* stream_of = c.stream_of.data();
  const int32_t* signal = c.signal.data();
  const int32_t* offsets = c.waits.offsets.data();
  const int32_t* items = c.waits.items.data();
  // Each stream's last node, which may fill it to the limit: found from
  // the end, where every stream usually ends.
  std::vector<int32_t> last(num_streams, -1);
  int missing = num_streams;
  for (int32_t i = n - 1; i >= 0 && missing > 0; --i) {
    int32_t& l = last[stream_of[order[i]]];
    if (l < 0) {
      l = i;
      --missing;
    }
  }
  // The node signalling each event, built only if some wait's event is
  // not signalled by one of the waiting node's predecessors (where the
  // events of insert_events_pass.h come from).
  std::vector<NodeId> signaller;
  auto signaller_of = [&](NodeId v, int32_t e) {
    if (signaller.empty()) {
      for (NodeId p : c.dag.Preds(v)) {
        if (signal[p] == e) return p;
      }
      signaller.assign(c.num_events, -1);
      for (NodeId u = 0; u < n; ++u) {
        if (signal[u] >= 0) signaller[signal[u]] = u;
      }
    }
    return signaller[e];
  };
  // Does the node at `pos` know, through its waits, that `prev` (on its
  // stream s) finished?
  auto implied = [&](int32_t pos, NodeId prev, int32_t s) {
    const int32_t need = c.seq[prev];
    for (int32_t k = offsets[pos]; k < offsets[pos + 1]; ++k) {
      const NodeId u = signaller_of(order[pos], items[k]);
      if (c.clocks.Known(c.clock_of[u], s) >= need) return true;
    }
    return false;
  };
  struct Split {
    int32_t stream;
    int32_t pos;   // the first node of the new part
    NodeId prev;   // the node before it on the stream
    bool link;     // the new part waits for `prev`
    int32_t part;  // the new part's stream id
  };
  std::vector<Split> splits;
  std::vector<int64_t> count_vector(num_streams, 0);
  std::vector<NodeId> prev_vector(num_streams, -1);
  int64_t* count = count_vector.data();
  NodeId* prev = prev_vector.data();
  const int32_t* last_pos = last.data();
  for (int32_t i = 0; i < n; ++i) {
    const NodeId v = order[i];
    const int32_t s = stream_of[v];
    int64_t t = 1 + (offsets[i + 1] - offsets[i]) + (signal[v] >= 0);
    // Keep one task of room for a record continuing the stream, unless
    // this is the stream's last node (looked at only when it matters).
    if (const int64_t total = count[s] + t;
        total >= cap && (total > cap || i != last_pos[s]) && prev[s] >= 0) {
      const bool link = !implied(i, prev[s], s);
      splits.push_back({s, i, prev[s], link, -1});
      t += link;
      count[s] = 0;
    }
    count[s] += t;
    prev[s] = v;
  }
  if (splits.empty()) return absl::OkStatus();

  std::stable_sort(
      splits.begin(), splits.end(),
      [](const Split& a, const Split& b) { return a.stream < b.stream; });
  std::vector<std::pair<int32_t, int32_t>> links;    // (position, event)
  std::vector<int32_t> next_split(num_streams, -1);  // index into splits
  int32_t first_pos = n;
  for (size_t k = 0; k < splits.size(); ++k) {
    Split& split = splits[k];
    const bool first = k == 0 || splits[k - 1].stream != split.stream;
    if (first) next_split[split.stream] = static_cast<int32_t>(k);
    const int segment = first ? split.stream : splits[k - 1].part;
    const LogicalStream& from = c.streams[segment];
    split.part = c.NewStream(from.device, from.engine, from.kind, from.label);
    c.streams[split.part].split_from = segment;
    if (split.link) {
      if (c.signal[split.prev] < 0) c.signal[split.prev] = c.num_events++;
      links.emplace_back(split.pos, c.signal[split.prev]);
    }
    first_pos = std::min(first_pos, split.pos);
  }
  // Move each node after a split to its part: the position of each
  // stream's next split (n: none) and its current part.
  std::vector<int32_t> part_vector(num_streams);
  std::vector<int32_t> next_pos_vector(num_streams, n);
  for (int s = 0; s < num_streams; ++s) {
    part_vector[s] = s;
    if (next_split[s] >= 0) next_pos_vector[s] = splits[next_split[s]].pos;
  }
  int32_t* part = part_vector.data();
  int32_t* next_pos = next_pos_vector.data();
  int32_t* new_stream_of = c.stream_of.data();
  for (int32_t i = first_pos; i < n; ++i) {
    const NodeId v = order[i];
    const int32_t s = new_stream_of[v];
    if (next_pos[s] == i) {
      int32_t& k = next_split[s];
      part[s] = splits[k].part;
      ++k;
      next_pos[s] =
          k < static_cast<int32_t>(splits.size()) && splits[k].stream == s
              ? splits[k].pos
              : n;
    }
    new_stream_of[v] = part[s];
  }
  AddLinks(c, links);
  return absl::OkStatus();
}

}  // namespace

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
  if (c.peer_stream.empty()) return SplitWithoutPeers(c, cap);
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  // Tasks of the node at `pos` on its stream, or on its peer stream
  // (`peer`). A node with a peer also waits for and records the event
  // joining its two streams on each; and since splitting either of its
  // streams may add a continuing wait (one per stream), or a record for
  // the next part, on its own stream, room for them is kept there from
  // the start.
  auto tasks = [&](int32_t pos, bool peer) -> int64_t {
    const NodeId v = c.dag.order[pos];
    if (peer) return 3;
    const int64_t waits = c.waits.offsets[pos + 1] - c.waits.offsets[pos];
    if (c.peer_of(v) >= 0) return 1 + waits + 1 + 2 + 2;
    return 1 + waits + (c.signal[v] >= 0 ? 1 : 0);
  };
  // Quick exit: no stream over the limit.
  std::vector<int64_t> load(num_streams, 0);
  bool over = false;
  int64_t num_peers = 0;
  for (int32_t i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    int64_t& l = load[c.stream_of[v]];
    l += tasks(i, false);
    over = over || l > cap;
    if (const int32_t t = c.peer_of(v); t >= 0) {
      load[t] += tasks(i, true);
      over = over || load[t] > cap;
      ++num_peers;
    }
  }
  if (!over) return absl::OkStatus();

  // Issue positions of each stream's nodes, peer memberships included.
  // With peers, the streams as planned and, for each node with a peer,
  // the node before it on each of its two streams.
  const std::vector<int32_t> planned_stream =
      num_peers > 0 ? c.stream_of : std::vector<int32_t>();
  const std::vector<int32_t> planned_peer =
      num_peers > 0 ? c.peer_stream : std::vector<int32_t>();
  std::vector<NodeId> before_on_stream, before_on_peer;
  if (num_peers > 0) {
    before_on_stream.assign(n, -1);
    before_on_peer.assign(n, -1);
    std::vector<NodeId> last(num_streams, -1);
    for (NodeId v : c.dag.order) {
      const int32_t t = c.peer_of(v);
      if (t >= 0) {
        before_on_stream[v] = last[c.stream_of[v]];
        before_on_peer[v] = last[t];
        last[t] = v;
      }
      last[c.stream_of[v]] = v;
    }
  }
  Csr members;
  members.offsets.assign(num_streams + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    ++members.offsets[c.stream_of[v] + 1];
    if (const int32_t t = c.peer_of(v); t >= 0) ++members.offsets[t + 1];
  }
  for (int s = 0; s < num_streams; ++s) {
    members.offsets[s + 1] += members.offsets[s];
  }
  members.items.resize(n + num_peers);
  {
    std::vector<int32_t> fill(members.offsets.begin(),
                              members.offsets.end() - 1);
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = c.dag.order[i];
      members.items[fill[c.stream_of[v]]++] = i;
      if (const int32_t t = c.peer_of(v); t >= 0) members.items[fill[t]++] = i;
    }
  }
  // v's sequence number on stream s as planned (one of its streams).
  auto seq_on = [&](NodeId v, int32_t s) {
    return planned_stream.empty() || planned_stream[v] == s ? c.seq[v]
                                                            : c.peer_seq[v];
  };
  std::vector<NodeId> signaller(c.num_events, -1);
  for (NodeId v = 0; v < n; ++v) {
    if (c.signal[v] >= 0) signaller[c.signal[v]] = v;
  }
  // Does what u knew when it finished cover `need` on planned stream s?
  auto knows = [&](NodeId u, int32_t s, int32_t need) {
    int32_t known = c.clocks.Known(c.clock_of[u], s);
    if (!planned_stream.empty()) {
      if (planned_stream[u] == s) known = std::max(known, c.seq[u]);
      if (planned_peer[u] == s) known = std::max(known, c.peer_seq[u]);
    }
    return known >= need;
  };
  // Does node at `pos` already know, through its waits, that `last` (on
  // its original stream `s`) finished?
  auto implied = [&](int32_t pos, NodeId last, int32_t s) {
    const int32_t need = seq_on(last, s);
    for (int32_t k = c.waits.offsets[pos]; k < c.waits.offsets[pos + 1]; ++k) {
      if (knows(signaller[c.waits.items[k]], s, need)) return true;
    }
    return false;
  };
  // Parts that start at a node with a peer, decided once every stream is
  // split: (position, node before it, planned stream).
  struct Start {
    int32_t pos;
    NodeId prev;
    int32_t stream;
  };
  std::vector<Start> peer_starts;
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
      const bool as_peer = !planned_peer.empty() && planned_peer[x] == s;
      int64_t t = tasks(pos, as_peer);
      // Keep one task of room for a record continuing the stream, unless
      // this is the stream's last node.
      const int64_t limit = k + 1 == row.size() ? cap : cap - 1;
      if (prev >= 0 && count + t > limit) {
        const LogicalStream& from = c.streams[segment];
        const int next =
            c.NewStream(from.device, from.engine, from.kind, from.label);
        c.streams[next].split_from = segment;
        if (!planned_peer.empty() && planned_peer[x] >= 0) {
          // Decided below; its own stream has room for the wait.
          peer_starts.push_back({pos, prev, s});
        } else if (!implied(pos, prev, s)) {
          if (c.signal[prev] < 0) c.signal[prev] = c.num_events++;
          links.emplace_back(pos, c.signal[prev]);
          ++t;
        }
        segment = next;
        count = 0;
      }
      (as_peer ? c.peer_stream[x] : c.stream_of[x]) = segment;
      count += t;
      prev = x;
    }
  }
  // A node with a peer knows, besides its waits, the history of each of
  // its streams that does not start a new part at it, and what the
  // continuing waits chosen for it so far tell (latest first: an earlier
  // node cannot know a later one).
  std::sort(peer_starts.begin(), peer_starts.end(),
            [&](const Start& a, const Start& b) {
              if (a.pos != b.pos) return a.pos < b.pos;
              return c.dag.pos(a.prev) > c.dag.pos(b.prev);
            });
  for (size_t k = 0; k < peer_starts.size();) {
    const int32_t pos = peer_starts[k].pos;
    const NodeId x = c.dag.order[pos];
    size_t end = k;
    while (end < peer_starts.size() && peer_starts[end].pos == pos) ++end;
    std::vector<NodeId> chosen;
    for (size_t j = k; j < end; ++j) {
      const Start& start = peer_starts[j];
      const int32_t need = seq_on(start.prev, start.stream);
      bool known = implied(pos, start.prev, start.stream);
      // The other stream's history, unless it starts a part here too.
      const int32_t other =
          planned_peer[x] == start.stream ? planned_stream[x] : planned_peer[x];
      bool other_starts = false;
      for (size_t i = k; i < end; ++i) {
        other_starts = other_starts || peer_starts[i].stream == other;
      }
      const NodeId u = planned_peer[x] == start.stream ? before_on_stream[x]
                                                       : before_on_peer[x];
      if (!known && !other_starts && u >= 0) {
        known = knows(u, start.stream, need);
      }
      for (NodeId p : chosen) {
        known = known || knows(p, start.stream, need);
      }
      if (known) continue;
      chosen.push_back(start.prev);
      if (c.signal[start.prev] < 0) c.signal[start.prev] = c.num_events++;
      links.emplace_back(pos, c.signal[start.prev]);
    }
    k = end;
  }
  AddLinks(c, links);
  return absl::OkStatus();
}

}  // namespace weft::scheduler
