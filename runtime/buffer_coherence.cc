#include "runtime/buffer_coherence.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/ops/cpu_kernels.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;

std::string InitialContents(const BufferSpec& spec) {
  std::string bytes(spec.size_bytes, '\0');
  switch (spec.init) {
    case BufferSpec::Init::kZero:
      break;
    case BufferSpec::Init::kData:
      std::memcpy(bytes.data(), spec.data.data(),
                  std::min<size_t>(spec.data.size(), bytes.size()));
      break;
    case BufferSpec::Init::kFill: {
      const HostArg args[] = {
          HostBufferArg{bytes.data(), bytes.size(), spec.dtype,
                        scheduler::Access::kWrite},
          spec.fill};
      FillKernel(args).IgnoreError();  // cannot fail: a buffer and a scalar
      break;
    }
  }
  return bytes;
}

std::string InitialData(const BufferSpec& spec) {
  switch (spec.init) {
    case BufferSpec::Init::kZero:
      return std::string();
    case BufferSpec::Init::kData:
      return spec.data.substr(
          0, std::min<uint64_t>(spec.data.size(), spec.size_bytes));
    case BufferSpec::Init::kFill:
      break;
  }
  return InitialContents(spec);
}

BufferCoherence::BufferCoherence(const scheduler::Graph* graph, Options options)
    : graph_(graph),
      options_(options),
      host_(static_cast<int>(options_.memory_pools.size())) {
  buffers_.resize(graph_->num_buffers());
  for (BufferState& b : buffers_) b.copies.resize(host_ + 1);
  arenas_.resize(host_);
  arena_sizes_.resize(host_, 0);
  holders_.resize(host_);
}

absl::Status BufferCoherence::Place(const scheduler::Plan& plan,
                                    bool host_gates) {
  if (plan.memory.empty() || plan.buffers.empty()) return absl::OkStatus();
  const int num_buffers = graph_->num_buffers();
  // Buffers whose copies the plan's lifetimes do not describe.
  std::vector<uint8_t> unplaced(num_buffers, 0);
  if (!host_gates) {
    for (scheduler::NodeId v = 0; v < graph_->num_nodes(); ++v) {
      if (graph_->engine(v) != scheduler::Engine::kHost ||
          graph_->node(v).control != nullptr) {
        continue;
      }
      for (const BufferUse& use : graph_->Uses(v)) unplaced[use.buffer] = 1;
    }
  }
  std::vector<int64_t> arena(host_, 0);
  for (const scheduler::DeviceMemory& m : plan.memory) {
    if (m.device < 0 || m.device >= host_ || m.arena_bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.memory: device ", m.device, " with an arena of ",
                       m.arena_bytes, " bytes is not a device of this job"));
    }
    arena[m.device] = m.arena_bytes;
  }
  // By device: the copies to place, and the largest, to name in errors.
  std::vector<int> used(host_, 0);
  std::vector<BufferId> largest(host_, -1);
  for (const scheduler::PlannedBuffer& pb : plan.buffers) {
    if (pb.buffer < 0 || pb.buffer >= num_buffers || pb.device < 0 ||
        pb.device >= host_ || pb.offset < 0 ||
        pb.size_bytes !=
            static_cast<int64_t>(graph_->buffer(pb.buffer).size_bytes) ||
        pb.offset > arena[pb.device] - pb.size_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan.buffers: buffer ", pb.buffer, " (", pb.size_bytes,
          " bytes) at offset ", pb.offset, " on device ", pb.device,
          " does not lie in that device's arena of a buffer of the graph"));
    }
    if (unplaced[pb.buffer]) continue;
    ++used[pb.device];
    BufferId& big = largest[pb.device];
    if (big < 0 ||
        graph_->buffer(pb.buffer).size_bytes > graph_->buffer(big).size_bytes) {
      big = pb.buffer;
    }
  }
  for (int d = 0; d < host_; ++d) {
    if (used[d] == 0) continue;
    absl::StatusOr<DevicePtr> block =
        options_.memory_pools[d]->AllocateArena(arena[d]);
    if (!block.ok()) {
      // Named as a buffer allocated by itself would be: its largest.
      std::string first_user;
      for (const scheduler::PlannedNode& pn : plan.nodes) {
        if (pn.device != d) continue;
        for (const BufferUse& use : graph_->Uses(pn.node)) {
          if (use.buffer == largest[d]) first_user = graph_->node(pn.node).name;
        }
        if (!first_user.empty()) break;
      }
      return absl::Status(
          block.status().code(),
          absl::StrCat("buffer '", graph_->buffer(largest[d]).name,
                       "' (first used by node '", first_user, "' on device ", d,
                       ") and ", used[d] - 1,
                       " other buffers placed in an arena of ", arena[d],
                       " bytes: ", block.status().message()));
    }
    arenas_[d] = *block;
    arena_sizes_[d] = arena[d];
  }
  for (const scheduler::PlannedBuffer& pb : plan.buffers) {
    if (unplaced[pb.buffer]) continue;
    Copy& copy = buffers_[pb.buffer].copies[pb.device];
    if (copy.placed) {
      copy.later_offsets.push_back(pb.offset);  // its next residency
      continue;
    }
    if (copy.allocated) continue;
    const DevicePtr base = arenas_[pb.device];
    copy.ptr =
        DevicePtr{base.device, base.address + static_cast<uint64_t>(pb.offset)};
    copy.offset = pb.offset;
    copy.allocated = true;
    copy.placed = true;
  }
  return absl::OkStatus();
}

