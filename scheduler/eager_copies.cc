#include "scheduler/eager_copies.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

namespace {

constexpr int32_t kNowhere = -1;  // a buffer not created anywhere yet
constexpr int kMaxMemories = 64;  // devices and the host, as cost_model.cc
// Eager copy streams per destination device.
constexpr size_t kMaxCopyStreams = 32;

uint64_t Bit(int memory) { return uint64_t{1} << memory; }

}  // namespace

absl::StatusOr<std::vector<PlannedCopy>> PlanEagerCopies(
    const Graph& graph, const Dag& dag, StreamContext& streams) {
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
  const int num_buffers = graph.num_buffers();
  std::vector<int32_t> latest(num_buffers, kNowhere);
  std::vector<uint64_t> where(num_buffers, 0);
  std::vector<uint8_t> written(num_buffers, 0);
  // By buffer: the issue position of the device node that wrote its
  // latest version, or -1 (never written, or by a host or control node).
  std::vector<int32_t> writer(num_buffers, -1);
  for (int32_t i = 0; i < n; ++i) {
    const NodeId v = dag.order[i];
    const NodeSpec& node = graph.node(v);
    const bool on_host = graph.engine(v) == Engine::kHost;
    const bool device_node = !on_host && node.control == nullptr;
    // COPY nodes move their input themselves (from their peer stream).
    const bool reader = device_node && graph.engine(v) != Engine::kCopy;
    const int here = on_host ? host : streams.device[v];
    const absl::Span<const BufferUse> uses = graph.Uses(v);
    for (const BufferUse& use : uses) {
      const BufferId b = use.buffer;
      if (latest[b] == kNowhere) {
        latest[b] = here;
        where[b] = Bit(here);
        continue;
      }
      if ((where[b] & Bit(here)) != 0) continue;
      if (written[b] && reader && latest[b] != host && writer[b] >= 0) {
        copies.push_back(PlannedCopy{writer[b], i, b, here, -1, -1});
      }
      where[b] |= Bit(here);
    }
    for (const BufferUse& use : uses) {
      if (!Writes(use.access)) continue;
      const BufferId b = use.buffer;
      latest[b] = here;
      where[b] = Bit(here);
      written[b] = 1;
      writer[b] = device_node ? i : -1;
    }
  }
  if (copies.empty()) return copies;
  // Tasks per stream, as SplitStreamsPass counts them (a node, its waits,
  // its record, a peer join's two on each stream), where streams have a
  // budget: a writer at its stream's budget gets no new record, and its
  // copies stay on their readers' streams.
  const int budget = streams.options.max_nodes_per_stream;
  std::vector<int32_t> tasks;
  if (budget > 0) {
    tasks.assign(streams.streams.size(), 0);
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = dag.order[i];
      const int join = streams.peer_of(v) >= 0 ? 2 : 0;
      tasks[streams.stream_of[v]] += 1 + streams.waits.Row(i).size() +
                                     (streams.signal[v] >= 0 ? 1 : 0) + join;
      if (join != 0) tasks[streams.peer_of(v)] += 1 + join;
    }
  }
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
  std::vector<PlannedCopy> kept;
  kept.reserve(copies.size());
  for (PlannedCopy& copy : copies) {
    const NodeId writer = dag.order[copy.after];
    const int32_t writer_stream = streams.stream_of[writer];
    int32_t& signal = streams.signal[writer];
    if (signal < 0 && budget > 0) {
      if (tasks[writer_stream] + 1 > budget) continue;
      ++tasks[writer_stream];
    }
    if (signal < 0) signal = streams.num_events++;
    copy.event = signal;
    std::vector<CopyStream>& pool = by_device[copy.device];
    const auto fits = [budget](const CopyStream& cs) {
      return budget <= 0 || cs.tasks + kCopyTasks <= budget;
    };
    CopyStream* chosen = nullptr;
    for (CopyStream& cs : pool) {
      if (cs.writer_stream == writer_stream && fits(cs)) chosen = &cs;
    }
    if (chosen == nullptr && pool.size() < kMaxCopyStreams) {
      pool.push_back(
          {writer_stream,
           streams.NewStream(copy.device, Engine::kCopy,
                             LogicalStream::Kind::kIndependent, "eager copies"),
           -1, 0});
      chosen = &pool.back();
    }
    if (chosen == nullptr) {
      for (CopyStream& cs : pool) {
        if (fits(cs) &&
            (chosen == nullptr || cs.last_used < chosen->last_used)) {
          chosen = &cs;
        }
      }
      if (chosen == nullptr) {
        // Every copy stream of the device is full: a fresh one replaces
        // the oldest.
        chosen = &pool[0];
        for (CopyStream& cs : pool) {
          if (cs.last_used < chosen->last_used) chosen = &cs;
        }
        chosen->id = streams.NewStream(copy.device, Engine::kCopy,
                                       LogicalStream::Kind::kIndependent,
                                       "eager copies");
        chosen->tasks = 0;
      }
      chosen->writer_stream = writer_stream;
    }
    chosen->last_used = static_cast<int32_t>(kept.size());
    chosen->tasks += kCopyTasks;
    copy.stream = chosen->id;
    kept.push_back(copy);
  }
  copies = std::move(kept);
  return copies;
}

}  // namespace weft::scheduler
