#include "server/job_manager.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/retry_info.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph_builder.h"
#include "server/devices.h"
#include "server/job_proto.h"
#include "server/metrics.h"
#include "testing/status_matchers.h"
#include "testing/wire_graphs.h"

namespace weft::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::AddChain;
using ::weft::testing::StatusIs;

// Launches of `spin` with this cost block until the fixture opens the gate
// (kHoldUs: the hold); launches with kFailUs fail.
constexpr double kGateUs = 12345;
constexpr double kHoldUs = 23456;
constexpr double kFailUs = 54321;

weft::v1::Graph ParseGraph(const std::string& text) {
  weft::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &graph))
      << text;
  return graph;
}

// x = 2; y = 3 * x + 1 (y starts as 1); y is the output.
weft::v1::Graph AxpyGraph() {
  return ParseGraph(R"pb(
    name: "axpy"
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 }
    buffers { name: "y" size_bytes: 64 dtype: FLOAT32 fill: 1 output: true }
    nodes {
      name: "fill_x"
      op: "fill"
      args { buffer { name: "x" access: WRITE } }
      args { f32: 2 }
    }
    nodes {
      name: "axpy"
      op: "axpy"
      args { f32: 3 }
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: READ_WRITE } }
    }
  )pb");
}

// A chain of `n` spin nodes of `us` microseconds each over one buffer.
weft::v1::Graph SpinChain(const std::string& name, int n, double us) {
  weft::v1::Graph g;
  g.set_name(name);
  weft::v1::Buffer* b = g.add_buffers();
  b->set_name("b");
  b->set_size_bytes(16);
  b->set_output(true);
  for (int i = 0; i < n; ++i) {
    weft::v1::Node* node = g.add_nodes();
    node->set_name(absl::StrCat("s", i));
    node->set_op("spin");
    weft::v1::BufferArg* arg = node->add_args()->mutable_buffer();
    arg->set_name("b");
    arg->set_access(weft::v1::READ_WRITE);
    node->mutable_cost()->set_estimated_us(us);
  }
  return g;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void TearDown() override {
    if (!gate_.HasBeenNotified()) gate_.Notify();
    if (!hold_.HasBeenNotified()) hold_.Notify();
    jobs_.reset();
    executor_.reset();
    backend_.reset();
  }

  // (Re)creates the manager with `options`; executor and metrics are filled.
  void Start(JobManager::Options options) {
    if (backend_ == nullptr) {
      runtime::SimBackend::Options sim;
      sim.num_devices = 2;
      sim.memory_bytes = 1 << 20;
      sim.launch_fault = [this](int, const runtime::KernelLaunch& launch) {
        if (launch.cost_us == kGateUs) gate_.WaitForNotification();
        if (launch.cost_us == kHoldUs) hold_.WaitForNotification();
        if (launch.cost_us == kFailUs) {
          return absl::DataLossError("injected fault");
        }
        return absl::OkStatus();
      };
      backend_ = *runtime::SimBackend::Create(sim);
      runtime::Executor::Options exec;
      exec.backend = backend_.get();
      auto executor = runtime::Executor::Create(exec);
      ASSERT_TRUE(executor.ok()) << executor.status();
      executor_ = *std::move(executor);
    }
    jobs_.reset();
    options.executor = executor_.get();
    options.metrics = &metrics_;
    auto jobs = JobManager::Create(std::move(options));
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = *std::move(jobs);
  }

  JobSpec Spec(const weft::v1::Graph& proto, int priority = 0,
               const std::string& request_id = "") {
    scheduler::GraphLimits limits;
    limits.num_devices = 2;
    absl::StatusOr<scheduler::Graph> graph =
        scheduler::BuildGraph(proto, limits);
    EXPECT_TRUE(graph.ok()) << graph.status();
    JobSpec spec;
    spec.graph = std::make_shared<const scheduler::Graph>(*std::move(graph));
    spec.planner_options.num_devices = 2;
    spec.priority = priority;
    spec.request_id = request_id;
    return spec;
  }

  std::string SubmitOk(const weft::v1::Graph& proto, int priority = 0) {
    absl::StatusOr<JobInfo> job = jobs_->Submit(Spec(proto, priority));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id : "";
  }

  JobInfo WaitTerminal(const std::string& id) {
    absl::StatusOr<JobInfo> job =
        jobs_->WaitUntilTerminal(id, absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : JobInfo();
  }

  // Follows the job's watch until it reaches `state`.
  void WaitForState(const std::string& id, JobState state) {
    auto watch = jobs_->Watch(id);
    ASSERT_TRUE(watch.ok()) << watch.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      WatchUpdate u = (*watch)->Next(deadline);
      if (u.job.state == state) return;
      ASSERT_FALSE(u.done) << "job ended "
                           << JobToProto(u.job).ShortDebugString();
    }
    FAIL() << "job " << id << " never reached " << state;
  }

  // Graph names of `ids` in the order the jobs started; all must succeed.
  std::vector<std::string> StartOrder(const std::vector<std::string>& ids) {
    std::vector<std::pair<int64_t, std::string>> starts;
    for (const std::string& id : ids) {
      JobInfo job = WaitTerminal(id);
      EXPECT_EQ(job.state, JobState::kSucceeded)
          << JobToProto(job).ShortDebugString();
      starts.emplace_back(absl::ToUnixNanos(*job.start_time), job.graph_name);
    }
    std::sort(starts.begin(), starts.end());
    std::vector<std::string> order;
    for (const auto& s : starts) order.push_back(s.second);
    return order;
  }

  std::string SubmitAs(const std::string& tenant, const weft::v1::Graph& proto,
                       int priority = 0) {
    JobSpec spec = Spec(proto, priority);
    spec.tenant = tenant;
    absl::StatusOr<JobInfo> job = jobs_->Submit(std::move(spec));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id : "";
  }

  std::string Scrape() {
    return prometheus::TextSerializer().Serialize(registry_.Collect());
  }

  absl::Notification gate_;
  absl::Notification hold_;
  prometheus::Registry registry_;
  Metrics metrics_{&registry_};
  std::unique_ptr<runtime::SimBackend> backend_;
  std::unique_ptr<runtime::Executor> executor_;
  std::unique_ptr<JobManager> jobs_;
};

TEST(JobStateTest, LegalTransitions) {
  EXPECT_TRUE(CheckTransition(JobState::kQueued, JobState::kRunning).ok());
  EXPECT_TRUE(CheckTransition(JobState::kQueued, JobState::kCancelled).ok());
  EXPECT_TRUE(CheckTransition(JobState::kRunning, JobState::kSucceeded).ok());
  EXPECT_TRUE(CheckTransition(JobState::kRunning, JobState::kFailed).ok());
  EXPECT_TRUE(CheckTransition(JobState::kRunning, JobState::kCancelled).ok());
}

TEST(JobStateTest, IllegalTransitionsAreFailedPrecondition) {
  const std::pair<JobState, JobState> illegal[] = {
      {JobState::kQueued, JobState::kSucceeded},
      {JobState::kRunning, JobState::kQueued},
      {JobState::kSucceeded, JobState::kRunning},
      {JobState::kSucceeded, JobState::kCancelled},
      {JobState::kFailed, JobState::kSucceeded},
      {JobState::kCancelled, JobState::kQueued},
  };
  for (const auto& [from, to] : illegal) {
    absl::Status s = CheckTransition(from, to);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                            HasSubstr(absl::StrCat(JobStateName(from), " -> ",
                                                   JobStateName(to)))));
  }
}

