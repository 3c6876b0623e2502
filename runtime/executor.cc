// The executor: one turn at a time driving every job (see job.h).
//
// Start validates the plan on the caller's thread. Everything a job does
// afterwards runs as a task in a turn: issuing, and the continuations that
// backend host callbacks post when device work completes. Whichever thread
// takes the turn runs the tasks in the order they were posted:
//   - A completion (a node done, a fence, a host op's end) is handled on the
//     thread that reports it (a simulator worker, the CUDA callback thread,
//     a host worker) when no turn runs: that thread takes the turn at once,
//     with the tasks posted before it, instead of waking the scheduling
//     thread and waiting for it to get a core.
//   - Otherwise the task waits for the scheduling thread, which runs turns
//     of whatever was posted (a completion that found a turn running, a
//     job started beside others, a cancel).
//   - When no other job exists, no turn runs and the scheduling thread has
//     slept a while (kIdleNs), Start's caller takes the turn itself and begins
//     its job at once, without waking the scheduling thread (one thread hop
//     less before a job's first work reaches the device).
// No thread ever blocks on a device. Each turn (a batch of tasks) is a
// Backend batch: the work it enqueues starts when the turn ends, one wakeup
// per stream instead of one per enqueue.
#include "runtime/executor.h"

#include <pthread.h>

#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "runtime/event_pool.h"
#include "runtime/host_pool.h"
#include "runtime/job.h"
#include "runtime/memory_pool.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/plan_check.h"
#include "runtime/stream_pool.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

// How long the scheduling thread must have had nothing to do before Start
// begins a job on its caller instead: a thread that has slept that long
// wakes slowly (tens of microseconds on a virtual machine's idle core),
// while under a stream of jobs the scheduling thread begins each in the
// turn that handles the others' completions, one thread taking turns.
constexpr int64_t kIdleNs = 200'000;

class StreamExecutorImpl final : public Executor {
 public:
  explicit StreamExecutorImpl(Options options);
  // Cancels the jobs still running, waits for their on_done and for the
  // device to finish the work of abandoned ones (Executor::Cancel; on a
  // backend that cannot interrupt work, as long as that work runs), then
  // stops the scheduling thread. Must not be called from a job callback.
  ~StreamExecutorImpl() override;

  using Executor::Start;
  absl::StatusOr<uint64_t> Start(CheckedPlan plan, JobCallbacks callbacks,
                                 const JobOptions& options) override
      ABSL_LOCKS_EXCLUDED(mu_, turn_mu_);
  void Cancel(uint64_t run) override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<DeviceLoad> Load() const override;
  int device_count() const override { return options_.backend->device_count(); }

 private:
  // A unit of work for the scheduling thread: start `job`, report node
  // `index` of job `id` done with `status` (the common case, kept free of
  // allocations), or run `fn` on the job `id`, if it still exists.
  struct Task {
    uint64_t id = 0;
    std::unique_ptr<Job> job;
    std::function<void(Job&)> fn;
    int index = -1;
    absl::Status status;
  };

