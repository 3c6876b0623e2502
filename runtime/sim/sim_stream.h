// One simulated stream: a FIFO queue of work on the simulator's virtual
// clock (sim_timeline.h), drained by the workers of a SimWorkerPool.
//
// Items run strictly in enqueue order, one at a time, and get sequence
// numbers 1, 2, ...; `completed()` counts the items that have finished, so
// "item s has completed" is `completed() >= s`. Kinds of item:
//   work      returns a Status and its virtual end time (from its ready time:
//             the end of the previous item, and on a paced clock no earlier
//             than the virtual time at which it was enqueued); work that
//             cannot go on yet may park the stream (Timing::Park) and is
//             run again once woken;
//   callback  a host callback, told the first error of its error scope;
//   wait      lasts until another stream's mark has completed, and moves
//             this stream's virtual time up to the mark's;
//   gate      lasts until the host opens it, then the time the host says
//             its work took.
// On a paced clock an item completes no earlier in real time than its
// virtual end. Its virtual times do not depend on how long the host took
// to run it or the items before it: an item is ready at the end of the one
// before it or when it was enqueued, whichever is later, not when a worker
// got to it, so host time spent running work (copying bytes, computing a
// kernel's results) delays only when the work completes in real time. The
// one exception is a gate, whose host work is real: it ends no earlier
// than the (virtual) time at which the host opened it.
//
// Scheduling: a stream owns no thread. A stream with items to run is
// runnable and queued on its pool; a worker takes it and runs its items in
// order until it runs out, has run a slice of them (then it queues again
// behind the other runnable streams), or parks. Nothing the simulator
// waits for blocks a worker: a wait whose mark has not completed, a gate
// not yet opened and work that parks leave the stream parked (no thread
// waits), and what they wait for wakes it (the target's completion,
// OpenGate, the work's own Waker), queuing it again; on a paced clock an
// item whose virtual end lies ahead parks the stream until that real time,
// on a timer of the pool. Host code that does block a worker (a callback
// synchronizing another stream, a kernel that waits for the host) is
// covered by the pool adding workers (sim_worker_pool.h), so no set of
// streams can starve each other of threads. A stream made without a pool gets
// one of its own, with one worker.
//
// Holding: while a stream holds (Hold, until Release), items enqueued on it
// wait without making the stream runnable, which then starts on the whole
// run at once; a long run is released early. Held items wait apart from the
// items the workers take, under a lock of their own, so that enqueueing
// them does not contend with a worker running the stream. The simulated
// backend holds the streams a thread enqueues on between
// Backend::BeginBatch and EndBatch.
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
// Interruption: AbortScope with `interrupt` also stops the scope's item in
// progress. On a paced clock an item that has run waits for its real-time
// end (pacing); an interrupted one completes at once instead, its virtual
// end cut to the time of the interruption, and the hook its work left
// (Timing::OnInterrupt) is told that time, so that whatever the work
// booked can be given back. An item still running on a worker when the
// interruption comes does not pace at all. The stream goes on with its
// next item at once; the rest of the scope is skipped as for any abort.
//
// Lifecycle: running -> stopped (Stop) -> shut down (Shutdown). Stopping
// drops the items not yet started (a parked one included) without running
// them (callbacks included) and wakes every waiter; shutting down also
// waits until no worker runs the stream any more.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_STREAM_H_
#define WEFT_RUNTIME_SIM_SIM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/sim/sim_timeline.h"
#include "runtime/sim/sim_worker_pool.h"

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

class SimStream : public SimRunnable {
 public:
  // Wakes a parked stream: safe from any thread, at any time (a wake that
  // finds the stream running makes it try its item again before parking;
  // one that finds it shut down does nothing). Spurious wakes are harmless:
  // a woken item checks again what it waits for.
  class Waker {
   public:
    void Wake() ABSL_LOCKS_EXCLUDED(mu_);

   private:
    friend class SimStream;
    explicit Waker(SimStream* stream) : stream_(stream) {}
    absl::Mutex mu_;
    SimStream* stream_ ABSL_GUARDED_BY(mu_);  // null once shut down
  };