TEST_F(JobManagerTest, CreateRejectsBadOptions) {
  JobManager::Options options;
  options.executor = executor_.get();
  options.max_queued_jobs = 0;
  auto jobs = JobManager::Create(options);
  EXPECT_THAT(jobs.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("max_queued_jobs")));
  JobManager::Options no_executor;
  EXPECT_THAT(JobManager::Create(no_executor).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(JobManagerTest, RunsAJobToSucceededAndKeepsItsOutputs) {
  absl::StatusOr<JobInfo> submitted = jobs_->Submit(Spec(AxpyGraph()));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_THAT(submitted->id, ::testing::MatchesRegex("j-[0-9a-f]{16}"));
  EXPECT_EQ(submitted->state, JobState::kQueued);
  EXPECT_EQ(submitted->nodes_total, 2);
  EXPECT_EQ(submitted->graph_name, "axpy");
  EXPECT_THAT(submitted->output_buffers, ElementsAre("y"));

  JobInfo done = WaitTerminal(submitted->id);
  EXPECT_EQ(done.state, JobState::kSucceeded)
      << JobToProto(done).ShortDebugString();
  EXPECT_EQ(done.nodes_done, 2);
  EXPECT_TRUE(done.error.ok());
  EXPECT_GT(absl::ToUnixSeconds(done.create_time), 0);
  EXPECT_TRUE(done.start_time.has_value());
  EXPECT_TRUE(done.end_time.has_value());

  absl::StatusOr<OutputBuffer> y = jobs_->ReadOutput(done.id, "y");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype, scheduler::DType::kFloat32);
  ASSERT_EQ(y->data->size(), 64u);
  std::vector<float> values(16);
  std::memcpy(values.data(), y->data->ToString().data(), 64);
  for (float v : values) EXPECT_EQ(v, 7.0f);

  std::string text = Scrape();
  EXPECT_THAT(
      text, HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant=\"\"} 1"));
  EXPECT_THAT(text, HasSubstr("op=\"axpy\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_planning_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("weft_queue_wait_seconds_count 1"));
}

// Hands every job to `inner` and keeps the plan of the last one started.
class PlanRecordingExecutor final : public runtime::Executor {
 public:
  explicit PlanRecordingExecutor(runtime::Executor* inner) : inner_(inner) {}

  using runtime::Executor::Start;
  absl::StatusOr<uint64_t> Start(runtime::CheckedPlan plan,
                                 runtime::JobCallbacks callbacks,
                                 const runtime::JobOptions& options) override {
    {
      absl::MutexLock lock(&mu_);
      last_plan_ = plan.plan();
    }
    return inner_->Start(std::move(plan), std::move(callbacks), options);
  }
  void Cancel(uint64_t run) override { inner_->Cancel(run); }
  std::vector<runtime::DeviceLoad> Load() const override {
    return inner_->Load();
  }
  int device_count() const override { return inner_->device_count(); }

  std::shared_ptr<const scheduler::Plan> last_plan() const {
    absl::MutexLock lock(&mu_);
    return last_plan_;
  }

 private:
  runtime::Executor* const inner_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const scheduler::Plan> last_plan_ ABSL_GUARDED_BY(mu_);
};

TEST_F(JobManagerTest, JobsArePlannedWithoutReasonsOrSimulation) {
  PlanRecordingExecutor recording(executor_.get());
  JobManager::Options options;
  options.executor = &recording;
  options.metrics = &metrics_;
  auto jobs = JobManager::Create(std::move(options));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  // The submitter asks for the planner's defaults, reasons and estimates
  // included; a job needs neither.
  JobSpec spec = Spec(SpinChain("chain", 4, 5));
  ASSERT_TRUE(spec.planner_options.explain);
  ASSERT_TRUE(spec.planner_options.simulate);
  absl::StatusOr<JobInfo> submitted = (*jobs)->Submit(std::move(spec));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<JobInfo> done = (*jobs)->WaitUntilTerminal(
      submitted->id, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, JobState::kSucceeded)
      << JobToProto(*done).ShortDebugString();

  std::shared_ptr<const scheduler::Plan> plan = recording.last_plan();
  ASSERT_NE(plan, nullptr);
  ASSERT_EQ(plan->nodes.size(), 4u);
  EXPECT_THAT(plan->reasons, ::testing::IsEmpty());
  EXPECT_EQ(plan->estimated_makespan_us, 0);
  EXPECT_THAT(plan->estimates, ::testing::IsEmpty());
  // What the simulation does not need is still there.
  EXPECT_EQ(plan->critical_path_us, 20);
}

TEST_F(JobManagerTest, JobPlansHaveAMemoryPlanTheExecutorPlacesBy) {
  for (const bool plan_memory : {true, false}) {
    SCOPED_TRACE(plan_memory);
    PlanRecordingExecutor recording(executor_.get());
    JobManager::Options options;
    options.executor = &recording;
    options.metrics = &metrics_;
    options.plan_memory = plan_memory;
    auto jobs = JobManager::Create(std::move(options));
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    uint64_t arenas_before = 0;
    for (const runtime::DeviceLoad& d : executor_->Load()) {
      arenas_before += d.memory.arena_allocations;
    }
    absl::StatusOr<JobInfo> submitted = (*jobs)->Submit(Spec(AxpyGraph()));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    absl::StatusOr<JobInfo> done = (*jobs)->WaitUntilTerminal(
        submitted->id, absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state, JobState::kSucceeded)
        << JobToProto(*done).ShortDebugString();
    absl::StatusOr<OutputBuffer> y = (*jobs)->ReadOutput(done->id, "y");
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<float> values(16);
    std::memcpy(values.data(), y->data->ToString().data(), 64);
    for (float v : values) EXPECT_EQ(v, 7.0f);

    std::shared_ptr<const scheduler::Plan> plan = recording.last_plan();
    ASSERT_NE(plan, nullptr);
    uint64_t arenas = 0;
    for (const runtime::DeviceLoad& d : executor_->Load()) {
      arenas += d.memory.arena_allocations;
    }
    if (plan_memory) {
      EXPECT_THAT(plan->memory, ::testing::Not(::testing::IsEmpty()));
      EXPECT_EQ(plan->buffers.size(), 2u);
      EXPECT_GT(arenas, arenas_before);
    } else {
      EXPECT_THAT(plan->memory, ::testing::IsEmpty());
      EXPECT_EQ(arenas, arenas_before);
    }
  }
}

// Jobs of up to kMaxMemoryPlanNodes nodes get a memory plan, whether or
// not their buffers fit the devices one by one. A 40,000-node chain of
// 4 KiB buffers (160 MiB in all) runs on devices of 1 MiB; on devices of
// 1 GiB it runs too and holds its arenas, a few KiB, not 160 MiB.
TEST_F(JobManagerTest, LargeJobsArePlannedAndHoldTheirArenas) {
  constexpr int kNodes = 40000;
  static_assert(kNodes <= JobManager::kMaxMemoryPlanNodes);
  for (const int64_t device_memory : {int64_t{1} << 20, int64_t{1} << 30}) {
    SCOPED_TRACE(device_memory);
    JobSpec spec = Spec(AddChain(kNodes));
    spec.planner_options.device_memory_bytes = {device_memory, device_memory};
    absl::StatusOr<JobInfo> submitted = jobs_->Submit(std::move(spec));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    int64_t held = 0;
    for (const int64_t bytes : submitted->device_memory_bytes) held += bytes;
    EXPECT_GT(held, 0);
    EXPECT_LE(held, 64 << 10);
    const JobInfo done = WaitTerminal(submitted->id);
    ASSERT_EQ(done.state, JobState::kSucceeded)
        << JobToProto(done).ShortDebugString();
    absl::StatusOr<OutputBuffer> last =
        jobs_->ReadOutput(done.id, absl::StrCat("b", kNodes));
    ASSERT_TRUE(last.ok()) << last.status();
    std::vector<float> values(1024);
    std::memcpy(values.data(), last->data->ToString().data(), 4096);
    EXPECT_THAT(values, ::testing::Each(static_cast<float>(kNodes + 1)));
  }
}

// A job that could only run with memory reuse, where weftd plans none, is
// refused at Submit, naming the device and the bytes, rather than failing
// at its first allocation past the device's memory; it leaves no job.
TEST_F(JobManagerTest, JobsOverTheDevicesMemoryWithoutAMemoryPlanAreRefused) {
  struct Case {
    int nodes;
    bool plan_memory;
    const char* why;
  };
  for (const Case& c :
       {Case{JobManager::kMaxMemoryPlanNodes + 1, true,
             "for graphs of up to 65536 nodes, and this one has 65537"},
        Case{300, false, "--arena_placement=false"}}) {
    SCOPED_TRACE(c.nodes);
    JobManager::Options options;
    options.plan_memory = c.plan_memory;
    Start(std::move(options));
    JobSpec spec = Spec(AddChain(c.nodes));
    spec.planner_options.device_memory_bytes = {1 << 20, 1 << 20};
    absl::StatusOr<JobInfo> submitted = jobs_->Submit(std::move(spec));
    EXPECT_THAT(submitted.status(),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         AllOf(HasSubstr("bytes on device 0, above the "
                                         "memory budget of 1048576 bytes"),
                               HasSubstr(c.why))));
    EXPECT_THAT(jobs_->List(std::nullopt, 10), ::testing::IsEmpty());
  }
  // The same small graph within the devices' memory runs without a plan.
  JobManager::Options options;
  options.plan_memory = false;
  Start(std::move(options));
  JobSpec spec = Spec(AddChain(100));
  spec.planner_options.device_memory_bytes = {1 << 20, 1 << 20};
  absl::StatusOr<JobInfo> submitted = jobs_->Submit(std::move(spec));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(WaitTerminal(submitted->id).state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, ReadOutputErrors) {
  std::string id = SubmitOk(AxpyGraph());
  WaitTerminal(id);
  absl::StatusOr<OutputBuffer> x = jobs_->ReadOutput(id, "x");
  EXPECT_THAT(x.status(), StatusIs(absl::StatusCode::kNotFound,
                                   HasSubstr("no output buffer 'x'")));
  absl::StatusOr<OutputBuffer> unknown = jobs_->ReadOutput("j-nope", "y");
  EXPECT_THAT(unknown.status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("j-nope")));

  std::string gated = SubmitOk(SpinChain("gated", 1, kGateUs));
  absl::StatusOr<OutputBuffer> early = jobs_->ReadOutput(gated, "b");
  EXPECT_THAT(early.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("SUCCEEDED")));
  gate_.Notify();
  EXPECT_EQ(WaitTerminal(gated).state, JobState::kSucceeded);
}

