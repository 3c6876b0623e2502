#include "scheduler/eager_copies.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"

namespace weft::scheduler {

namespace {

constexpr int kMaxMemories = 64;  // devices and the host, as cost_model.cc
// Eager copy streams per destination device.
constexpr size_t kMaxCopyStreams = 32;

uint64_t Bit(int memory) { return uint64_t{1} << memory; }

}  // namespace

absl::StatusOr<std::vector<PlannedCopy>> PlanEagerCopies(
    const Graph& graph, const Dag& dag, StreamContext& streams,
    bool bodies_on_one_device) {
  std::vector<PlannedCopy> copies;
  const int n = dag.num_nodes();
  int num_devices = 0;
  for (const int d : streams.device) num_devices = std::max(num_devices, d + 1);
  if (num_devices + 1 > kMaxMemories) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eager copies support up to ", kMaxMemories - 1, " devices"));
  }
  if (num_devices < 2) return copies;
  const int host = num_devices;
  // Tasks per stream, as SplitStreamsPass counts them (a node, its waits,
  // its record, a peer join's two on each stream), where streams have a
  // budget: a writer at its stream's budget gets no new record, and its
  // copies stay on their readers' streams.
  // Counted at the first copy.
  const int budget = streams.options.max_nodes_per_stream;
  std::vector<int32_t> tasks;
  const auto count_tasks = [&] {
    tasks.assign(streams.streams.size(), 0);
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = dag.order[i];
      const int join = streams.peer_of(v) >= 0 ? 2 : 0;
      tasks[streams.stream_of[v]] += 1 + streams.waits.Row(i).size() +
                                     (streams.signal[v] >= 0 ? 1 : 0) + join;
      if (join != 0) tasks[streams.peer_of(v)] += 1 + join;
    }
  };
  // Copy streams by destination device: one per stream of the writers
  // (whose copies then start in the order their writers end), up to
  // kMaxCopyStreams; past that, the one whose last copy is oldest. Under a
  // budget, a copy stream takes as many copies as fit (three tasks each:
  // the wait, the copy and its record) and then gives way to a new one.
  struct CopyStream {
    int32_t writer_stream = -1;
    int32_t id = -1;
    int32_t last_used = -1;  // index of its last copy
    int32_t tasks = 0;
  };
  constexpr int32_t kCopyTasks = 3;
  std::vector<std::vector<CopyStream>> by_device(num_devices);
  // By (device, writer stream): a bit for each copy stream of the device
  // (an index in by_device) that takes that writer stream's copies now.
  const size_t writer_streams = streams.streams.size();
  std::vector<uint32_t> taking(num_devices * writer_streams, 0);
  static_assert(kMaxCopyStreams <= 32, "one bit per copy stream");
  const auto assign = [&](int device, int32_t index, int32_t writer_stream) {
    CopyStream& cs = by_device[device][index];
    if (cs.writer_stream >= 0) {
      taking[device * writer_streams + cs.writer_stream] &= ~(1u << index);
    }
    cs.writer_stream = writer_stream;
    taking[device * writer_streams + writer_stream] |= 1u << index;
  };
  const auto fits = [budget](const CopyStream& cs) {
    return budget <= 0 || cs.tasks + kCopyTasks <= budget;
  };
  // The copy of `buffer` from `writer` (a node, at issue position
  // writer_pos) to `device` for the reader at issue position `reader_pos`,
  // given its event and stream, unless the writer's stream has no room
  // for a new record.
  const auto add_copy = [&](NodeId writer, int32_t writer_pos,
                            int32_t reader_pos, BufferId buffer, int device) {
    const int32_t writer_stream = streams.stream_of[writer];
    int32_t& signal = streams.signal[writer];
    if (signal < 0 && budget > 0) {
      if (tasks.empty()) count_tasks();
      if (tasks[writer_stream] + 1 > budget) return;
      ++tasks[writer_stream];
    }
    if (signal < 0) signal = streams.num_events++;
    std::vector<CopyStream>& pool = by_device[device];
    // The last copy stream taking the writer stream's copies that has room.
    int32_t chosen = -1;
    for (uint32_t bits = taking[device * writer_streams + writer_stream];
         bits != 0;) {
      const int32_t index = 31 - __builtin_clz(bits);
      if (fits(pool[index])) {
        chosen = index;
        break;
      }
      bits &= ~(1u << index);
    }
    if (chosen < 0 && pool.size() < kMaxCopyStreams) {
      pool.push_back(
          {-1,
           streams.NewStream(device, Engine::kCopy,
                             LogicalStream::Kind::kIndependent, "eager copies"),
           -1, 0});
      chosen = static_cast<int32_t>(pool.size()) - 1;
      assign(device, chosen, writer_stream);
    }
    if (chosen < 0) {
      for (int32_t i = 0; i < static_cast<int32_t>(pool.size()); ++i) {
        if (fits(pool[i]) &&
            (chosen < 0 || pool[i].last_used < pool[chosen].last_used)) {
          chosen = i;
        }
      }
      if (chosen < 0) {
        // Every copy stream of the device is full: a fresh one replaces
        // the oldest.
        chosen = 0;
        for (int32_t i = 0; i < static_cast<int32_t>(pool.size()); ++i) {
          if (pool[i].last_used < pool[chosen].last_used) chosen = i;
        }
        pool[chosen].id = streams.NewStream(device, Engine::kCopy,
                                            LogicalStream::Kind::kIndependent,
                                            "eager copies");
        pool[chosen].tasks = 0;
      }
      assign(device, chosen, writer_stream);
    }
    CopyStream& cs = pool[chosen];
    cs.last_used = static_cast<int32_t>(copies.size());
    cs.tasks += kCopyTasks;
    copies.push_back(
        PlannedCopy{writer_pos, reader_pos, buffer, device, cs.id, signal});
  };
  // By buffer, in one record so that a use touches one cache line: the
  // memories holding its latest version up to date (none: not created
  // anywhere yet) and the device node that wrote that version, with its
  // issue position (-1: never written, or by a host node).
  struct BufferState {
    uint64_t where = 0;
    int32_t writer_pos = -1;
    NodeId writer = -1;
  };
  static_assert(sizeof(BufferState) == 16);
  std::vector<BufferState> state;
  AssignHuge(state, graph.num_buffers(), BufferState());
  // Room for a copy per node, more than most plans make.
  ReserveHuge(copies, static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const NodeId v = dag.order[i];
    // A control node whose bodies run on its device reads and writes its
    // buffers there, as a kernel does.
    const bool on_host =
        graph.engine(v) == Engine::kHost &&
        !(bodies_on_one_device && BodiesRunOnItsDevice(graph, v));
    const bool device_node = !on_host;
    // COPY nodes move their input themselves (from their peer stream).
    const bool reader = device_node && graph.engine(v) != Engine::kCopy;
    const int here = on_host ? host : streams.device[v];
    const absl::Span<const BufferUse> uses = graph.Uses(v);
    for (const BufferUse& use : uses) {
      BufferState& b = state[use.buffer];
      if (b.where == 0) {
        b.where = Bit(here);
        continue;
      }
      if ((b.where & Bit(here)) != 0) continue;
      if (reader && b.writer_pos >= 0) {
        add_copy(b.writer, b.writer_pos, i, use.buffer, here);
      }
      b.where |= Bit(here);
    }
    for (const BufferUse& use : uses) {
      if (!Writes(use.access)) continue;
      BufferState& b = state[use.buffer];
      b.where = Bit(here);
      b.writer_pos = device_node ? i : -1;
      b.writer = v;
    }
  }
  return copies;
}

}  // namespace weft::scheduler