absl::Status BufferCoherence::CheckNotLost(BufferId b) const {
  if (!buffers_[b].lost) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "buffer '", graph_->buffer(b).name,
      "': its latest version was overwritten by a buffer placed at the same "
      "addresses (the memory plan does not describe this execution)"));
}

void BufferCoherence::TakeRange(BufferId b, int device) {
  Copy& copy = buffers_[b].copies[device];
  if (!copy.placed || copy.holds_range) return;
  copy.holds_range = true;
  const int64_t size = static_cast<int64_t>(graph_->buffer(b).size_bytes);
  if (size == 0) return;  // overlaps nothing
  std::map<int64_t, Holder>& holders = holders_[device];
  const int64_t begin = copy.offset;
  const int64_t end = begin + size;
  auto it = holders.lower_bound(begin);
  if (it != holders.begin() && std::prev(it)->second.end > begin) --it;
  while (it != holders.end() && it->first < end) {
    Evict(it->second.buffer, device);
    it = holders.erase(it);
  }
  holders.emplace(begin, Holder{end, b});
}

void BufferCoherence::Evict(BufferId b, int device) {
  BufferState& state = buffers_[b];
  Copy& copy = state.copies[device];
  copy.holds_range = false;
  copy.current = false;
  copy.ready_pending = false;
  if (state.latest != device) return;
  // Its latest version lived here: keep another current copy, or make the
  // initial contents again where nothing wrote it; else it is gone.
  for (int where = 0; where <= host_; ++where) {
    if (state.copies[where].current) {
      state.latest = where;
      return;
    }
  }
  state.latest = -1;
  if (state.written) state.lost = true;
}

absl::Status BufferCoherence::Spill(BufferId b, int device,
                                    StreamHandle stream) {
  return MakeCurrent(b, host_, device, stream);
}

absl::Status BufferCoherence::Fill(BufferId b, int device,
                                   StreamHandle stream) {
  Copy& copy = buffers_[b].copies[device];
  if (copy.placed && copy.current && copy.holds_range &&
      copy.residency < copy.later_offsets.size() &&
      copy.later_offsets[copy.residency] == copy.offset) {
    // Back at the same place, which nothing took meanwhile: still current.
    ++copy.residency;
    return WaitReady(copy, stream);
  }
  if (copy.placed) {
    if (copy.holds_range) {
      std::map<int64_t, Holder>& holders = holders_[device];
      auto it = holders.find(copy.offset);
      if (it != holders.end() && it->second.buffer == b) holders.erase(it);
    }
    Evict(b, device);
    if (copy.residency < copy.later_offsets.size()) {
      copy.offset = copy.later_offsets[copy.residency++];
      copy.ptr = DevicePtr{
          arenas_[device].device,
          arenas_[device].address + static_cast<uint64_t>(copy.offset)};
    }
  }
  return MakeCurrent(b, device, device, stream);
}

absl::Status BufferCoherence::Allocate(BufferId b, int device) {
  Copy& copy = buffers_[b].copies[device];
  if (copy.allocated) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(copy.ptr, options_.memory_pools[device]->Allocate(
                                      graph_->buffer(b).size_bytes));
  copy.allocated = true;
  return absl::OkStatus();
}