// The planned arenas of running jobs, as ListDevices and the metrics show
// them.
uint64_t ArenaBytes(const runtime::Backend& backend,
                    const runtime::Executor& executor) {
  uint64_t bytes = 0;
  for (const weft::v1::Device& d : DescribeDevices(backend, executor)) {
    bytes += d.memory_arena_bytes();
  }
  return bytes;
}

TEST_F(JobManagerTest, DevicesShowTheArenasOfRunningJobs) {
  EXPECT_EQ(ArenaBytes(*backend_, *executor_), 0u);
  std::string gated = SubmitOk(SpinChain("gated", 1, kGateUs));
  WaitForState(gated, JobState::kRunning);
  // The job takes its arena as the executor begins it, just after.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (ArenaBytes(*backend_, *executor_) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(ArenaBytes(*backend_, *executor_), 256u);  // 16 bytes, aligned
  gate_.Notify();
  EXPECT_EQ(WaitTerminal(gated).state, JobState::kSucceeded);
  EXPECT_EQ(ArenaBytes(*backend_, *executor_), 0u);
}

// A chain like SpinChain's whose buffer has `bytes` and whose nodes are
// pinned to device 0.
weft::v1::Graph PinnedSpinChain(const std::string& name, int n, double us,
                                int64_t bytes) {
  weft::v1::Graph g = SpinChain(name, n, us);
  g.mutable_buffers(0)->set_size_bytes(bytes);
  for (weft::v1::Node& node : *g.mutable_nodes()) node.set_device(0);
  return g;
}

TEST_F(JobManagerTest, AJobWaitsUntilItsBuffersFitBesideTheRunningJobs) {
  JobManager::Options options;
  options.device_memory_bytes = {1 << 20, 1 << 20};  // the backend's
  Start(options);
  std::string big1 = SubmitOk(PinnedSpinChain("big1", 1, kGateUs, 600 << 10));
  WaitForState(big1, JobState::kRunning);
  // Slots are free, but 600 KiB more does not fit in device 0's 1 MiB.
  std::string big2 = SubmitOk(PinnedSpinChain("big2", 1, 1, 600 << 10));
  absl::StatusOr<JobInfo> waiting = jobs_->Get(big2);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(waiting->device_memory_bytes.size(), 2u);
  EXPECT_EQ(waiting->queue_reason,
            absl::StrCat("waiting for device memory: it needs ",
                         waiting->device_memory_bytes[0],
                         " bytes on device 0, where running jobs hold ",
                         jobs_->ReservedBytes()[0], " of 1048576"));
  EXPECT_GE(waiting->device_memory_bytes[0], 600 << 10);
  EXPECT_EQ(waiting->device_memory_bytes[1], 0);
  // A small job does not overtake the one waiting for memory.
  std::string small = SubmitOk(PinnedSpinChain("small", 1, 1, 16));
  absl::StatusOr<JobInfo> behind = jobs_->Get(small);
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(
      behind->queue_reason,
      absl::StrCat("behind job ", big2, ", which waits for device memory"));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(jobs_->running(), 1);
  EXPECT_EQ(jobs_->queued(), 2);
  // big1's arena on device 0.
  std::vector<int64_t> reserved = jobs_->ReservedBytes();
  ASSERT_EQ(reserved.size(), 2u);
  EXPECT_GE(reserved[0], 600 << 10);
  EXPECT_LT(reserved[0], 601 << 10);
  EXPECT_EQ(reserved[1], 0);
  gate_.Notify();
  JobInfo first = WaitTerminal(big1);
  JobInfo second = WaitTerminal(big2);
  EXPECT_EQ(first.state, JobState::kSucceeded);
  EXPECT_EQ(second.state, JobState::kSucceeded);
  EXPECT_GE(*second.start_time, *first.end_time);
  EXPECT_THAT(StartOrder({big1, big2, small}),
              ElementsAre("big1", "big2", "small"));
  EXPECT_THAT(jobs_->ReservedBytes(), ElementsAre(0, 0));
}

// A chain like PinnedSpinChain's on `device`.
weft::v1::Graph SpinChainOn(const std::string& name, int device, double us,
                            int64_t bytes) {
  weft::v1::Graph g = PinnedSpinChain(name, 1, us, bytes);
  for (weft::v1::Node& node : *g.mutable_nodes()) node.set_device(device);
  return g;
}

