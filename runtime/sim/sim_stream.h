// One simulated stream: a FIFO queue of work drained by its own thread, on
// the simulator's virtual clock (sim_timeline.h).
//
// Items run strictly in enqueue order, one at a time, and get sequence
// numbers 1, 2, ...; `completed()` counts the items that have finished, so
// "item s has completed" is `completed() >= s`. Kinds of item:
//   work      returns a Status and its virtual end time (from its ready time:
//             the end of the previous item, and on a paced clock no earlier
//             than now);
//   callback  a host callback, told the first error of its error scope;
//   wait      blocks until another stream's mark has completed, and moves
//             this stream's virtual time up to the mark's;
//   gate      blocks until the host opens it, then lasts the time the host
//             says its work took.
// On a paced clock an item completes no earlier in real time than its
// virtual end.
//
// Holding: while a stream holds (Hold, until Release), items enqueued on it
// wait without waking the worker, which then starts on the whole run at
// once; a long run is released early. The simulated backend holds the
// streams a thread enqueues on between Backend::BeginBatch and EndBatch.
//
// Marks capture "everything enqueued so far" (what simulated events record)
// and learn the virtual time at which that work completed.
//
// Errors stick to an error scope: every item belongs to the scope current
// when it was enqueued (SetScope; 0 initially). The first error of a scope
// skips that scope's later work items (reported with that error, as a CUDA
// stream with a sticky error would) and reaches its later callbacks; other
// scopes carry on. A failure also flows along waits: a wait on a stream
// whose same scope has failed fails the waiter's scope too, so work that
// depends on failed work is skipped rather than run on garbage. When the
// device's health turns bad (a lost device), every
// later work item fails with its error and every callback receives it.
// Sequence numbers still advance for skipped items, so nothing waiting on
// this stream hangs.
//
// Lifecycle: running -> stopped (Stop) -> joined (Shutdown). Stopping drops
// the items not yet started without running them (callbacks included) and
// wakes every waiter.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_STREAM_H_
#define WEFT_RUNTIME_SIM_SIM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/sim/sim_timeline.h"

namespace weft::runtime {

// Whether a simulated device still works. Thread-safe.
class SimDeviceHealth {
 public:
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // The error that work on a lost device fails with; OK while healthy.
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the device lost with `error` (not OK). The first loss sticks.
  void Lose(absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> lost_{false};
};

class SimStream {
 public:
  // What a work item knows and reports about its virtual time.
  struct Timing {
    double ready_us = 0;  // in: the earliest it can start
    double end_us = 0;    // out: when it finished; ready_us unless set
  };
  using Work = std::function<absl::Status(Timing& timing)>;

  // A capture of the work enqueued on a stream up to `seq`. Its fields are
  // guarded by the stream's lock; read them through the stream.
  struct Mark {
    uint64_t seq = 0;
    bool done = false;
    double time_us = 0;  // when the captured work completed, once done
  };

  // A host gate: opened once by the host. Guarded by the stream's lock.
  struct Gate {
    bool open = false;
    absl::Status status;
    double busy_us = 0;
  };

  // Starts the worker thread. `name` labels error messages. `clock` and
  // `health` are not owned and must outlive the stream; `health` may be
  // null (always healthy).
  SimStream(std::string name, const SimClock* clock,
            const SimDeviceHealth* health = nullptr);
  ~SimStream();  // Shutdown()

  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  const std::string& name() const { return name_; }