  // Told the virtual time at which an interrupted item stopped (see
  // Interruption above). Called once at most, without the stream's locks.
  using InterruptHook = absl::AnyInvocable<void(double at_us)>;

  // What a work item knows and reports about its virtual time.
  class Timing {
   public:
    // `stream` (null in tests of work alone) runs the item, of `scope`.
    Timing(double ready, const std::shared_ptr<Waker>* waker,
           const SimStream* stream = nullptr, uint64_t scope = 0)
        : ready_us(ready),
          end_us(ready),
          waker_(waker),
          stream_(stream),
          scope_(scope) {}
    double ready_us = 0;  // in: the earliest it can start
    double end_us = 0;    // out: when it finished; ready_us unless set
    // Parks the stream instead of completing the item: its status is
    // ignored and it runs again (with the same ready_us) once the returned
    // waker is woken. Whatever the work waits for must be able to wake it.
    std::shared_ptr<Waker> Park() {
      parked_ = true;
      return *waker_;
    }
    bool parked() const { return parked_; }
    // For an item that completes: `hook` runs if the item is interrupted
    // before its real-time end (paced clocks only).
    void OnInterrupt(InterruptHook hook) { interrupt_ = std::move(hook); }
    InterruptHook TakeInterruptHook() { return std::move(interrupt_); }
    // The first error of the item's scope (or the device's) so far: for
    // work made of steps, which stops between them once its scope has
    // failed or been aborted, as the items after it are skipped.
    absl::Status scope_error() const {
      return stream_ == nullptr ? absl::OkStatus()
                                : stream_->scope_error(scope_);
    }

   private:
    const std::shared_ptr<Waker>* waker_;
    const SimStream* stream_;
    uint64_t scope_;
    bool parked_ = false;
    InterruptHook interrupt_;
  };
  // Move-only, so that work can own what it needs (and give it back when
  // destroyed, run or dropped).
  using Work = absl::AnyInvocable<absl::Status(Timing& timing)>;

  // A capture of the work enqueued on a stream up to `seq`: the stream
  // sets its time, under the stream's lock, once that work has completed.
  // Read through the stream, or by any thread as a DeviceStamp.
  class Mark final : public DeviceStamp {
   public:
    std::optional<double> TimeUs() const override {
      if (!done_.load(std::memory_order_acquire)) return std::nullopt;
      return time_us_;
    }
    uint64_t seq() const { return seq_; }

   private:
    friend class SimStream;
    void Complete(double time_us) {
      time_us_ = time_us;
      done_.store(true, std::memory_order_release);
    }
    uint64_t seq_ = 0;
    double time_us_ = 0;  // when the captured work completed, once done_
    std::atomic<bool> done_{false};
  };

  // A host gate: opened once by the host. Guarded by the stream's lock.
  struct Gate {
    bool open = false;
    absl::Status status;
    double busy_us = 0;
    double opened_us = 0;  // the virtual time OpenGate was called at
  };

  // `name` labels error messages. `clock` and `health` are not owned and
  // must outlive the stream; `health` may be null (always healthy). `pool`
  // (not owned, outlives the stream) runs the stream; null gives the stream
  // a pool of its own with one worker.
  SimStream(std::string name, const SimClock* clock,
            const SimDeviceHealth* health = nullptr,
            SimWorkerPool* pool = nullptr);
  ~SimStream();  // Shutdown()

  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  const std::string& name() const { return name_; }

  // Appends an item and returns its sequence number. After Stop the item
  // is dropped and the returned number never completes.
  uint64_t Enqueue(Work work) ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  uint64_t EnqueueCallback(HostCallback callback)
      ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // Waits for `mark` of `target` (which may not be this stream).
  uint64_t EnqueueWait(std::shared_ptr<SimStream> target,
                       std::shared_ptr<const Mark> mark)
      ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  uint64_t EnqueueGate(std::shared_ptr<Gate> gate)
      ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // Opens a gate enqueued on this stream. FAILED_PRECONDITION when it is
  // open already.
  absl::Status OpenGate(Gate& gate, absl::Status status, double busy_us)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Items enqueued from now on belong to error scope `scope`.
  void SetScope(uint64_t scope) ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // The scope items enqueued now belong to.
  uint64_t scope() const ABSL_LOCKS_EXCLUDED(push_mu_, mu_);