// While one tenant's job, next to start, waits for memory on device 0,
// another tenant's job that needs none there starts beside it; one that
// needs some there waits behind it, as does the waiting tenant's own next
// job.
TEST_F(JobManagerTest, OtherTenantsJobsStartBesideAJobWaitingForMemory) {
  JobManager::Options options;
  options.device_memory_bytes = {1 << 20, 1 << 20};
  Start(options);
  const std::string big1 =
      SubmitAs("x", SpinChainOn("big1", 0, kGateUs, 600 << 10));
  WaitForState(big1, JobState::kRunning);
  const std::string big2 = SubmitAs("a", SpinChainOn("big2", 0, 1, 600 << 10));
  const std::string own = SubmitAs("a", SpinChainOn("own", 1, 1, 16));
  // Tenant b's job on device 1 runs to the end while big1 holds device 0.
  const std::string beside = SubmitAs("b", SpinChainOn("beside", 1, 1, 16));
  EXPECT_EQ(WaitTerminal(beside).state, JobState::kSucceeded);
  // Tenant c's job on device 0 would take memory big2 waits for.
  const std::string near = SubmitAs("c", SpinChainOn("near", 0, 1, 16));
  absl::SleepFor(absl::Milliseconds(50));
  for (const std::string& id : {big2, own, near}) {
    absl::StatusOr<JobInfo> job = jobs_->Get(id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, JobState::kQueued) << job->graph_name;
  }
  absl::StatusOr<JobInfo> behind = jobs_->Get(near);
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(
      behind->queue_reason,
      absl::StrCat("behind job ", big2, ", which waits for device memory"));
  gate_.Notify();
  // Then by tenant turns: c has run nothing, a runs big2.
  EXPECT_THAT(StartOrder({big1, beside, big2, own, near}),
              ElementsAre("big1", "beside", "big2", "near", "own"));
  EXPECT_THAT(jobs_->ReservedBytes(), ElementsAre(0, 0));
}

// No job starts beside a waiting one in the last running slot: that slot
// is the waiting job's.
TEST_F(JobManagerTest, NoJobStartsBesideAWaitingOneInTheLastSlot) {
  JobManager::Options options;
  options.device_memory_bytes = {1 << 20, 1 << 20};
  options.max_running_jobs = 3;
  Start(options);
  const std::string big1 =
      SubmitAs("x", SpinChainOn("big1", 0, kGateUs, 600 << 10));
  WaitForState(big1, JobState::kRunning);
  // big2 needs 600 KiB on device 0, where it does not fit, and nothing on
  // device 1: a tenant b job of 700 KiB on device 1 starts beside it.
  const std::string big2 = SubmitAs("a", SpinChainOn("big2", 0, 1, 600 << 10));
  const std::string wide =
      SubmitAs("b", SpinChainOn("wide", 1, kGateUs, 700 << 10));
  WaitForState(wide, JobState::kRunning);
  // With big1 and wide running, a third would take big2's slot.
  const std::string third = SubmitAs("c", SpinChainOn("third", 1, 1, 16));
  absl::SleepFor(absl::Milliseconds(50));
  absl::StatusOr<JobInfo> waiting = jobs_->Get(third);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state, JobState::kQueued);
  EXPECT_EQ(jobs_->running(), 2);
  gate_.Notify();
  EXPECT_EQ(WaitTerminal(big2).state, JobState::kSucceeded);
  EXPECT_EQ(WaitTerminal(third).state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, JobsThatFitTogetherRunTogether) {
  JobManager::Options options;
  options.device_memory_bytes = {1 << 20, 1 << 20};
  Start(options);
  std::string gated = SubmitOk(PinnedSpinChain("gated", 1, kGateUs, 400 << 10));
  WaitForState(gated, JobState::kRunning);
  // 400 + 400 KiB fit in 1 MiB: the second runs beside the first.
  std::string other = SubmitOk(PinnedSpinChain("other", 1, 1, 400 << 10));
  EXPECT_EQ(WaitTerminal(other).state, JobState::kSucceeded);
  gate_.Notify();
  EXPECT_EQ(WaitTerminal(gated).state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, GetUnknownJobIsNotFoundNamingTheId) {
  absl::StatusOr<JobInfo> job = jobs_->Get("j-0000000000000000");
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr("j-0000000000000000")));
  EXPECT_THAT(jobs_->Cancel("j-x").status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(jobs_->Watch("j-x").status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, HigherPriorityRunsFirstThenFifo) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string blocker = SubmitOk(SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  std::string low = SubmitOk(SpinChain("low", 1, 1), 0);
  std::string high1 = SubmitOk(SpinChain("high1", 1, 1), 5);
  std::string mid = SubmitOk(SpinChain("mid", 1, 1), 1);
  std::string high2 = SubmitOk(SpinChain("high2", 1, 1), 5);
  EXPECT_EQ(jobs_->queued(), 4);
  EXPECT_EQ(jobs_->running(), 1);
  absl::StatusOr<JobInfo> queued = jobs_->Get(low);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->queue_reason,
            "waiting for a running slot: 1 of 1 jobs run");
  absl::StatusOr<JobInfo> running = jobs_->Get(blocker);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->queue_reason, "");
  gate_.Notify();

  std::vector<std::pair<int64_t, std::string>> starts;
  for (const std::string& id : {low, high1, mid, high2}) {
    JobInfo job = WaitTerminal(id);
    EXPECT_EQ(job.state, JobState::kSucceeded);
    starts.emplace_back(absl::ToUnixNanos(*job.start_time), job.graph_name);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<std::string> order;
  for (const auto& s : starts) order.push_back(s.second);
  EXPECT_THAT(order, ElementsAre("high1", "high2", "mid", "low"));
}

TEST_F(JobManagerTest, FullQueueIsResourceExhausted) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  options.max_queued_jobs = 2;
  Start(options);
  std::string blocker = SubmitOk(SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  SubmitOk(SpinChain("a", 1, 1));
  SubmitOk(SpinChain("b", 1, 1));
  absl::StatusOr<JobInfo> rejected = jobs_->Submit(Spec(SpinChain("c", 1, 1)));
  EXPECT_THAT(rejected.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                          HasSubstr("queue is full")));
  // The rejection says when to come back.
  std::optional<absl::Duration> delay = RetryDelayOf(rejected.status());
  ASSERT_TRUE(delay.has_value());
  EXPECT_GE(*delay, absl::Milliseconds(10));
  EXPECT_LE(*delay, absl::Seconds(30));
  EXPECT_THAT(Scrape(), HasSubstr("weft_jobs_rejected_total{code="
                                  "\"RESOURCE_EXHAUSTED\",tenant=\"\"} 1"));
  EXPECT_EQ(jobs_->List(std::nullopt, 0).size(), 3u);
  EXPECT_THAT(Scrape(), HasSubstr("weft_queue_depth 2"));
  gate_.Notify();
  EXPECT_TRUE(jobs_->WaitIdle(absl::Now() + absl::Seconds(20)));
}

TEST_F(JobManagerTest, RepeatedRequestIdReturnsTheOriginalJob) {
  absl::StatusOr<JobInfo> first = jobs_->Submit(Spec(AxpyGraph(), 0, "req-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<JobInfo> again = jobs_->Submit(Spec(AxpyGraph(), 0, "req-1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->request_id, "req-1");

  JobSpec other_tenant = Spec(AxpyGraph(), 0, "req-1");
  other_tenant.tenant = "team-b";
  absl::StatusOr<JobInfo> other = jobs_->Submit(std::move(other_tenant));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->id, first->id);

  WaitTerminal(first->id);
  absl::StatusOr<JobInfo> after_done =
      jobs_->Submit(Spec(AxpyGraph(), 0, "req-1"));
  ASSERT_TRUE(after_done.ok());
  EXPECT_EQ(after_done->id, first->id);
  EXPECT_EQ(after_done->state, JobState::kSucceeded);
  EXPECT_THAT(Scrape(), HasSubstr("weft_jobs_submitted_total{tenant=\"\"} 1"));
  EXPECT_THAT(Scrape(),
              HasSubstr("weft_jobs_submitted_total{tenant=\"team-b\"} 1"));
}