  // Appends an item and returns its sequence number. After Stop the item
  // is dropped and the returned number never completes.
  uint64_t Enqueue(Work work) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t EnqueueCallback(HostCallback callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for `mark` of `target` (which may not be this stream).
  uint64_t EnqueueWait(std::shared_ptr<SimStream> target,
                       std::shared_ptr<const Mark> mark)
      ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t EnqueueGate(std::shared_ptr<Gate> gate) ABSL_LOCKS_EXCLUDED(mu_);
  // Opens a gate enqueued on this stream. FAILED_PRECONDITION when it is
  // open already.
  absl::Status OpenGate(Gate& gate, absl::Status status, double busy_us)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Items enqueued from now on belong to error scope `scope`.
  void SetScope(uint64_t scope) ABSL_LOCKS_EXCLUDED(mu_);
  // The scope items enqueued now belong to.
  uint64_t scope() const ABSL_LOCKS_EXCLUDED(mu_);

  // Items of `scope` not yet started are skipped with `status` (non-OK),
  // unless the scope has failed already.
  void AbortScope(uint64_t scope, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the recorded error of `scope`.
  void ForgetScope(uint64_t scope) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts holding for the holder `token` (non-zero); false when this
  // holder holds it already.
  bool Hold(uint64_t token) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops holding and lets the worker start on everything enqueued.
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  // A mark of everything enqueued so far.
  std::shared_ptr<Mark> Record() ABSL_LOCKS_EXCLUDED(mu_);
  // The mark's completion time, or nullopt while it has not completed.
  std::optional<double> MarkTime(const Mark& mark) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sequence number of the last item enqueued (0 when none).
  uint64_t enqueued() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t completed() const ABSL_LOCKS_EXCLUDED(mu_);
  bool IsComplete(uint64_t seq) const ABSL_LOCKS_EXCLUDED(mu_);
  // True when every enqueued item has completed.
  bool Idle() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first error of the current scope (or the device's), or OK.
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first error of `scope` (or the device's), or OK.
  absl::Status scope_error(uint64_t scope) const ABSL_LOCKS_EXCLUDED(mu_);
  // Virtual time at which the last completed item ended.
  double last_end_us() const ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until item `seq` has completed (true) or the stream is stopped
  // first (false).
  bool AwaitComplete(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the items enqueued before the call have completed; returns
  // the current scope's first error, or ABORTED when stopped first.
  absl::Status Synchronize() ABSL_LOCKS_EXCLUDED(mu_);

  // True on this stream's worker thread.
  bool OnWorkerThread() const;

  // Asks the worker to stop after the item it is running, drops pending
  // items and wakes every waiter. Does not wait. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Stop(), then joins the worker. Idempotent. Must not run on the worker
  // thread.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_, join_mu_);

 private:
  struct WaitFor {
    std::shared_ptr<SimStream> target;
    std::shared_ptr<const Mark> mark;
  };
  // Kept small: items are moved in and out of the queue.
  struct Item {
    uint64_t scope = 0;
    std::variant<Work, HostCallback, WaitFor, std::shared_ptr<Gate>> what;
  };

  uint64_t Push(Item item) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs one item on the worker; returns its status and sets its end time.
  absl::Status Run(Item& item, const absl::Status& scope_error, double ready,
                   double& end) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (paced clock) until virtual time `us` has passed in real time.
  void PaceUntil(double us) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ScopeError(uint64_t scope) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string name_;
  const SimClock* const clock_;
  const SimDeviceHealth* const health_;

  // Most items held back before the worker is let in on them anyway.
  static constexpr size_t kMaxHeld = 64;

  mutable absl::Mutex mu_;
  // Items not yet started: [head_, released_) are the worker's to take,
  // [released_, end) are held back.
  std::vector<Item> items_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t released_ ABSL_GUARDED_BY(mu_) = 0;
  // The holder holding, 0 for none. Written under mu_; read without it
  // by Hold's fast path.
  std::atomic<uint64_t> hold_token_{0};
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  double last_end_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t scope_ ABSL_GUARDED_BY(mu_) = 0;
  // First error of each scope that failed.
  absl::flat_hash_map<uint64_t, absl::Status> scope_errors_
      ABSL_GUARDED_BY(mu_);
  // Marks not yet completed, in sequence order.
  std::deque<std::shared_ptr<Mark>> pending_marks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // Serializes Shutdown's join. The thread is started in the constructor
  // body, after every other member is initialized; worker_id_ is constant
  // from then on.
  absl::Mutex join_mu_;
  std::thread worker_ ABSL_GUARDED_BY(join_mu_);
  std::thread::id worker_id_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_STREAM_H_