  // Items of `scope` not yet started are skipped with `status` (non-OK),
  // unless the scope has failed already. With `interrupt`, the scope's
  // item in progress stops too, now and whenever one of its items runs
  // until ForgetScope (see Interruption above).
  void AbortScope(uint64_t scope, absl::Status status, bool interrupt = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the recorded error of `scope` (and its interruption).
  void ForgetScope(uint64_t scope) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts holding for the holder `token` (non-zero); false when this
  // holder holds it already.
  bool Hold(uint64_t token) ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // Stops holding and lets the workers start on everything enqueued.
  void Release() ABSL_LOCKS_EXCLUDED(push_mu_, mu_);

  // A mark of everything enqueued so far.
  std::shared_ptr<Mark> Record() ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // The mark's completion time, or nullopt while it has not completed
  // (Mark::TimeUs; takes no lock).
  std::optional<double> MarkTime(const Mark& mark) const;

  // Sequence number of the last item enqueued (0 when none).
  uint64_t enqueued() const ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  uint64_t completed() const ABSL_LOCKS_EXCLUDED(mu_);
  bool IsComplete(uint64_t seq) const ABSL_LOCKS_EXCLUDED(mu_);
  // True when every enqueued item has completed.
  bool Idle() const ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // The first error of the current scope (or the device's), or OK.
  absl::Status error() const ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // The first error of `scope` (or the device's), or OK.
  absl::Status scope_error(uint64_t scope) const ABSL_LOCKS_EXCLUDED(mu_);
  // Virtual time at which the last completed item ended.
  double last_end_us() const ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until item `seq` has completed (true) or the stream is stopped
  // first (false).
  bool AwaitComplete(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the items enqueued before the call have completed; returns
  // the current scope's first error, or ABORTED when stopped first.
  absl::Status Synchronize() ABSL_LOCKS_EXCLUDED(push_mu_, mu_);

  // True on a worker while it runs one of this stream's items (there, the
  // calls that wait for this stream would wait for themselves).
  bool OnWorkerThread() const;

  // Drops pending items (the parked one included), stops the stream after
  // the item being run and wakes every waiter. Does not wait. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // Stop(), then waits until no worker runs the stream (and, for a stream
  // with a pool of its own, joins it). Idempotent. REQUIRES: not
  // OnWorkerThread().
  void Shutdown() ABSL_LOCKS_EXCLUDED(push_mu_, mu_, shutdown_mu_);

  // Runs a slice of the stream's items; called by a worker of its pool.
  void RunSlice() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct WaitFor {
    std::shared_ptr<SimStream> target;
    std::shared_ptr<const Mark> mark;
  };
  // Kept small: items are moved in and out of the queue.
  struct Item {
    uint64_t scope = 0;
    std::variant<Work, HostCallback, WaitFor, std::shared_ptr<Gate>> what;
    // Paced: the virtual time at which the host enqueued it, the earliest
    // it can start (0 unpaced).
    double enqueued_us = 0;
  };
  // runnable: queued on the pool; running: a worker has it; parked: its
  // next item waits to be woken; pacing: its last item completes at a
  // real-time deadline.
  //   idle -> runnable -> running -> idle | runnable | parked | pacing
  //   parked -> runnable (woken), pacing -> runnable (deadline)
  enum class State { kIdle, kRunnable, kRunning, kParked, kPacing };
  enum class Outcome { kDone, kParked };
  // What an item left to record when it completes.
  struct Done {
    absl::Status status;
    uint64_t scope = 0;
    double end_us = 0;
    // Paced items: what to tell when interrupted while pacing.
    InterruptHook interrupt;
  };
  using WakeList = std::vector<std::shared_ptr<Waker>>;

  uint64_t Push(Item item) ABSL_LOCKS_EXCLUDED(push_mu_, mu_);
  // Moves the held items to the workers' queue.
  void ReleaseHeldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(push_mu_, mu_);
  // Queues the stream when it has items to run and nothing runs it.
  void MaybeScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A wake: see Waker.
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs one item; kParked leaves it to run again.
  // A completed work item leaves its interrupt hook in `interrupt`.
  Outcome Run(Item& item, const absl::Status& scope_error, double ready,
              double& end, absl::Status& status, InterruptHook& interrupt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether item `seq` has completed (kDone), or the stream stopped first
  // (kDone, false); otherwise registers `waker` to be woken at either.
  Outcome AwaitOrRegister(uint64_t seq, const std::shared_ptr<Waker>& waker,
                          bool& completed) ABSL_LOCKS_EXCLUDED(mu_);
  // Records a completed item; the wakers it releases go to `wake`.
  void CompleteLocked(Done done, WakeList& wake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ScopeError(uint64_t scope) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void WakeAll(WakeList& wake);

  // Constant after construction.
  const std::string name_;
  const SimClock* const clock_;
  const SimDeviceHealth* const health_;
  // Reset by Shutdown, after which pool_ is not used.
  std::unique_ptr<SimWorkerPool> own_pool_;
  SimWorkerPool* const pool_;
  const std::shared_ptr<Waker> waker_;

  // Most items held back before the stream is made runnable anyway.
  static constexpr size_t kMaxHeld = 64;
  // Items each of the two queues has room for from the start.
  static constexpr size_t kInitialItems = 16;
  // Most items a worker runs before it lets the other streams go first.
  static constexpr int kSliceItems = 256;

  // The enqueueing side and the workers' side each start a cache line of
  // their own, so that a thread enqueueing does not share lines with a
  // worker running the stream.
  //
  // Enqueueing: taken by the threads that enqueue (and by the calls that
  // need what was enqueued), never by the workers, and before mu_.
  alignas(64) mutable absl::Mutex push_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Items enqueued while the stream holds, not yet the workers' to take,
  // and the marks recorded after them (which cannot have completed).
  std::vector<Item> held_ ABSL_GUARDED_BY(push_mu_);
  std::vector<std::shared_ptr<Mark>> held_marks_ ABSL_GUARDED_BY(push_mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(push_mu_) = 0;
  uint64_t scope_ ABSL_GUARDED_BY(push_mu_) = 0;
  // Stop was called: later items are dropped.
  bool push_stopped_ ABSL_GUARDED_BY(push_mu_) = false;
  // The holder holding, 0 for none. Written under push_mu_; read without
  // it by Hold's fast path.
  std::atomic<uint64_t> hold_token_{0};

  // The workers' side.
  alignas(64) mutable absl::Mutex mu_;
  // Items released and not yet started: [head_, end) are the workers' to
  // take.
  std::vector<Item> items_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  // The item that parked the stream, to run again first, and the ready
  // time it had when it first ran (it keeps it, paced or not).
  std::optional<Item> parked_ ABSL_GUARDED_BY(mu_);
  double parked_ready_us_ ABSL_GUARDED_BY(mu_) = 0;
  // The item waiting for its real-time end on a paced clock.
  std::optional<Done> pacing_ ABSL_GUARDED_BY(mu_);
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  // A wake came while the stream was running.
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  double last_end_us_ ABSL_GUARDED_BY(mu_) = 0;
  // First error of each scope that failed.
  absl::flat_hash_map<uint64_t, absl::Status> scope_errors_
      ABSL_GUARDED_BY(mu_);
  // Scopes aborted with interruption: their items stop instead of pacing.
  absl::flat_hash_set<uint64_t> interrupted_scopes_ ABSL_GUARDED_BY(mu_);
  // Marks not yet completed, in sequence order.
  std::deque<std::shared_ptr<Mark>> pending_marks_ ABSL_GUARDED_BY(mu_);
  // Parked streams waiting for an item of this one, by its sequence number.
  std::multimap<uint64_t, std::shared_ptr<Waker>> waiters_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // Serializes Shutdown.
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_STREAM_H_