TEST_F(JobManagerTest, CancelQueuedJob) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string blocker = SubmitOk(SpinChain("blocker", 1, kGateUs));
  std::string queued = SubmitOk(AxpyGraph());
  WaitForState(blocker, JobState::kRunning);
  absl::StatusOr<JobInfo> cancelled = jobs_->Cancel(queued);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_THAT(cancelled->error,
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_FALSE(cancelled->start_time.has_value());
  EXPECT_EQ(jobs_->queued(), 0);

  // Cancelling again is a no-op.
  absl::StatusOr<JobInfo> again = jobs_->Cancel(queued);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state, JobState::kCancelled);

  gate_.Notify();
  EXPECT_EQ(WaitTerminal(blocker).state, JobState::kSucceeded);
  EXPECT_THAT(
      Scrape(),
      HasSubstr("weft_jobs_total{outcome=\"cancelled\",tenant=\"\"} 1"));
}

TEST_F(JobManagerTest, CancelRunningJob) {
  std::string id = SubmitOk(SpinChain("long", 200, 5000));
  WaitForState(id, JobState::kRunning);
  absl::StatusOr<JobInfo> requested = jobs_->Cancel(id);
  ASSERT_TRUE(requested.ok()) << requested.status();
  JobInfo done = WaitTerminal(id);
  EXPECT_EQ(done.state, JobState::kCancelled)
      << JobToProto(done).ShortDebugString();
  EXPECT_THAT(done.error, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(jobs_->running(), 0);
}

TEST_F(JobManagerTest, CancelFinishedJobIsFailedPrecondition) {
  std::string id = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  absl::StatusOr<JobInfo> cancelled = jobs_->Cancel(id);
  EXPECT_THAT(cancelled.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("SUCCEEDED"), HasSubstr(id))));
}

TEST_F(JobManagerTest, AJobRunsFromAPlanCheckedForAnEarlierOne) {
  std::optional<runtime::CheckedPlan> planned;
  absl::StatusOr<JobInfo> first =
      jobs_->Submit(Spec(SpinChain("kept", 3, 10)), &planned);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(planned.has_value());
  EXPECT_EQ(WaitTerminal(first->id).state, JobState::kSucceeded);

  // Given the checked plan, Submit neither plans nor checks again, and the
  // job runs the plan's graph.
  JobSpec again = Spec(SpinChain("kept", 3, 10));
  again.checked = planned;
  std::optional<runtime::CheckedPlan> replanned;
  absl::StatusOr<JobInfo> second = jobs_->Submit(std::move(again), &replanned);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(replanned.has_value());
  const JobInfo done = WaitTerminal(second->id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.nodes_done, 3);
  EXPECT_THAT(Scrape(), HasSubstr("weft_planning_seconds_count 1"));
}

TEST_F(JobManagerTest, FailingNodeFailsTheJobAndIsNamed) {
  weft::v1::Graph g = SpinChain("failing", 3, 1);
  g.mutable_nodes(1)->mutable_cost()->set_estimated_us(kFailUs);
  std::string id = SubmitOk(g);
  JobInfo done = WaitTerminal(id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.failed_node, "s1");
  EXPECT_THAT(done.error.message(), HasSubstr("injected fault"));
  EXPECT_FALSE(done.error.ok());
  absl::StatusOr<OutputBuffer> out = jobs_->ReadOutput(id, "b");
  EXPECT_THAT(out.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                     HasSubstr("FAILED")));
}

TEST_F(JobManagerTest, WatchYieldsJobThenEveryNodeEventUntilDone) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string blocker = SubmitOk(SpinChain("blocker", 1, kGateUs));
  // The middle node waits for the hold, so the watch sees the job running
  // (a watch reports the job as it is now, not every state it passed).
  weft::v1::Graph watched = SpinChain("watched", 3, 100);
  watched.mutable_nodes(1)->mutable_cost()->set_estimated_us(kHoldUs);
  std::string id = SubmitOk(watched);
  auto watch = jobs_->Watch(id);
  ASSERT_TRUE(watch.ok()) << watch.status();
  WatchUpdate first = (*watch)->Next(absl::Now());
  EXPECT_TRUE(first.changed);
  EXPECT_EQ(first.job.state, JobState::kQueued);
  EXPECT_TRUE(first.events.empty());
  EXPECT_FALSE(first.done);
  // Nothing happens while the blocker holds the only slot.
  WatchUpdate idle = (*watch)->Next(absl::Now() + absl::Milliseconds(20));
  EXPECT_FALSE(idle.changed);
  gate_.Notify();

  std::vector<std::string> events;
  std::vector<JobState> states;
  WatchUpdate u;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  do {
    u = (*watch)->Next(deadline);
    ASSERT_TRUE(u.changed) << "watch timed out";
    states.push_back(u.job.state);
    if (u.job.state == JobState::kRunning && !hold_.HasBeenNotified()) {
      hold_.Notify();
    }
    for (const NodeEventInfo& e : u.events) {
      events.push_back(absl::StrCat(
          e.node, ":",
          weft::v1::NodeEventKind_Name(NodeEventToProto(e).kind())));
      EXPECT_GE(e.device, 0);
      EXPECT_GE(e.stream, 0);
    }
  } while (!u.done);
  EXPECT_EQ(u.job.state, JobState::kSucceeded);
  EXPECT_EQ(u.job.nodes_done, 3);
  // STARTED means issued to a stream, so issue can run ahead of completion;
  // per node STARTED comes first, and the chain finishes in order.
  ASSERT_EQ(events.size(), 6u);
  std::vector<std::string> finished;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string node = events[i].substr(0, 2);
    if (absl::EndsWith(events[i], "NODE_FINISHED")) {
      finished.push_back(node);
      auto started = std::find(events.begin(), events.end(),
                               absl::StrCat(node, ":NODE_STARTED"));
      EXPECT_LT(started - events.begin(), static_cast<long>(i)) << node;
    }
  }
  EXPECT_THAT(finished, ElementsAre("s0", "s1", "s2"));
  EXPECT_THAT(states, ::testing::Contains(JobState::kRunning));
}

TEST_F(JobManagerTest, WatchOfFinishedJobReturnsTheJobThenItsEvents) {
  std::string id = SubmitOk(AxpyGraph());
  WaitTerminal(id);
  auto watch = jobs_->Watch(id);
  ASSERT_TRUE(watch.ok());
  WatchUpdate u = (*watch)->Next(absl::Now());
  EXPECT_FALSE(u.done);
  EXPECT_TRUE(u.events.empty());
  EXPECT_EQ(u.job.state, JobState::kSucceeded);
  u = (*watch)->Next(absl::Now());
  EXPECT_TRUE(u.done);
  EXPECT_EQ(u.events_dropped, 0);
  int finished = 0;
  for (const NodeEventInfo& e : u.events) {
    finished += e.kind == runtime::NodeEventKind::kFinished;
  }
  EXPECT_EQ(finished, u.job.nodes_total);
}

TEST_F(JobManagerTest, WatchOfFinishedJobThatKeepsNoEventsCountsThem) {
  JobManager::Options options;
  options.finished_job_events = 0;
  Start(options);
  std::string id = SubmitOk(AxpyGraph());
  WaitTerminal(id);
  auto watch = jobs_->Watch(id);
  ASSERT_TRUE(watch.ok());
  WatchUpdate u = (*watch)->Next(absl::Now());
  EXPECT_EQ(u.job.state, JobState::kSucceeded);
  EXPECT_FALSE(u.done);
  u = (*watch)->Next(absl::Now());
  EXPECT_TRUE(u.done);
  EXPECT_TRUE(u.events.empty());
  // Started and finished for each node.
  EXPECT_EQ(u.events_dropped, 2 * u.job.nodes_total);
}