  void Post(Task task) ABSL_LOCKS_EXCLUDED(mu_);
  // A completion from a backend host callback: where no turn runs, the
  // calling thread takes the turn and runs it at once, after the tasks
  // posted before it; otherwise Post.
  void PostCompletion(Task task) ABSL_LOCKS_EXCLUDED(mu_, turn_mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_, turn_mu_);
  void RunTask(Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(turn_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One turn: `tasks`, then `last` (if any), as one Backend batch (the
  // device work they enqueue starts when the turn ends).
  void RunTurn(absl::Span<Task> tasks, Task* last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(turn_mu_) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const Options options_;
  std::unique_ptr<CpuKernelTable> owned_host_kernels_;
  std::vector<std::unique_ptr<StreamPool>> stream_pools_;
  std::vector<std::unique_ptr<EventPool>> event_pools_;
  // Return their cached blocks to the backend when destroyed, after the
  // scheduling thread is joined (every job has then given its blocks back).
  std::vector<std::unique_ptr<MemoryPool>> memory_pools_;
  // Outlives the jobs: destroyed after the scheduling thread is joined.
  std::unique_ptr<HostPool> host_pool_;
  JobEnv env_;

  // Held by whichever thread runs a turn: the scheduling thread, or Start's
  // caller (see above). Taken before mu_.
  absl::Mutex turn_mu_;
  // Posting threads and the scheduling thread share these; they start a
  // cache line of their own, apart from what only the turn touches.
  alignas(64) mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(turn_mu_);
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Jobs started that still exist: on_done has not returned yet, or an
  // abandoned job's device work has not finished.
  absl::flat_hash_set<uint64_t> live_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // When the scheduling thread last finished a turn (absl's clock, ns; 0
  // before its first).
  int64_t last_turn_end_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;

  // Touched only by the turn.
  alignas(64) absl::flat_hash_map<uint64_t, std::unique_ptr<Job>> jobs_
      ABSL_GUARDED_BY(turn_mu_);
  // Handed to jobs (JobEnv), which run only in the turn.
  absl::flat_hash_map<uint64_t, uint64_t> stream_scopes_;
  uint64_t scope_switches_ = 0;
  // The job of the last task run, to skip the lookup for the next task of
  // the same job (the common case). Reset when a job ends.
  uint64_t last_id_ ABSL_GUARDED_BY(turn_mu_) = 0;
  Job* last_job_ ABSL_GUARDED_BY(turn_mu_) = nullptr;
  // The tasks a turn taken by a completion runs (capacity kept).
  std::vector<Task> here_ ABSL_GUARDED_BY(turn_mu_);

  // Started last, joined in the destructor.
  std::thread thread_;
};

StreamExecutorImpl::StreamExecutorImpl(Options options)
    : options_(std::move(options)) {
  Backend* backend = options_.backend;
  env_.backend = backend;
  env_.window = options_.max_in_flight_per_job;
  if (options_.host_kernels == nullptr) {
    owned_host_kernels_ =
        std::make_unique<CpuKernelTable>(CpuKernelTable::WithBuiltins());
    env_.host_kernels = owned_host_kernels_.get();
  } else {
    env_.host_kernels = options_.host_kernels;
  }
  host_pool_ = std::make_unique<HostPool>(options_.host_threads);
  env_.host_pool = host_pool_.get();
  env_.place_buffers = options_.place_buffers;
  env_.trace_max_spans = options_.trace_max_spans;
  env_.host_gates = backend->supports_host_gates();
  env_.device_clock = backend->has_device_clock();
  env_.interrupts_work = backend->interrupts_aborted_work();
  env_.stream_scopes = &stream_scopes_;
  env_.scope_switches = &scope_switches_;
  for (int d = 0; d < backend->device_count(); ++d) {
    stream_pools_.push_back(std::make_unique<StreamPool>(
        backend, d, options_.max_streams_per_device));
    event_pools_.push_back(std::make_unique<EventPool>(backend, d));
    MemoryPool::Options memory_options;
    memory_options.max_cached_bytes = options_.memory_pool_max_cached_bytes;
    memory_pools_.push_back(
        std::make_unique<MemoryPool>(backend, d, memory_options));
    env_.stream_pools.push_back(stream_pools_.back().get());
    env_.event_pools.push_back(event_pools_.back().get());
    env_.memory_pools.push_back(memory_pools_.back().get());
  }
  env_.post = [this](uint64_t id, std::function<void(Job&)> fn) {
    Post(Task{id, nullptr, std::move(fn), -1, absl::OkStatus()});
  };
  env_.node_done = [this](uint64_t id, int index, absl::Status status) {
    PostCompletion(Task{id, nullptr, nullptr, index, std::move(status)});
  };
  env_.post_completion = [this](uint64_t id, std::function<void(Job&)> fn) {
    PostCompletion(Task{id, nullptr, std::move(fn), -1, absl::OkStatus()});
  };
  // Nested jobs (control nodes' bodies) live as jobs of their own: the
  // destructor waits for them like for any other.
  env_.reserve_id = [this]() {
    absl::MutexLock lock(&mu_);
    const uint64_t id = next_id_++;
    live_.insert(id);
    return id;
  };
  env_.start = [this](uint64_t id, std::unique_ptr<Job> job) {
    Post(Task{id, std::move(job), nullptr, -1, absl::OkStatus()});
  };
  thread_ = std::thread([this] { Loop(); });
  // Named for top, perf and /proc (Linux: at most 15 characters).
  pthread_setname_np(thread_.native_handle(), "weft-scheduler");
}

StreamExecutorImpl::~StreamExecutorImpl() {
  std::vector<uint64_t> running;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    running.assign(live_.begin(), live_.end());
  }
  for (uint64_t id : running) Cancel(id);
  {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return live_.empty();
    };
    mu_.Await(absl::Condition(&drained));
    quit_ = true;
  }
  thread_.join();
  // A turn a completion took may still be ending on its thread.
  absl::MutexLock turn(&turn_mu_);
}

absl::StatusOr<uint64_t> StreamExecutorImpl::Start(CheckedPlan plan,
                                                   JobCallbacks callbacks,
                                                   const JobOptions& options) {
  if (!callbacks.on_done) {
    return absl::InvalidArgumentError("callbacks.on_done is required");
  }
  if (plan.num_devices() != device_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan was checked for ", plan.num_devices(),
                     " devices; the executor has ", device_count()));
  }
  uint64_t id = 0;
  bool alone = false;  // no other job exists and no task waits
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      return absl::FailedPreconditionError("executor is shutting down");
    }
    id = next_id_++;
    alone = live_.empty() && tasks_.empty() &&
            absl::GetCurrentTimeNanos() - last_turn_end_ns_ >= kIdleNs;
    live_.insert(id);
  }
  auto job = std::make_unique<Job>(id, &env_, plan.graph(), plan.plan(),
                                   std::move(callbacks));
  const LaunchMode mode = options.launch_mode == LaunchMode::kDefault
                              ? options_.launch_mode
                              : options.launch_mode;
  const Backend& backend = *options_.backend;
  job->set_control_mode(options.control_mode);
  job->set_device_graphs(
      backend.supports_device_graphs() &&
      (mode == LaunchMode::kDeviceGraphs ||
       (mode == LaunchMode::kAuto && backend.prefers_device_graphs())));
  Task task{id, std::move(job), nullptr, -1, absl::OkStatus()};
  // Alone, with no turn running (and this thread not inside one, as a job
  // callback would be): begin the job here. Beside other jobs the
  // scheduling thread begins it, in the turn that handles their
  // completions, rather than two threads taking turns.
  if (alone && turn_mu_.TryLock()) {
    RunTurn({}, &task);
    turn_mu_.Unlock();
    return id;
  }
  Post(std::move(task));
  return id;
}

