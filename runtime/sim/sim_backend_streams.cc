// SimBackend's streams and events: creating and destroying them, event
// records and waits, and stream synchronization (sim_backend.h).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

absl::StatusOr<StreamHandle> SimBackend::CreateStream(int device) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  Stream stream;
  stream.device = device;
  stream.queue = std::make_shared<SimStream>(
      absl::StrCat("device ", device, " stream ", handle), &clock_,
      &models_[device]->health(), pool_.get());
  streams_.emplace(handle, std::move(stream));
  return StreamHandle{handle};
}

absl::Status SimBackend::DestroyStream(StreamHandle handle) {
  std::shared_ptr<SimStream> queue;
  std::vector<std::shared_ptr<SimStream>> reap;
  bool own_thread = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(handle.value);
    if (it == streams_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown stream ", handle.value));
    }
    queue = std::move(it->second.queue);
    streams_.erase(it);
    streams_destroyed_.fetch_add(1, std::memory_order_release);
    // Streams destroyed from their own threads before: shut down here,
    // except one this thread runs now.
    for (auto r = retired_.begin(); r != retired_.end();) {
      if ((*r)->OnWorkerThread()) {
        ++r;
      } else {
        reap.push_back(std::move(*r));
        r = retired_.erase(r);
      }
    }
    // From its own host callback: waiting for its work would wait for this
    // very call.
    own_thread = queue->OnWorkerThread();
    if (own_thread) retired_.push_back(queue);
  }
  // Its errors were reported to its callbacks already.
  queue->Release();
  for (const std::shared_ptr<SimStream>& retired : reap) {
    retired->Synchronize().IgnoreError();
    retired->Shutdown();
  }
  if (own_thread) return absl::OkStatus();
  queue->Synchronize().IgnoreError();
  queue->Shutdown();
  return absl::OkStatus();
}

absl::StatusOr<EventHandle> SimBackend::CreateEvent(int device) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  Event event;
  event.device = device;
  events_.emplace(handle, std::move(event));
  return EventHandle{handle};
}

absl::Status SimBackend::DestroyEvent(EventHandle handle) {
  Event removed;
  {
    absl::MutexLock lock(&mu_);
    auto it = events_.find(handle.value);
    if (it == events_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown event ", handle.value));
    }
    removed = std::move(it->second);
    events_.erase(it);
  }
  // `removed` may hold the last reference to a destroyed stream; it is
  // released here, outside mu_.
  return absl::OkStatus();
}

absl::Status SimBackend::RecordEvent(EventHandle event_handle,
                                     StreamHandle stream_handle) {
  std::shared_ptr<SimStream> previous;
  absl::MutexLock lock(&mu_);
  auto event = events_.find(event_handle.value);
  if (event == events_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown event ", event_handle.value));
  }
  auto stream = streams_.find(stream_handle.value);
  if (stream == streams_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown stream ", stream_handle.value));
  }
  if (event->second.device != stream->second.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("event ", event_handle.value, " belongs to device ",
                     event->second.device, " but stream ", stream_handle.value,
                     " to device ", stream->second.device));
  }
  // The mark is taken under the stream's own lock: SimStream never calls
  // back into the backend, so this nests safely.
  event->second.mark = stream->second.queue->Record();
  if (event->second.stream != stream->second.queue) {
    previous = std::move(event->second.stream);
    event->second.stream = stream->second.queue;
  }
  return absl::OkStatus();
}

absl::Status SimBackend::StreamWaitEvent(StreamHandle stream_handle,
                                         EventHandle event_handle) {
  std::shared_ptr<SimStream> waiter;
  std::shared_ptr<SimStream> target;
  std::shared_ptr<const SimStream::Mark> mark;
  {
    absl::MutexLock lock(&mu_);  // one lookup of both, on a hot path
    auto stream = streams_.find(stream_handle.value);
    if (stream == streams_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown stream ", stream_handle.value));
    }
    auto event = events_.find(event_handle.value);
    if (event == events_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown event ", event_handle.value));
    }
    waiter = stream->second.queue;
    target = event->second.stream;
    mark = event->second.mark;
  }
  // Never recorded (a no-op, as in CUDA) or recorded on this very stream
  // (FIFO order suffices). Otherwise a wait item, even when the work has
  // completed already: it still moves the stream's virtual time.
  if (target == nullptr || target == waiter) return absl::OkStatus();
  MaybeHold(waiter);
  waiter->EnqueueWait(std::move(target), std::move(mark));
  return absl::OkStatus();
}

absl::StatusOr<bool> SimBackend::QueryEvent(EventHandle event_handle) {
  WEFT_ASSIGN_OR_RETURN(Event event, FindEvent(event_handle));
  const std::shared_ptr<SimStream>& target = event.stream;
  const std::shared_ptr<const SimStream::Mark>& mark = event.mark;
  return target == nullptr || target->MarkTime(*mark).has_value();
}

absl::StatusOr<double> SimBackend::EventTimeUs(EventHandle event_handle) {
  WEFT_ASSIGN_OR_RETURN(Event event, FindEvent(event_handle));
  const std::shared_ptr<SimStream>& target = event.stream;
  const std::shared_ptr<const SimStream::Mark>& mark = event.mark;
  if (target == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("event ", event_handle.value, " was never recorded"));
  }
  std::optional<double> time = target->MarkTime(*mark);
  if (!time.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("event ", event_handle.value, " has not completed"));
  }
  return *time;
}

absl::StatusOr<std::shared_ptr<const DeviceStamp>> SimBackend::Stamp(
    StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  return std::shared_ptr<const DeviceStamp>(stream->queue->Record());
}

absl::Status SimBackend::SynchronizeStream(StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  if (stream.queue->OnWorkerThread()) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", stream_handle.value,
                     " cannot be synchronized from its own thread"));
  }
  stream.queue->Release();  // nothing held may wait on this very thread
  return stream.queue->Synchronize();
}

}  // namespace weft::runtime