TEST_F(JobManagerTest, RefusesEventBoundsOutOfRange) {
  JobManager::Options options;
  options.executor = executor_.get();
  options.max_job_events = 0;
  EXPECT_THAT(JobManager::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_job_events")));
  options.max_job_events = 1;
  options.finished_job_events = -1;
  EXPECT_THAT(JobManager::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("finished_job_events")));
}

// A terminal listener hears the job's end once, with the job as it ended;
// set on a job that has ended, it returns the job instead.
TEST_F(JobManagerTest, TerminalListenerHearsTheEndOnce) {
  std::string id = SubmitOk(SpinChain("gated", 2, kGateUs));
  WaitForState(id, JobState::kRunning);
  auto watch = jobs_->Watch(id);
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::atomic<int> told{0};
  JobInfo ended;
  absl::Notification heard;
  std::optional<JobInfo> now =
      (*watch)->SetTerminalListener([&](const JobInfo& job) {
        ended = job;
        if (told.fetch_add(1) == 0) heard.Notify();
      });
  ASSERT_FALSE(now.has_value());
  EXPECT_EQ((*watch)->Job().state, JobState::kRunning);
  ASSERT_TRUE(jobs_->Cancel(id).ok());
  gate_.Notify();
  ASSERT_TRUE(heard.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(ended.id, id);
  EXPECT_EQ(ended.state, JobState::kCancelled);
  EXPECT_EQ((*watch)->Job().state, JobState::kCancelled);
  // Later changes (none here, the job is over) are not announced again.
  watch->reset();
  EXPECT_EQ(told.load(), 1);

  auto late = jobs_->Watch(id);
  ASSERT_TRUE(late.ok());
  std::optional<JobInfo> over =
      (*late)->SetTerminalListener([&](const JobInfo&) { told.fetch_add(1); });
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(over->state, JobState::kCancelled);
  late->reset();
  EXPECT_EQ(told.load(), 1);
}

// A terminal listener cleared before the end is never called.
TEST_F(JobManagerTest, ClearedTerminalListenerIsNotCalled) {
  std::string id = SubmitOk(SpinChain("gated", 1, kGateUs));
  WaitForState(id, JobState::kRunning);
  auto watch = jobs_->Watch(id);
  ASSERT_TRUE(watch.ok());
  std::atomic<int> told{0};
  ASSERT_FALSE(
      (*watch)
          ->SetTerminalListener([&](const JobInfo&) { told.fetch_add(1); })
          .has_value());
  (*watch)->ClearListener();
  gate_.Notify();
  EXPECT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  EXPECT_EQ(told.load(), 0);
}

TEST_F(JobManagerTest, RetainsOnlyTheLastFinishedJobs) {
  JobManager::Options options;
  options.retain_jobs = 1;
  Start(options);
  absl::StatusOr<JobInfo> first = jobs_->Submit(Spec(AxpyGraph(), 0, "req-a"));
  ASSERT_TRUE(first.ok());
  WaitTerminal(first->id);
  std::string second = SubmitOk(AxpyGraph());
  WaitTerminal(second);
  EXPECT_THAT(jobs_->Get(first->id).status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(jobs_->Get(second).ok());
  // The request id was released with the job.
  absl::StatusOr<JobInfo> resubmitted =
      jobs_->Submit(Spec(AxpyGraph(), 0, "req-a"));
  ASSERT_TRUE(resubmitted.ok());
  EXPECT_NE(resubmitted->id, first->id);
}

TEST_F(JobManagerTest, ListFiltersByStateInSubmissionOrder) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string a = SubmitOk(AxpyGraph());
  WaitTerminal(a);
  std::string blocker = SubmitOk(SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  std::string q1 = SubmitOk(SpinChain("q1", 1, 1));
  std::string q2 = SubmitOk(SpinChain("q2", 1, 1));

  std::vector<std::string> all;
  for (const auto& j : jobs_->List(std::nullopt, 0)) all.push_back(j.id);
  EXPECT_THAT(all, ElementsAre(a, blocker, q1, q2));
  std::vector<std::string> queued;
  for (const auto& j : jobs_->List(JobState::kQueued, 0)) {
    queued.push_back(j.id);
  }
  EXPECT_THAT(queued, ElementsAre(q1, q2));
  std::vector<std::string> last;
  for (const auto& j : jobs_->List(std::nullopt, 2)) last.push_back(j.id);
  EXPECT_THAT(last, ElementsAre(q1, q2));
  gate_.Notify();
}

TEST_F(JobManagerTest, StopAcceptingAnswersUnavailable) {
  jobs_->StopAccepting();
  absl::StatusOr<JobInfo> job = jobs_->Submit(Spec(AxpyGraph()));
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kUnavailable,
                                     HasSubstr("shutting down")));
}

TEST_F(JobManagerTest, InjectedClockStampsJobs) {
  JobManager::Options options;
  options.clock = [] { return absl::FromUnixSeconds(1'700'000'000); };
  Start(options);
  std::string id = SubmitOk(AxpyGraph());
  JobInfo done = WaitTerminal(id);
  EXPECT_EQ(absl::ToUnixSeconds(done.create_time), 1'700'000'000);
  EXPECT_EQ(absl::ToUnixSeconds(*done.end_time), 1'700'000'000);
}

TEST_F(JobManagerTest, TenantsTakeTurnsBeforePriority) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string blocker = SubmitAs("a", SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  // Tenant a floods the queue first; b and c arrive later with fewer jobs.
  std::vector<std::string> ids;
  for (int i = 1; i <= 4; ++i) {
    ids.push_back(SubmitAs("a", SpinChain(absl::StrCat("a", i), 1, 1)));
  }
  ids.push_back(SubmitAs("b", SpinChain("b1", 1, 1)));
  ids.push_back(SubmitAs("b", SpinChain("b2", 1, 1)));
  ids.push_back(SubmitAs("c", SpinChain("c1", 1, 1)));
  // Priority orders c's own jobs only: c-urgent overtakes c1, not a or b.
  ids.push_back(SubmitAs("c", SpinChain("c-urgent", 1, 1), 9));
  gate_.Notify();
  // a ran the blocker, so b and c (in the order they queued) go first.
  EXPECT_THAT(StartOrder(ids), ElementsAre("b1", "c-urgent", "a1", "b2", "c1",
                                           "a2", "a3", "a4"));
}

TEST_F(JobManagerTest, ALateTenantIsNotStarvedByABacklog) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  std::string blocker = SubmitAs("bulk", SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    ids.push_back(SubmitAs("bulk", SpinChain(absl::StrCat("bulk", i), 1, 1)));
  }
  ids.push_back(SubmitAs("interactive", SpinChain("mine", 1, 1)));
  gate_.Notify();
  std::vector<std::string> order = StartOrder(ids);
  ASSERT_EQ(order.size(), 31u);
  // The backlog's tenant just ran the blocker: the newcomer goes first.
  EXPECT_EQ(order[0], "mine");
  EXPECT_EQ(order[1], "bulk0");
}

TEST_F(JobManagerTest, PerTenantQueueBound) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  options.max_queued_jobs = 10;
  options.max_queued_per_tenant = 2;
  Start(options);
  std::string blocker = SubmitAs("a", SpinChain("blocker", 1, kGateUs));
  WaitForState(blocker, JobState::kRunning);
  SubmitAs("a", SpinChain("a1", 1, 1));
  SubmitAs("a", SpinChain("a2", 1, 1));
  JobSpec third = Spec(SpinChain("a3", 1, 1));
  third.tenant = "a";
  absl::StatusOr<JobInfo> rejected = jobs_->Submit(std::move(third));
  EXPECT_THAT(rejected.status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant 'a' has 2 jobs queued")));
  EXPECT_TRUE(RetryDelayOf(rejected.status()).has_value());
  // Another tenant still gets in.
  SubmitAs("b", SpinChain("b1", 1, 1));
  EXPECT_EQ(jobs_->queued(), 3);
  EXPECT_THAT(Scrape(), HasSubstr("weft_jobs_rejected_total{code="
                                  "\"RESOURCE_EXHAUSTED\",tenant=\"a\"} 1"));
  gate_.Notify();
  EXPECT_TRUE(jobs_->WaitIdle(absl::Now() + absl::Seconds(20)));
}

TEST_F(JobManagerTest, PlanningErrorsRejectTheSubmission) {
  weft::v1::Graph g = AxpyGraph();
  g.mutable_nodes(1)->set_stream_label("io");
  JobSpec spec = Spec(g);
  spec.planner_options.stream_mode = scheduler::StreamMode::kSingle;
  absl::StatusOr<JobInfo> job = jobs_->Submit(std::move(spec));
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("graph.nodes[1].stream_label")));
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty());
  const std::string text = Scrape();
  // Planning was timed; no job was counted anywhere.
  EXPECT_THAT(text, HasSubstr("weft_planning_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"\"} 0"));
  EXPECT_THAT(text,
              HasSubstr("weft_jobs_total{outcome=\"failed\",tenant=\"\"} 0"));
}