void StreamExecutorImpl::Cancel(uint64_t run) {
  Post(
      Task{run, nullptr, [](Job& job) { job.Cancel(); }, -1, absl::OkStatus()});
}

std::vector<DeviceLoad> StreamExecutorImpl::Load() const {
  std::vector<DeviceLoad> load;
  load.reserve(stream_pools_.size());
  for (size_t d = 0; d < stream_pools_.size(); ++d) {
    load.push_back(
        DeviceLoad{stream_pools_[d]->busy(), stream_pools_[d]->total(),
                   memory_pools_[d]->stats(), stream_pools_[d]->fenced()});
  }
  return load;
}

void StreamExecutorImpl::Post(Task task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void StreamExecutorImpl::PostCompletion(Task task) {
  if (!turn_mu_.TryLock()) {
    Post(std::move(task));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    here_.swap(tasks_);
  }
  RunTurn(absl::MakeSpan(here_), &task);
  here_.clear();
  turn_mu_.Unlock();
}

void StreamExecutorImpl::Loop() {
  std::vector<Task> batch;
  for (bool turned = false;; turned = true) {
    {
      absl::MutexLock lock(&mu_);
      if (turned) last_turn_end_ns_ = absl::GetCurrentTimeNanos();
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !tasks_.empty() || quit_;
      };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // quit_ and nothing left
    }
    // The tasks are taken in the turn, so that they run in the order
    // posted whichever thread takes the next turn.
    absl::MutexLock turn(&turn_mu_);
    {
      absl::MutexLock lock(&mu_);
      batch.swap(tasks_);  // both keep their capacity
    }
    if (batch.empty()) continue;
    RunTurn(absl::MakeSpan(batch), nullptr);
    batch.clear();
  }
}

void StreamExecutorImpl::RunTurn(absl::Span<Task> tasks, Task* last) {
  options_.backend->BeginBatch();
  for (Task& task : tasks) RunTask(task);
  if (last != nullptr) RunTask(*last);
  options_.backend->EndBatch();
}

void StreamExecutorImpl::RunTask(Task& task) {
  Job* job = nullptr;
  if (task.job != nullptr) {
    job = task.job.get();
    jobs_.emplace(task.id, std::move(task.job));
    job->Begin();
  } else {
    if (task.id == last_id_) {
      job = last_job_;
    } else {
      auto it = jobs_.find(task.id);
      if (it == jobs_.end()) return;  // finished, or never existed
      job = it->second.get();
      last_id_ = task.id;
      last_job_ = job;
    }
    if (task.fn) {
      task.fn(*job);
    } else {
      job->NodeDone(task.index, std::move(task.status));
    }
  }
  if (job->done()) {
    if (last_id_ == task.id) {
      last_id_ = 0;
      last_job_ = nullptr;
    }
    jobs_.erase(task.id);
    absl::MutexLock lock(&mu_);
    live_.erase(task.id);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(Options options) {
  if (options.backend == nullptr) {
    return absl::InvalidArgumentError("Executor::Options.backend is required");
  }
  if (options.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_streams_per_device must be >= 1, got ",
                     options.max_streams_per_device));
  }
  if (options.max_in_flight_per_job < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_in_flight_per_job must be >= 1, got ",
                     options.max_in_flight_per_job));
  }
  if (options.host_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_threads must be >= 0, got ", options.host_threads));
  }
  return std::unique_ptr<Executor>(new StreamExecutorImpl(std::move(options)));
}

}  // namespace weft::runtime
