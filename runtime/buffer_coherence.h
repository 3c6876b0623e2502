// Where the current bytes of each of a job's buffers are.
//
// A buffer has a copy in every location whose nodes use it: each device
// (allocated up front from the device's MemoryPool, or placed in the job's
// arena there: see Placement below) and host memory (for host-engine
// nodes, sized on first use). Coherence follows plan order: for
// each buffer it tracks the location of the latest version and which
// copies are current. Before a use, MakeCurrent refreshes a stale or
// missing copy where the use runs, on the use's stream: initial contents
// are made in place (uploaded, or filled on the device for zero and fill
// initialisations, which never move a buffer's worth of bytes), otherwise
// the latest version is copied over. Such a transfer is not part of the
// plan, so it records a ready event that any other stream using that copy
// waits for before touching it. After a use, MarkWritten makes the copy
// where it ran the only current one; from then on plan dependencies order
// every later use (a node that writes a buffer depends on every earlier
// reader and writer), so no ready event is needed any more.
//
// Placement (Place): where the plan has a memory plan (Plan::memory,
// Plan::buffers), a device's planned copies lie in one arena taken from
// the device's pool, each at the arena's base plus its offset; copies
// without a place are allocated one by one. The planner lets two copies
// share addresses only when every use of one happens before every use of
// the other (scheduler/memory/lifetimes.h), so the device already orders
// the bytes; what remains is the coherence state. A placed copy holds its
// range from its first use (made current, or initialised, there) until a
// copy overlapping it takes the range: that copy's first use comes after
// every use of the earlier one, which is then dead and no longer current.
// If it held its buffer's only version, the buffer is lost: a later use
// or download fails (INTERNAL) rather than read another buffer's bytes
// (that cannot happen when the plan's lifetimes describe this execution).
//
// Transfers are traced (JobTracer) and their events held in the job's
// JobEvents; initial contents uploaded from the host are staged here until
// Release: only their data, which the upload follows with zeros up to the
// buffer's size (Backend::CopyHostToDevicePadded).
//
// Not thread-safe: used by one job in the executor's turn (executor.cc).
#ifndef WEFT_RUNTIME_BUFFER_COHERENCE_H_
#define WEFT_RUNTIME_BUFFER_COHERENCE_H_

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/job_events.h"
#include "runtime/job_tracer.h"
#include "runtime/memory_pool.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

// The initial contents of `spec` (zeros, its data, or its fill), computed
// on the host.
std::string InitialContents(const scheduler::BufferSpec& spec);
// The initial contents of `spec` up to where only zeros follow, which an
// upload sends as its zero tail (Backend::CopyHostToDevicePadded): empty for
// zeros, its data (at most the buffer's size), or its whole fill.
std::string InitialData(const scheduler::BufferSpec& spec);

class BufferCoherence {
 public:
  struct Options {
    Backend* backend = nullptr;                  // not owned
    absl::Span<MemoryPool* const> memory_pools;  // by device; not owned
    JobEvents* events = nullptr;                 // not owned
    JobTracer* tracer = nullptr;                 // not owned
  };

  // Tracks every buffer of `graph` (not owned; outlives this) over its
  // devices and the host (location memory_pools.size()).
  BufferCoherence(const scheduler::Graph* graph, Options options);

  BufferCoherence(const BufferCoherence&) = delete;
  BufferCoherence& operator=(const BufferCoherence&) = delete;

  // The host's location index (after the devices).
  int host() const { return host_; }

  // Takes one arena per device of `plan`'s memory plan from the device's
  // pool and places there every copy that `plan` gives a place, except
  // the copies the plan's lifetimes do not describe: without
  // `host_gates`, those of buffers a host-engine node uses (it then runs
  // on its device). The copies a control node uses are placed; the plan
  // keeps them apart to the end of the job, and nested jobs running its
  // bodies use them there. Call before AllocateFor, which allocates
  // the rest. A device without placed copies takes no arena; a plan
  // without a memory plan places nothing. INVALID_ARGUMENT for a place
  // outside its arena; the pool's error naming the arena's largest buffer,
  // its first user and the device, as AllocateFor names a buffer.
  absl::Status Place(const scheduler::Plan& plan, bool host_gates);
  // Bytes of the arena held on `device` as the plan sized it (0: none).
  int64_t arena_bytes(int device) const {
    return arenas_[device].address == 0 ? 0 : arena_sizes_[device];
  }
  // Whether `b`'s copy on `device` lies in the device's arena.
  bool placed(scheduler::BufferId b, int device) const {
    return buffers_[b].copies[device].placed;
  }
  // INTERNAL when `b`'s only version was overwritten by a copy placed at
  // the same addresses (see Placement above); OK otherwise.
  absl::Status CheckNotLost(scheduler::BufferId b) const;

  // Allocates buffer `b`'s copy on `device`, once. The pool's error when
  // it fails.
  absl::Status Allocate(scheduler::BufferId b, int device);
  // Allocates the copies every node of `plan` of `graph` (this job's graph,
  // or the body of one of its control nodes, over the same buffers) uses
  // on its device: all but host-engine nodes, which run on the host when
  // `host_gates`, and control nodes, whose bodies allocate what Place did
  // not place as they start.
  // The error names the buffer, the first node using it and the device.
  absl::Status AllocateFor(const scheduler::Graph& graph,
                           const scheduler::Plan& plan, bool host_gates);
  // The address of `b`'s copy on `device`. REQUIRES: allocated.
  DevicePtr ptr(scheduler::BufferId b, int device) const {
    return buffers_[b].copies[device].ptr;
  }