TEST_F(JobManagerTest, SubmissionPastItsDeadlineOrCancelledCreatesNoJob) {
  JobSpec late = Spec(AxpyGraph(), 0, "late");
  late.deadline = absl::Now() - absl::Milliseconds(1);
  absl::StatusOr<JobInfo> job = jobs_->Submit(std::move(late));
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     HasSubstr("no job was created")));

  JobSpec gone = Spec(AxpyGraph(), 0, "gone");
  int asked = 0;
  gone.cancelled = [&asked] {
    ++asked;
    return true;
  };
  job = jobs_->Submit(std::move(gone));
  EXPECT_THAT(job.status(), StatusIs(absl::StatusCode::kCancelled,
                                     HasSubstr("no job was created")));
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(jobs_->List(std::nullopt, 0).empty());
  EXPECT_THAT(Scrape(), HasSubstr("weft_jobs_rejected_total{code=\"DEADLINE_"
                                  "EXCEEDED\",tenant=\"\"} 1"));

  // The request ids were not consumed.
  absl::StatusOr<JobInfo> retry = jobs_->Submit(Spec(AxpyGraph(), 0, "late"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(WaitTerminal(retry->id).state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, ConcurrentDuplicatesCreateExactlyOneJob) {
  constexpr int kThreads = 16;
  absl::Notification go;
  std::vector<std::string> ids(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      JobSpec spec = Spec(AxpyGraph(), 0, "same-request");
      go.WaitForNotification();
      absl::StatusOr<JobInfo> job = jobs_->Submit(std::move(spec));
      if (job.ok()) ids[i] = job->id;
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  for (const std::string& id : ids) {
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(id, ids[0]);
  }
  EXPECT_EQ(jobs_->List(std::nullopt, 0).size(), 1u);
  EXPECT_THAT(Scrape(), HasSubstr("weft_jobs_submitted_total{tenant=\"\"} 1"));
  EXPECT_EQ(WaitTerminal(ids[0]).state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, RetentionByTimeReleasesJobsAndRequestIds) {
  auto now = std::make_shared<std::atomic<int64_t>>(1'000);
  JobManager::Options options;
  options.retain_for = absl::Seconds(10);
  options.clock = [now] { return absl::FromUnixSeconds(now->load()); };
  Start(options);
  absl::StatusOr<JobInfo> job =
      jobs_->Submit(Spec(AxpyGraph(), 0, "kept-for-a-while"));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(WaitTerminal(job->id).state, JobState::kSucceeded);

  now->store(1'009);
  EXPECT_TRUE(jobs_->Get(job->id).ok());
  EXPECT_TRUE(jobs_->ReadOutput(job->id, "y").ok());
  now->store(1'010);
  absl::StatusOr<JobInfo> gone = jobs_->Get(job->id);
  EXPECT_THAT(gone.status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(job->id)));
  EXPECT_THAT(jobs_->ReadOutput(job->id, "y").status(),
              StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<JobInfo> again =
      jobs_->Submit(Spec(AxpyGraph(), 0, "kept-for-a-while"));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, job->id);
  WaitTerminal(again->id);
}

TEST_F(JobManagerTest, ExpiredJobsAreReleasedWithoutFurtherCalls) {
  auto now = std::make_shared<std::atomic<int64_t>>(1'000);
  JobManager::Options options;
  options.retain_for = absl::Seconds(10);
  options.clock = [now] { return absl::FromUnixSeconds(now->load()); };
  Start(options);
  std::string id = SubmitOk(AxpyGraph());
  WaitTerminal(id);
  EXPECT_EQ(jobs_->retained(), 1);
  now->store(2'000);
  // Nobody calls in; the dispatcher notices the expiry on its own.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (jobs_->retained() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(jobs_->retained(), 0);
}

TEST_F(JobManagerTest, CancelRunningReportsTheJobs) {
  std::string id = SubmitOk(SpinChain("gated", 1, kGateUs));
  WaitForState(id, JobState::kRunning);
  std::vector<std::string> cancelled = jobs_->CancelRunning("drain over");
  EXPECT_THAT(cancelled, ElementsAre(id));
  gate_.Notify();
  JobInfo done = WaitTerminal(id);
  // The only node may have finished before the cancellation took hold.
  if (done.state == JobState::kCancelled) {
    EXPECT_THAT(done.error.message(), HasSubstr("drain over"));
  } else {
    EXPECT_EQ(done.state, JobState::kSucceeded);
  }
}

// ---------------------------------------------------------------- traces --

// The number of times `needle` occurs in `text`.
int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

TEST_F(JobManagerTest, TraceOfSucceededJobHasEveryNodeAndTheDownloads) {
  std::string id = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  absl::StatusOr<std::string> json = jobs_->TraceJson(id);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr(R"("traceEvents":[)"));
  EXPECT_THAT(*json, HasSubstr(R"("job":"axpy")"));
  for (const char* node : {"fill_x", "axpy"}) {
    EXPECT_EQ(Count(*json, absl::StrCat(R"({"ph":"X","name":")", node,
                                        R"(","cat":"kernel")")),
              1)
        << node << " in " << *json;
  }
  // Kernels run on stream tracks; the output comes back on a D2H track.
  EXPECT_THAT(*json, HasSubstr(R"("args":{"name":"stream )"));
  EXPECT_THAT(*json, HasSubstr(R"("args":{"name":"D2H"})"));
  EXPECT_THAT(*json, HasSubstr(R"("name":"y download","cat":"copy")"));
  EXPECT_THAT(*json, HasSubstr(R"("bytes":64)"));
  // Rendering is repeatable: the job keeps its trace.
  absl::StatusOr<std::string> again = jobs_->TraceJson(id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *json);
}

TEST_F(JobManagerTest, TraceOfFailedJobShowsTheWorkUpToTheFailure) {
  weft::v1::Graph g = SpinChain("failing", 3, 1);
  g.mutable_nodes(1)->mutable_cost()->set_estimated_us(kFailUs);
  std::string id = SubmitOk(g);
  ASSERT_EQ(WaitTerminal(id).state, JobState::kFailed);
  absl::StatusOr<std::string> json = jobs_->TraceJson(id);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr(R"("job":"failing")"));
  EXPECT_EQ(Count(*json, R"({"ph":"X","name":"s0","cat":"kernel")"), 1)
      << *json;
}

TEST_F(JobManagerTest, TraceIsFailedPreconditionUntilTheJobHasFinished) {
  std::string id = SubmitOk(SpinChain("gated", 1, kGateUs));
  WaitForState(id, JobState::kRunning);
  absl::StatusOr<std::string> early = jobs_->TraceJson(id);
  EXPECT_THAT(early.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(id), HasSubstr("is RUNNING"),
                             HasSubstr("available once it has finished"))));
  gate_.Notify();
  ASSERT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  absl::StatusOr<std::string> late = jobs_->TraceJson(id);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(Count(*late, R"({"ph":"X","name":"s0","cat":"kernel")"), 1);
}

TEST_F(JobManagerTest, TraceOfUnknownJobIsNotFound) {
  absl::StatusOr<std::string> json = jobs_->TraceJson("j-00000000000000ff");
  EXPECT_THAT(json.status(), StatusIs(absl::StatusCode::kNotFound,
                                      HasSubstr("j-00000000000000ff")));
}

TEST_F(JobManagerTest, TraceOfCancelledJobs) {
  JobManager::Options options;
  options.max_running_jobs = 1;
  Start(options);
  // Cancelled while running: what ran is traced. s0 runs to its end; s1
  // is held at its start until after the cancel.
  weft::v1::Graph chain = SpinChain("running", 2, 1);
  chain.mutable_nodes(1)->mutable_cost()->set_estimated_us(kGateUs);
  std::string running = SubmitOk(chain);
  std::string queued = SubmitOk(SpinChain("queued", 2, 1));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (jobs_->Get(running)->nodes_done < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(jobs_->Get(running)->nodes_done, 1);
  ASSERT_TRUE(jobs_->Cancel(queued).ok());
  ASSERT_TRUE(jobs_->Cancel(running).ok());
  gate_.Notify();
  ASSERT_EQ(WaitTerminal(running).state, JobState::kCancelled);
  absl::StatusOr<std::string> json = jobs_->TraceJson(running);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(Count(*json, R"({"ph":"X","name":"s0","cat":"kernel")"), 1)
      << *json;
  // Cancelled while queued: it ran nothing, so its trace is empty.
  ASSERT_EQ(WaitTerminal(queued).state, JobState::kCancelled);
  absl::StatusOr<std::string> empty = jobs_->TraceJson(queued);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(*empty, HasSubstr(R"("job":"queued")"));
  EXPECT_THAT(*empty, HasSubstr(R"("traceEvents":[])"));
}

TEST_F(JobManagerTest, UntracedJobsSayWhyAndWhichFlag) {
  JobManager::Options off;
  off.trace_jobs = false;
  Start(off);
  std::string id = SubmitOk(AxpyGraph());
  // Known at submission: no need to wait for the job to say so.
  absl::StatusOr<std::string> json = jobs_->TraceJson(id);
  EXPECT_THAT(json.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(id), HasSubstr("--trace_jobs=false"))));
  ASSERT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  EXPECT_THAT(jobs_->TraceJson(id).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  JobManager::Options small;
  small.trace_max_nodes = 2;
  Start(small);
  std::string big = SubmitOk(SpinChain("big", 3, 1));
  std::string fits = SubmitOk(SpinChain("fits", 2, 1));
  ASSERT_EQ(WaitTerminal(big).state, JobState::kSucceeded);
  ASSERT_EQ(WaitTerminal(fits).state, JobState::kSucceeded);
  absl::StatusOr<std::string> too_big = jobs_->TraceJson(big);
  EXPECT_THAT(too_big.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("3 nodes, more than --trace_max_nodes=2")));
  absl::StatusOr<std::string> traced = jobs_->TraceJson(fits);
  ASSERT_TRUE(traced.ok()) << traced.status();
  EXPECT_EQ(Count(*traced, R"("op":"spin")"), 2) << *traced;

  JobManager::Options negative;
  negative.executor = executor_.get();
  negative.trace_max_nodes = -1;
  auto bad = JobManager::Create(negative);
  EXPECT_THAT(bad.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("trace_max_nodes")));
}

TEST_F(JobManagerTest, RetentionReleasesTheTrace) {
  JobManager::Options options;
  options.retain_jobs = 1;
  Start(options);
  std::string first = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(first).state, JobState::kSucceeded);
  ASSERT_TRUE(jobs_->TraceJson(first).ok());
  std::string second = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(second).state, JobState::kSucceeded);
  EXPECT_THAT(jobs_->TraceJson(first).status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(jobs_->TraceJson(second).ok());
}

TEST_F(JobManagerTest, TracesLargerThanTheRetentionBoundAreNotKept) {
  JobManager::Options options;
  options.retain_trace_bytes = 1;  // no trace fits (the order of release:
                                   // job_retention_test)
  Start(options);
  std::string id = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  EXPECT_EQ(jobs_->Get(id)->state, JobState::kSucceeded);
  EXPECT_THAT(
      jobs_->TraceJson(id).status(),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("--retain_trace_bytes")));
}

TEST_F(JobManagerTest, RetentionInBytesReleasesTheOldestOutputsFirst) {
  JobManager::Options options;
  options.retain_output_bytes = 100;  // one axpy output (64 bytes) fits
  Start(options);
  std::string first = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(first).state, JobState::kSucceeded);
  ASSERT_TRUE(jobs_->ReadOutput(first, "y").ok());
  std::string second = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(second).state, JobState::kSucceeded);
  // The first job stays visible; its outputs went to make room.
  EXPECT_EQ(jobs_->Get(first)->state, JobState::kSucceeded);
  absl::StatusOr<OutputBuffer> released = jobs_->ReadOutput(first, "y");
  EXPECT_THAT(released.status(), StatusIs(absl::StatusCode::kNotFound,
                                          HasSubstr("--retain_output_bytes")));
  absl::StatusOr<OutputBuffer> kept = jobs_->ReadOutput(second, "y");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept).data->size(), 64u);
}

