#include "runtime/buffer_coherence.h"

#include <algorithm>
#include <cstring>
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

BufferCoherence::BufferCoherence(const scheduler::Graph* graph, Options options)
    : graph_(graph),
      options_(options),
      host_(static_cast<int>(options_.memory_pools.size())) {
  buffers_.resize(graph_->num_buffers());
  for (BufferState& b : buffers_) b.copies.resize(host_ + 1);
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

const char* BufferCoherence::Stage(BufferId b) {
  staging_.push_back(InitialContents(graph_->buffer(b)));
  return staging_.back().data();
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
                                          StreamHandle stream) {
  BufferState& state = buffers_[b];
  Copy& dst = state.copies[where];
  if (state.latest < 0) return Materialize(b, where, stream_device, stream);
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
    const char* staged = Stage(b);
    const std::string name = absl::StrCat(spec.name, " upload");
    TracedWork upload{SpanKind::kCopy, TraceTrackKind::kHostToDevice, where,
                      name};
    upload.bytes = spec.size_bytes;
    span = tracer->Begin(upload, stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyHostToDevice(copy.ptr, staged, spec.size_bytes, stream));
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
  for (BufferState& state : buffers_) {
    for (Copy& copy : state.copies) {
      if (copy.allocated) {
        MemoryPool* pool = options_.memory_pools[copy.ptr.device];
        (uncached ? pool->FreeUncached(copy.ptr) : pool->Free(copy.ptr))
            .IgnoreError();
      }
      copy.allocated = false;
    }
  }
  staging_.clear();
}

}  // namespace weft::runtime