  // Some location has a version of `b` (a use made one).
  bool has_version(scheduler::BufferId b) const {
    return buffers_[b].latest >= 0;
  }
  // Makes `b` current at location `where` (a device, or host()) for work
  // about to go on `stream`, a stream of `stream_device`. `overwritten`:
  // that work writes every byte of `b` and reads none; a buffer no use has
  // made yet is then not made (no zeros, fill or upload of its initial
  // contents) but only given its memory at `where`.
  absl::Status MakeCurrent(scheduler::BufferId b, int where, int stream_device,
                           StreamHandle stream, bool overwritten = false);
  // Makes `b`'s initial contents at `where`, which then holds its latest
  // version.
  absl::Status Materialize(scheduler::BufferId b, int where, int stream_device,
                           StreamHandle stream);
  // A spill (scheduler::kSpillOp) on `stream` of `device`: host memory
  // receives `b`'s latest version (as a host node's read would), so that
  // the range of its copy on `device` may be taken by another copy.
  absl::Status Spill(scheduler::BufferId b, int device, StreamHandle stream);
  // A fill (scheduler::kFillOp) on `stream` of `device`: `b`'s copy there
  // moves to its next planned place (its next residency, when placed) and
  // is made current from wherever the latest version is.
  absl::Status Fill(scheduler::BufferId b, int device, StreamHandle stream);
  // Work on `stream` at location `where` used `uses`: what it wrote is
  // current there only.
  void MarkWritten(absl::Span<const scheduler::BufferUse> uses, int where,
                   StreamHandle stream);
  // Work the job enqueued outside MakeCurrent (a device graph) left the
  // latest version of `b` at device `where`, written on `writer`.
  void SetLatest(scheduler::BufferId b, int where, StreamHandle writer);

  // Where `b`'s latest version is: its location (-1: nowhere yet), address
  // on a device, and the stream that last wrote it.
  struct Latest {
    int where = -1;
    DevicePtr ptr;
    StreamHandle writer;
  };
  Latest latest(scheduler::BufferId b) const;

  // The host copy's memory, sized on first use (never reallocated after).
  char* HostData(scheduler::BufferId b);
  std::string TakeHostData(scheduler::BufferId b) {
    return std::move(buffers_[b].host_data);
  }
  // The initial data of host-data buffer `b` in host memory that stays
  // until Release, for an upload with a zero tail
  // (Backend::CopyHostToDevicePadded) to read. RESOURCE_EXHAUSTED when the
  // host has no memory for it.
  struct Staged {
    const char* data = nullptr;
    uint64_t bytes = 0;  // of data; the buffer's zero tail follows them
  };
  absl::StatusOr<Staged> Stage(scheduler::BufferId b);

  // Frees every device copy and arena: back to its pool for reuse, or
  // (`uncached`, when work may still use them) straight to the backend.
  // Drops staged contents.
  void Release(bool uncached);

 private:
  // A buffer's copy in one location (a device, or the host).
  struct Copy {
    DevicePtr ptr;
    bool allocated = false;
    bool current = false;
    // Set while the copy's contents come from a transfer the plan does not
    // know about: streams other than `ready_stream` wait on `ready` first.
    EventHandle ready;
    int ready_device = -1;
    bool ready_pending = false;
    StreamHandle ready_stream;
    // The stream that last wrote this copy (for the final download).
    StreamHandle writer;
    // In the device's arena (Place), and holding its range there.
    bool placed = false;
    bool holds_range = false;
    int64_t offset = 0;  // in the arena, when placed
    // Places of the residencies after the first (a fill moves the copy to
    // the next one), and how many of them were taken.
    std::vector<int64_t> later_offsets;
    size_t residency = 0;
  };

  struct BufferState {
    std::vector<Copy> copies;  // by location: devices, then the host
    int latest = -1;           // location of the latest version; -1: none
    // Some node has written it; until then every copy holds its initial
    // contents, and a zero- or fill-initialized one is made in place.
    bool written = false;
    std::string host_data;  // the host copy's memory, once used
    // Its only version was overwritten (see Placement above).
    bool lost = false;
  };

  // A placed copy holding [offset, end) of its device's arena.
  struct Holder {
    int64_t end = 0;
    scheduler::BufferId buffer = -1;
  };

  // `b`'s copy on `device` is about to be written or read there: if it is
  // placed, it takes its range from the copies overlapping it (Evict).
  void TakeRange(scheduler::BufferId b, int device);
  // The placed copy of `b` on `device` gave its range to another copy.
  void Evict(scheduler::BufferId b, int device);
  absl::Status WaitReady(Copy& copy, StreamHandle stream);
  absl::Status MarkTransferred(Copy& copy, int stream_device,
                               StreamHandle stream);

  // Constant after construction.
  const scheduler::Graph* const graph_;
  const Options options_;
  const int host_;

  std::vector<BufferState> buffers_;
  // By device: the arena (address 0: none), its planned size, and the
  // placed copies holding ranges of it, by offset (disjoint ranges).
  std::vector<DevicePtr> arenas_;
  std::vector<int64_t> arena_sizes_;
  std::vector<std::map<int64_t, Holder>> holders_;
  // Frees what std::malloc and std::calloc gave.
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  // Host memory that pending uploads read from: buffers' initial data
  // (uploads send only the data, with a zero tail).
  std::vector<std::unique_ptr<char, FreeDeleter>> staging_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_BUFFER_COHERENCE_H_