TEST_F(JobManagerTest, OutputsLargerThanTheRetentionBoundAreNotKept) {
  JobManager::Options options;
  options.retain_output_bytes = 10;
  Start(options);
  std::string job = SubmitOk(AxpyGraph());
  ASSERT_EQ(WaitTerminal(job).state, JobState::kSucceeded);
  EXPECT_THAT(jobs_->ReadOutput(job, "y").status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, ATenantNeverTakesEverySlot) {
  JobManager::Options options;
  options.max_running_jobs = 3;  // so a tenant runs at most 2 at once
  Start(options);
  std::vector<std::string> hog;
  for (int i = 0; i < 4; ++i) {
    hog.push_back(
        SubmitAs("hog", SpinChain(absl::StrCat("hog", i), 1, kGateUs)));
  }
  WaitForState(hog[0], JobState::kRunning);
  WaitForState(hog[1], JobState::kRunning);
  // A slot is free, but it is kept for other tenants.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(jobs_->Get(hog[2])->state, JobState::kQueued);
  std::string quiet = SubmitAs("quiet", SpinChain("quiet", 1, 1));
  EXPECT_EQ(WaitTerminal(quiet).state, JobState::kSucceeded);
  gate_.Notify();
  for (const std::string& id : hog) {
    EXPECT_EQ(WaitTerminal(id).state, JobState::kSucceeded);
  }
}

}  // namespace
}  // namespace weft::server
