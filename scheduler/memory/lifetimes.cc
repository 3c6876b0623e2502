#include "scheduler/memory/lifetimes.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/memory/body_uses.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler::memory {
namespace {

constexpr int kNowhere = -2;  // BufferState::latest before any use
constexpr int kHost = -1;
constexpr uint64_t kHostBit = uint64_t{1} << 63;

// The executor's coherence state of one buffer (runtime/job.h).
struct BufferState {
  int32_t latest = kNowhere;  // where its latest version is
  uint64_t current = 0;       // where copies are current: bit d, kHostBit
  bool written = false;
  int32_t upload_seq = 0;  // its prefetch upload on device `latest`, or 0
  int32_t upload_device = -1;
};

struct UseRecord {
  int32_t copy;
  int32_t position;  // -1: the upload
};

uint64_t Bit(int where) {
  return where == kHost ? kHostBit : uint64_t{1} << where;
}

}  // namespace

int Lifetimes::Find(BufferId buffer, int device) const {
  if (buffer < 0 || device < 0 || device >= num_devices_) return -1;
  const size_t k = static_cast<size_t>(buffer) * num_devices_ + device;
  return k < copy_index_.size() ? copy_index_[k] : -1;
}

absl::StatusOr<Lifetimes> Lifetimes::Compute(const Graph& graph,
                                             const Plan& plan) {
  Lifetimes lt;
  const int n = plan.num_nodes();
  const int num_devices = std::max(plan.num_devices, 1);
  if (num_devices > 63) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.num_devices: at most 63 devices, got ", plan.num_devices));
  }
  lt.num_devices_ = num_devices;
  lt.copy_index_.assign(static_cast<size_t>(graph.num_buffers()) * num_devices,
                        -1);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    if (pn.node < 0 || pn.node >= graph.num_nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.nodes[", i, "].node: ", pn.node,
                       " is not a node of the graph"));
    }
    if (pn.device < 0 || pn.device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.nodes[", i, "].device: ", pn.device,
                       " is not below num_devices ", num_devices));
    }
  }

  std::vector<BufferState> state(graph.num_buffers());
  std::vector<UseRecord> records;
  records.reserve(static_cast<size_t>(graph.num_uses()) + 16);
  std::vector<int32_t> last_record(0);  // by copy: position last recorded
  auto copy_of = [&](BufferId b, int device, int32_t position) {
    int32_t& c = lt.copy_index_[static_cast<size_t>(b) * num_devices + device];
    if (c < 0) {
      c = static_cast<int32_t>(lt.copies_.size());
      BufferCopy copy;
      copy.buffer = b;
      copy.device = device;
      copy.size_bytes = graph.buffer_bytes(b);
      copy.first = position;
      lt.copies_.push_back(copy);
      last_record.push_back(-2);
    }
    return c;
  };
  auto use = [&](BufferId b, int device, int32_t position) {
    const int32_t c = copy_of(b, device, position);
    if (last_record[c] == position) return c;
    last_record[c] = position;
    records.push_back({c, position});
    lt.copies_[c].last = position;
    return c;
  };

  // Prefetch uploads, in issue order of first use.
  std::vector<int32_t> uploads(num_devices, 0);
  std::vector<int32_t> upload_seq;  // by copy
  {
    std::vector<uint8_t> seen(graph.num_buffers(), 0);
    for (int i = 0; i < n; ++i) {
      const PlannedNode& pn = plan.nodes[i];
      // A fill uploads host data itself, when it is needed.
      const bool on_host = graph.engine(pn.node) == Engine::kHost ||
                           graph.memory_move(pn.node) != MemoryMove::kNone;
      for (const BufferUse& u : graph.Uses(pn.node)) {
        const BufferId b = u.buffer;
        if (seen[b]) continue;
        seen[b] = 1;
        if (on_host || !graph.has_initial_data(b)) continue;
        BufferState& s = state[b];
        s.latest = pn.device;
        s.current = Bit(pn.device);
        s.upload_seq = ++uploads[pn.device];
        s.upload_device = pn.device;
        const int32_t c = use(b, pn.device, -1);
        lt.copies_[c].uploaded = true;
        upload_seq.resize(lt.copies_.size(), 0);
        upload_seq[c] = s.upload_seq;
      }
    }
  }

  // Eager copies by writer position (the plan lists them by reader).
  std::vector<int32_t> copies_by_writer(plan.copies.size());
  for (size_t k = 0; k < copies_by_writer.size(); ++k) {
    copies_by_writer[k] = static_cast<int32_t>(k);
  }
  std::stable_sort(copies_by_writer.begin(), copies_by_writer.end(),
                   [&plan](int32_t a, int32_t b) {
                     return plan.copies[a].after < plan.copies[b].after;
                   });
  size_t next_copy = 0;

  // The executor's replay (Job::MakeCurrent, Job::MarkWritten).
  std::vector<UploadWait> upload_waits;
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    // A spill reads the latest version into host memory, as a host node
    // does; a fill starts a new copy (residency) on its device, made current
    // as any use makes it. A control node's bodies run on its device.
    const MemoryMove move = graph.memory_move(pn.node);
    const bool host_node = graph.engine(pn.node) == Engine::kHost &&
                           graph.node(pn.node).control == nullptr;
    const int where =
        host_node || move == MemoryMove::kSpill ? kHost : pn.device;
    const absl::Span<const BufferUse> uses = graph.Uses(pn.node);
    if (move == MemoryMove::kFill) {
      for (const BufferUse& u : uses) {
        BufferState& s = state[u.buffer];
        lt.copy_index_[static_cast<size_t>(u.buffer) * num_devices +
                       pn.device] = -1;
        s.current &= ~Bit(pn.device);
        if (s.latest == pn.device) {
          s.latest = kNowhere;
          if (s.current & kHostBit) {
            s.latest = kHost;
          } else {
            for (int d = 0; d < num_devices; ++d) {
              if (s.current & Bit(d)) {
                s.latest = d;
                break;
              }
            }
          }
          s.upload_seq = 0;
        }
      }
    }
    // An eager copy for this node reads its source until the node starts.
    for (const PlannedCopy& copy : plan.CopiesBefore(i)) {
      if (copy.buffer < 0 || copy.buffer >= graph.num_buffers()) continue;
      const int32_t from = state[copy.buffer].latest;
      if (from >= 0 && from != copy.device) use(copy.buffer, from, i);
    }
    for (const BufferUse& u : uses) {
      const BufferId b = u.buffer;
      BufferState& s = state[b];
      if (where != kHost) use(b, where, i);
      const bool from_upload = s.upload_seq > 0 && s.latest == s.upload_device;
      if (s.latest == kNowhere) {
        s.latest = where;
        s.current = Bit(where);
      } else if (s.current & Bit(where)) {
        if (from_upload && where == s.upload_device) {
          upload_waits.push_back({i, s.upload_device, s.upload_seq});
        }
      } else if (!s.written && !graph.has_initial_data(b)) {
        s.current |= Bit(where);  // made in place: zeros or a fill
      } else {
        if (s.latest >= 0) {
          use(b, s.latest, i);  // the source of the transfer
          if (from_upload) {
            upload_waits.push_back({i, s.upload_device, s.upload_seq});
          }
        }
        s.current |= Bit(where);
      }
    }
    // A control node's bodies that run on other devices use their buffers
    // there from the node's start (placed copies, living to the end as
    // every copy of a buffer a control node uses does, below).
    if (static_cast<size_t>(pn.node) < plan.bodies.size()) {
      ForEachBodyUse(graph, pn.node, plan.bodies[pn.node],
                     [&](BufferId b, int device) {
                       if (b >= 0 && b < graph.num_buffers() && device >= 0 &&
                           device < num_devices && device != pn.device) {
                         use(b, device, i);
                       }
                     });
    }
    for (const BufferUse& u : uses) {
      if (!Writes(u.access) || move != MemoryMove::kNone) continue;
      BufferState& s = state[u.buffer];
      s.latest = where;
      s.current = Bit(where);
      s.written = true;
      s.upload_seq = 0;
    }
    // Eager copies from this writer: the destination copy counts as used
    // from the writer on (the copy runs after it and before its reader;
    // its source counts as used by the reader, above).
    for (; next_copy < copies_by_writer.size() &&
           plan.copies[copies_by_writer[next_copy]].after <= i;
         ++next_copy) {
      const PlannedCopy& copy = plan.copies[copies_by_writer[next_copy]];
      if (copy.after < i) continue;  // out of range: before position 0
      if (copy.buffer < 0 || copy.buffer >= graph.num_buffers() ||
          copy.device < 0 || copy.device >= num_devices) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.copies: buffer ", copy.buffer, " to device ",
                         copy.device, " is not in the graph and plan"));
      }
      BufferState& s = state[copy.buffer];
      if (s.latest < 0 || (s.current & Bit(copy.device)) != 0) continue;
      use(copy.buffer, s.latest, i);
      use(copy.buffer, copy.device, i);
      s.current |= Bit(copy.device);
    }
  }
  for (BufferId b = 0; b < graph.num_buffers(); ++b) {
    // Host memory holding the latest version (a spill after the last
    // write) serves the download: no device copy need live to the end.
    if (!graph.buffer(b).output || state[b].latest < 0 ||
        (state[b].current & kHostBit) != 0) {
      continue;
    }
    const int32_t c = lt.Find(b, state[b].latest);
    if (c < 0) continue;
    lt.copies_[c].live_to_end = true;
    lt.copies_[c].last = n;
  }
  if (graph.has_control()) {
    // A control node's bodies run once it has started, as nested jobs or
    // device graphs over the copies it uses, on streams its successors in
    // the plan need not wait for: every copy of such a buffer lives to the
    // end of the job and shares addresses with nothing used after it.
    std::vector<uint8_t> controlled(graph.num_buffers(), 0);
    for (NodeId v = 0; v < graph.num_nodes(); ++v) {
      if (graph.node(v).control == nullptr) continue;
      for (const BufferUse& u : graph.Uses(v)) controlled[u.buffer] = 1;
    }
    for (BufferCopy& copy : lt.copies_) {
      if (!controlled[copy.buffer]) continue;
      copy.live_to_end = true;
      copy.last = n;
    }
  }

  WEFT_ASSIGN_OR_RETURN(lt.hb_,
                        HappensBefore::Build(plan, uploads, upload_waits));

  // As-soon-as-possible executions over stream order, peer joins and
  // event waits (HappensBefore::Build has checked the ids).
  {
    std::vector<int32_t> last_on_stream(plan.streams.size(), -1);
    std::vector<int32_t> recorded_by(plan.num_events, -1);
    for (int e = 0; e < kExecutions; ++e) lt.times_[e].resize(2 * n);
    for (int i = 0; i < n; ++i) {
      const PlannedNode& pn = plan.nodes[i];
      double start[kExecutions] = {};
      auto after = [&](int32_t j) {
        if (j < 0) return;
        for (int e = 0; e < kExecutions; ++e) {
          start[e] = std::max(start[e], lt.times_[e][2 * j + 1]);
        }
      };
      after(last_on_stream[pn.stream]);
      if (pn.peer_stream >= 0) after(last_on_stream[pn.peer_stream]);
      if (i < plan.waits.rows()) {
        for (const int32_t w : plan.Waits(i)) after(recorded_by[w]);
      }
      const double cost = std::max(graph.cost_us(pn.node), 0.0) + 1;
      for (int e = 0; e < kExecutions; ++e) {
        lt.times_[e][2 * i] = start[e];
        lt.times_[e][2 * i + 1] = start[e] + (e == 0 ? cost : 1);
      }
      last_on_stream[pn.stream] = i;
      if (pn.peer_stream >= 0) last_on_stream[pn.peer_stream] = i;
      if (pn.signal_event >= 0) recorded_by[pn.signal_event] = i;
    }
  }

  // Uses by copy, in issue order (a counting sort keeps it).
  const int num_copies = lt.num_copies();
  lt.uses_.offsets.assign(num_copies + 1, 0);
  for (const UseRecord& r : records) ++lt.uses_.offsets[r.copy + 1];
  for (int c = 0; c < num_copies; ++c) {
    lt.uses_.offsets[c + 1] += lt.uses_.offsets[c];
  }
  lt.uses_.items.resize(records.size());
  {
    std::vector<int32_t> fill(lt.uses_.offsets.begin(),
                              lt.uses_.offsets.end() - 1);
    for (const UseRecord& r : records) {
      lt.uses_.items[fill[r.copy]++] = r.position;
    }
  }
  records.clear();
  records.shrink_to_fit();

  // Per copy and stream: the last use, and the first one.
  lt.end_offsets_.assign(1, 0);
  lt.end_offsets_.reserve(num_copies + 1);
  lt.starts_.offsets.reserve(num_copies + 1);
  std::vector<Point> ends;
  std::vector<int32_t> starts;
  for (int c = 0; c < num_copies; ++c) {
    ends.clear();
    starts.clear();
    const BufferCopy& copy = lt.copies_[c];
    for (const int32_t position : lt.Uses(c)) {
      Point p;
      if (position < 0) {
        p = lt.hb_.upload(copy.device, upload_seq[c]);
      } else {
        p = lt.hb_.point(position);
      }
      bool found = false;
      for (Point& e : ends) {
        if (e.stream == p.stream) {
          e.seq = std::max(e.seq, p.seq);
          found = true;
          break;
        }
      }
      if (!found) {
        ends.push_back(p);
        if (position >= 0) starts.push_back(position);
      }
    }
    lt.ends_.insert(lt.ends_.end(), ends.begin(), ends.end());
    lt.end_offsets_.push_back(static_cast<int32_t>(lt.ends_.size()));
    lt.starts_.AppendRow(starts);
  }
  return lt;
}

bool Lifetimes::Before(int a, int b) const {
  if (a == b) return false;
  const BufferCopy& ca = copies_[a];
  const BufferCopy& cb = copies_[b];
  if (ca.live_to_end || cb.uploaded || ca.last >= cb.first) return false;
  const absl::Span<const Point> ends = Ends(a);
  for (const int32_t start : Starts(b)) {
    if (!hb_.AllBefore(ends, start)) return false;
  }
  return true;
}

}  // namespace weft::scheduler::memory