absl::Status BufferCoherence::AllocateFor(const scheduler::Graph& graph,
                                          const scheduler::Plan& plan,
                                          bool host_gates) {
  if (graph_->num_buffers() == 0) return absl::OkStatus();  // nothing to walk
  for (const scheduler::PlannedNode& pn : plan.nodes) {
    const scheduler::NodeSpec& node = graph.node(pn.node);
    if (node.args.empty() || node.control != nullptr) continue;
    if (node.engine == scheduler::Engine::kHost && host_gates) continue;
    for (const BufferUse& use : graph.BufferUses(pn.node)) {
      absl::Status s = Allocate(use.buffer, pn.device);
      if (!s.ok()) {
        return absl::Status(
            s.code(),
            absl::StrCat("buffer '", graph_->buffer(use.buffer).name,
                         "' (first used by node '", node.name, "' on device ",
                         pn.device, "): ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

char* BufferCoherence::HostData(BufferId b) {
  std::string& data = buffers_[b].host_data;
  const uint64_t size = graph_->buffer(b).size_bytes;
  if (data.size() != size) data.assign(size, '\0');
  return data.data();
}

absl::StatusOr<BufferCoherence::Staged> BufferCoherence::Stage(BufferId b) {
  const BufferSpec& spec = graph_->buffer(b);
  const std::string data = InitialData(spec);
  staging_.emplace_back(
      static_cast<char*>(std::malloc(std::max<size_t>(data.size(), 1))));
  char* staged = staging_.back().get();
  if (staged == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no host memory to stage the data of buffer '", spec.name, "'"));
  }
  std::memcpy(staged, data.data(), data.size());
  return Staged{staged, data.size()};
}

BufferCoherence::Latest BufferCoherence::latest(BufferId b) const {
  const BufferState& state = buffers_[b];
  if (state.latest < 0) return Latest{};
  const Copy& copy = state.copies[state.latest];
  return Latest{state.latest, copy.ptr, copy.writer};
}

void BufferCoherence::SetLatest(BufferId b, int where, StreamHandle writer) {
  BufferState& state = buffers_[b];
  state.latest = where;
  state.copies[where].current = true;
  state.copies[where].writer = writer;
}

absl::Status BufferCoherence::MakeCurrent(BufferId b, int where,
                                          int stream_device,
                                          StreamHandle stream,
                                          bool overwritten) {
  BufferState& state = buffers_[b];
  WEFT_RETURN_IF_ERROR(CheckNotLost(b));
  if (where != host_) TakeRange(b, where);
  Copy& dst = state.copies[where];
  if (state.latest < 0) {
    // Nothing was ever in it: work that writes all of it needs nothing
    // first (the write itself makes its first version, MarkWritten).
    if (overwritten && where != host_) return absl::OkStatus();
    return Materialize(b, where, stream_device, stream);
  }
  if (dst.current) return WaitReady(dst, stream);
  if (!state.written && graph_->buffer(b).init != BufferSpec::Init::kData) {
    // Still its initial zeros or fill: made here too instead of copied.
    const int latest = state.latest;
    WEFT_RETURN_IF_ERROR(Materialize(b, where, stream_device, stream));
    state.latest = latest;
    return absl::OkStatus();
  }
  Copy& src = state.copies[state.latest];
  WEFT_RETURN_IF_ERROR(WaitReady(src, stream));
  const BufferSpec& spec = graph_->buffer(b);
  const uint64_t bytes = spec.size_bytes;
  Backend* backend = options_.backend;
  JobTracer* tracer = options_.tracer;
  TracedWork copy{SpanKind::kCopy};
  copy.bytes = bytes;
  int span = -1;
  if (where == host_) {
    const std::string name =
        absl::StrCat(spec.name, " d", state.latest, "->host");
    copy.track = TraceTrackKind::kDeviceToHost;
    copy.track_device = state.latest;
    copy.name = name;
    span = tracer->Begin(copy, stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyDeviceToHost(HostData(b), src.ptr, bytes, stream));
  } else if (state.latest == host_) {
    const std::string name = absl::StrCat(spec.name, " host->d", where);
    copy.track = TraceTrackKind::kHostToDevice;
    copy.track_device = where;
    copy.name = name;
    span = tracer->Begin(copy, stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyHostToDevice(dst.ptr, HostData(b), bytes, stream));
  } else {
    const std::string name =
        absl::StrCat(spec.name, " d", state.latest, "->d", where);
    copy.track = TraceTrackKind::kPeer;
    copy.track_device = stream_device;
    copy.name = name;
    span = tracer->Begin(copy, stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyDeviceToDevice(dst.ptr, src.ptr, bytes, stream));
  }
  tracer->End(span, stream, stream_device);
  return MarkTransferred(dst, stream_device, stream);
}

absl::Status BufferCoherence::Materialize(BufferId b, int where,
                                          int stream_device,
                                          StreamHandle stream) {
  const BufferSpec& spec = graph_->buffer(b);
  Copy& copy = buffers_[b].copies[where];
  if (where != host_) TakeRange(b, where);
  buffers_[b].latest = where;
  if (where == host_) {
    const std::string initial = InitialContents(spec);
    std::memcpy(HostData(b), initial.data(), initial.size());
    copy.current = true;
    copy.ready_pending = false;
    return absl::OkStatus();
  }
  Backend* backend = options_.backend;
  JobTracer* tracer = options_.tracer;
  int span = -1;
  if (spec.init == BufferSpec::Init::kData) {
    // The data alone is staged; the zeros after it are the upload's tail.
    WEFT_ASSIGN_OR_RETURN(const Staged staged, Stage(b));
    const std::string name = absl::StrCat(spec.name, " upload");
    TracedWork upload{SpanKind::kCopy, TraceTrackKind::kHostToDevice, where,
                      name};
    upload.bytes = spec.size_bytes;
    span = tracer->Begin(upload, stream, stream_device);
    WEFT_RETURN_IF_ERROR(backend->CopyHostToDevicePadded(
        copy.ptr, staged.data, staged.bytes, spec.size_bytes, stream));
  } else {
    // Zero and fill initializations run the built-in fill on the device
    // instead of uploading a buffer's worth of bytes.
    const bool zero = spec.init == BufferSpec::Init::kZero;
    KernelLaunch fill;
    fill.op = "fill";
    fill.args = {DeviceBufferArg{copy.ptr, spec.size_bytes,
                                 zero ? scheduler::DType::kBytes : spec.dtype,
                                 scheduler::Access::kWrite},
                 zero ? 0.0 : spec.fill};
    const std::string name = absl::StrCat(spec.name, " init");
    span = tracer->Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream,
                                    where, name, "fill"},
                         stream, stream_device);
    WEFT_RETURN_IF_ERROR(backend->Launch(fill, stream));
  }
  tracer->End(span, stream, stream_device);
  return MarkTransferred(copy, stream_device, stream);
}

absl::Status BufferCoherence::WaitReady(Copy& copy, StreamHandle stream) {
  if (!copy.ready_pending || copy.ready_stream == stream) {
    return absl::OkStatus();
  }
  options_.tracer->Dirty(stream);
  return options_.backend->StreamWaitEvent(stream, copy.ready);
}

absl::Status BufferCoherence::MarkTransferred(Copy& copy, int stream_device,
                                              StreamHandle stream) {
  if (copy.ready.value == 0 || copy.ready_device != stream_device) {
    WEFT_ASSIGN_OR_RETURN(copy.ready, options_.events->Acquire(stream_device));
    copy.ready_device = stream_device;
  }
  WEFT_RETURN_IF_ERROR(options_.backend->RecordEvent(copy.ready, stream));
  copy.ready_pending = true;
  copy.ready_stream = stream;
  copy.current = true;
  copy.writer = stream;
  return absl::OkStatus();
}

void BufferCoherence::MarkWritten(absl::Span<const BufferUse> uses, int where,
                                  StreamHandle stream) {
  for (const BufferUse& use : uses) {
    if (!scheduler::Writes(use.access)) continue;
    BufferState& state = buffers_[use.buffer];
    state.latest = where;
    state.written = true;
    for (Copy& copy : state.copies) {
      copy.current = false;
      // From here on the plan orders every later use of this buffer.
      copy.ready_pending = false;
    }
    state.copies[where].current = true;
    state.copies[where].writer = stream;
  }
}

void BufferCoherence::Release(bool uncached) {
  auto give_back = [uncached, this](DevicePtr ptr) {
    MemoryPool* pool = options_.memory_pools[ptr.device];
    (uncached ? pool->FreeUncached(ptr) : pool->Free(ptr)).IgnoreError();
  };
  for (BufferState& state : buffers_) {
    for (Copy& copy : state.copies) {
      if (copy.allocated && !copy.placed) give_back(copy.ptr);
      copy.allocated = false;
      copy.placed = false;
      copy.holds_range = false;
    }
  }
  for (int d = 0; d < host_; ++d) {
    if (arenas_[d].address != 0) give_back(arenas_[d]);
    arenas_[d] = DevicePtr{};
    holders_[d].clear();
  }
  staging_.clear();
}

}  // namespace weft::runtime
