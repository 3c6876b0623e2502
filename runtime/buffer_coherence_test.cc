#include "runtime/buffer_coherence.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/event_pool.h"
#include "runtime/job_events.h"
#include "runtime/job_tracer.h"
#include "runtime/memory_pool.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::DType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

constexpr int kData = 0;  // buffer ids of Buffers()
constexpr int kFill = 1;

// "data": 8 bytes uploaded from the host; "fill": four floats of 2.5.
std::vector<BufferSpec> Buffers(uint64_t data_bytes = 8) {
  BufferSpec data;
  data.name = "data";
  data.size_bytes = data_bytes;
  data.init = BufferSpec::Init::kData;
  data.data = "abcdefgh";
  BufferSpec fill;
  fill.name = "fill";
  fill.size_bytes = 16;
  fill.dtype = DType::kFloat32;
  fill.init = BufferSpec::Init::kFill;
  fill.fill = 2.5;
  return {data, fill};
}

std::string Floats(std::vector<float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(InitialContentsTest, PadsDataAndFillsElements) {
  std::vector<BufferSpec> buffers = Buffers(/*data_bytes=*/10);
  EXPECT_EQ(InitialContents(buffers[kData]), std::string("abcdefgh\0\0", 10));
  EXPECT_EQ(InitialContents(buffers[kFill]), Floats({2.5, 2.5, 2.5, 2.5}));
  BufferSpec zero;
  zero.size_bytes = 3;
  EXPECT_EQ(InitialContents(zero), std::string(3, '\0'));
}

TEST(InitialDataTest, IsWhatPrecedesTheZeroTail) {
  std::vector<BufferSpec> buffers = Buffers(/*data_bytes=*/10);
  EXPECT_EQ(InitialData(buffers[kData]), "abcdefgh");
  buffers[kData].size_bytes = 3;  // data longer than the buffer: cut
  EXPECT_EQ(InitialData(buffers[kData]), "abc");
  EXPECT_EQ(InitialData(buffers[kFill]), Floats({2.5, 2.5, 2.5, 2.5}));
  BufferSpec zero;
  zero.size_bytes = 3;
  EXPECT_EQ(InitialData(zero), "");
}

class BufferCoherenceTest : public ::testing::Test {
 protected:
  // With `plan`, places its buffers first (BufferCoherence::Place).
  void Init(uint64_t data_bytes = 8, const scheduler::Plan* plan = nullptr) {
    SimBackend::Options options;
    options.num_devices = 2;
    options.time_scale = 0;           // unpaced: exact virtual times
    options.host_to_device_gbps = 1;  // 1,000 bytes per microsecond
    backend_ = SimBackend::Create(options).value();
    for (int d = 0; d < 2; ++d) {
      memory_.push_back(std::make_unique<MemoryPool>(backend_.get(), d,
                                                     MemoryPool::Options{}));
      memory_pools_.push_back(memory_.back().get());
      events_.push_back(std::make_unique<EventPool>(backend_.get(), d));
      event_pools_.push_back(events_.back().get());
      streams_.push_back(backend_->CreateStream(d).value());
    }
    graph_ = std::make_unique<scheduler::Graph>(
        "g", Buffers(data_bytes), std::vector<scheduler::NodeSpec>{});
    job_events_ = std::make_unique<JobEvents>(event_pools_, 0);
    RecordingJobTracer::Options trace;
    trace.backend = backend_.get();
    trace.events = job_events_.get();
    trace.device_clock = true;
    tracer_ = std::make_unique<RecordingJobTracer>(trace);
    buffers_ = std::make_unique<BufferCoherence>(
        graph_.get(),
        BufferCoherence::Options{backend_.get(), memory_pools_,
                                 job_events_.get(), tracer_.get()});
    if (plan != nullptr) {
      ASSERT_OK(buffers_->Place(*plan, true));
    }
    for (int b = 0; b < 2; ++b) {
      for (int d = 0; d < 2; ++d) ASSERT_OK(buffers_->Allocate(b, d));
    }
  }

  void TearDown() override {
    for (StreamHandle s : streams_) {
      backend_->SynchronizeStream(s).IgnoreError();
    }
    buffers_->Release(/*uncached=*/false);
    job_events_->ReleaseAll();
  }

  // The bytes of buffer `b` on `device`, read back once its work is done.
  std::string Read(int b, int device) {
    std::string bytes(graph_->buffer(b).size_bytes, '\0');
    const StreamHandle s = streams_[device];
    EXPECT_OK(backend_->CopyDeviceToHost(bytes.data(), buffers_->ptr(b, device),
                                         bytes.size(), s));
    EXPECT_OK(backend_->SynchronizeStream(s));
    return bytes;
  }

  std::vector<std::string> SpanNames() {
    for (StreamHandle s : streams_) EXPECT_OK(backend_->SynchronizeStream(s));
    std::vector<std::string> names;
    const std::optional<JobTrace> trace = tracer_->Take()->Build();
    for (const TraceSpan& span : trace->spans) {
      names.push_back(span.name);
    }
    return names;
  }

  std::unique_ptr<SimBackend> backend_;
  std::vector<std::unique_ptr<MemoryPool>> memory_;
  std::vector<MemoryPool*> memory_pools_;
  std::vector<std::unique_ptr<EventPool>> events_;
  std::vector<EventPool*> event_pools_;
  std::vector<StreamHandle> streams_;
  std::unique_ptr<scheduler::Graph> graph_;
  std::unique_ptr<JobEvents> job_events_;
  std::unique_ptr<RecordingJobTracer> tracer_;
  std::unique_ptr<BufferCoherence> buffers_;
};

TEST_F(BufferCoherenceTest, UploadsInitialDataOnFirstUse) {
  Init();
  EXPECT_FALSE(buffers_->has_version(kData));
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  EXPECT_TRUE(buffers_->has_version(kData));
  EXPECT_EQ(buffers_->latest(kData).where, 0);
  EXPECT_EQ(buffers_->latest(kData).writer, streams_[0]);
  EXPECT_EQ(Read(kData, 0), "abcdefgh");
  // Current there now: a second use moves nothing.
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  EXPECT_THAT(SpanNames(), ElementsAre("data upload"));
}

TEST_F(BufferCoherenceTest, InitialFillIsMadeInPlaceOnEveryDevice) {
  Init();
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  ASSERT_OK(buffers_->MakeCurrent(kFill, 1, 1, streams_[1]));
  EXPECT_EQ(Read(kFill, 0), Floats({2.5, 2.5, 2.5, 2.5}));
  EXPECT_EQ(Read(kFill, 1), Floats({2.5, 2.5, 2.5, 2.5}));
  EXPECT_THAT(SpanNames(), ElementsAre("fill init", "fill init"));
}

TEST_F(BufferCoherenceTest, CopiesTheLatestVersionAfterAWrite) {
  Init();
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  KernelLaunch write;
  write.op = "fill";
  write.args = {DeviceBufferArg{buffers_->ptr(kFill, 0), 16, DType::kFloat32,
                                Access::kWrite},
                7.0};
  ASSERT_OK(backend_->Launch(write, streams_[0]));
  const BufferUse use{kFill, Access::kWrite};
  buffers_->MarkWritten({&use, 1}, 0, streams_[0]);
  ASSERT_OK(backend_->SynchronizeStream(streams_[0]));  // the plan's order

  ASSERT_OK(buffers_->MakeCurrent(kFill, 1, 1, streams_[1]));
  EXPECT_EQ(Read(kFill, 1), Floats({7, 7, 7, 7}));
  ASSERT_OK(buffers_->MakeCurrent(kFill, buffers_->host(), 0, streams_[0]));
  ASSERT_OK(backend_->SynchronizeStream(streams_[0]));
  EXPECT_EQ(buffers_->TakeHostData(kFill), Floats({7, 7, 7, 7}));
  EXPECT_THAT(SpanNames(),
              ElementsAre("fill init", "fill d0->d1", "fill d0->host"));
}

TEST_F(BufferCoherenceTest, HostVersionIsUploadedWhereItIsUsedNext) {
  Init();
  ASSERT_OK(buffers_->MakeCurrent(kData, buffers_->host(), 0, streams_[0]));
  std::memcpy(buffers_->HostData(kData), "ABCDEFGH", 8);
  const BufferUse use{kData, Access::kReadWrite};
  buffers_->MarkWritten({&use, 1}, buffers_->host(), streams_[0]);
  EXPECT_EQ(buffers_->latest(kData).where, buffers_->host());
  ASSERT_OK(buffers_->MakeCurrent(kData, 1, 1, streams_[1]));
  EXPECT_EQ(Read(kData, 1), "ABCDEFGH");
  EXPECT_THAT(SpanNames(), ElementsAre("data host->d1"));
}

TEST_F(BufferCoherenceTest, UploadsTheDataWithAZeroTailAsOneUpload) {
  Init(/*data_bytes=*/1000000);  // its upload lasts 1,000 us
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  EXPECT_EQ(Read(kData, 0), "abcdefgh" + std::string(1000000 - 8, '\0'));
  for (StreamHandle s : streams_) ASSERT_OK(backend_->SynchronizeStream(s));
  const std::optional<JobTrace> trace = tracer_->Take()->Build();
  ASSERT_EQ(trace->spans.size(), 1u);
  EXPECT_EQ(trace->spans[0].name, "data upload");
  EXPECT_EQ(trace->spans[0].end_us - trace->spans[0].start_us, 1000);
  // Only the data took host memory on the simulated device.
  EXPECT_EQ(backend_->materialized_bytes(0), 8u);
}

TEST_F(BufferCoherenceTest, OtherStreamsWaitForATransferTheyDidNotOrder) {
  Init(/*data_bytes=*/1000000);  // its upload lasts 1,000 us
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  const StreamHandle other = backend_->CreateStream(0).value();
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, other));
  const EventHandle after = backend_->CreateEvent(0).value();
  ASSERT_OK(backend_->RecordEvent(after, other));
  ASSERT_OK(backend_->SynchronizeStream(other));
  EXPECT_GE(backend_->EventTimeUs(after).value(), 1000);
  ASSERT_OK(backend_->DestroyEvent(after));
  ASSERT_OK(backend_->DestroyStream(other));
}

TEST_F(BufferCoherenceTest, ReleaseFreesEveryDeviceCopy) {
  Init();
  EXPECT_GT(backend_->memory_used_bytes(0), 0u);
  EXPECT_GT(backend_->memory_used_bytes(1), 0u);
  buffers_->Release(/*uncached=*/true);
  EXPECT_EQ(backend_->memory_used_bytes(0), 0u);
  EXPECT_EQ(backend_->memory_used_bytes(1), 0u);
  EXPECT_EQ(memory_pools_[0]->stats().in_use_bytes, 0u);
}

// A memory plan for device 0 only: an arena of `arena` bytes, "data" at
// `data_offset` and "fill" at `fill_offset`.
scheduler::Plan PlacementPlan(int64_t arena, int64_t data_offset,
                              int64_t fill_offset, int64_t data_bytes = 8) {
  scheduler::Plan plan;
  plan.num_devices = 2;
  scheduler::DeviceMemory memory;
  memory.device = 0;
  memory.arena_bytes = arena;
  plan.memory.push_back(memory);
  plan.buffers.push_back({kData, 0, data_offset, data_bytes});
  plan.buffers.push_back({kFill, 0, fill_offset, 16});
  return plan;
}

TEST_F(BufferCoherenceTest, PlacedCopiesLieInOneArena) {
  const scheduler::Plan plan = PlacementPlan(512, 0, 256);
  Init(8, &plan);
  EXPECT_TRUE(buffers_->placed(kData, 0));
  EXPECT_TRUE(buffers_->placed(kFill, 0));
  EXPECT_FALSE(buffers_->placed(kData, 1));
  EXPECT_EQ(buffers_->ptr(kFill, 0).address,
            buffers_->ptr(kData, 0).address + 256);
  EXPECT_EQ(buffers_->arena_bytes(0), 512);
  EXPECT_EQ(buffers_->arena_bytes(1), 0);
  MemoryPoolStats stats = memory_pools_[0]->stats();
  EXPECT_EQ(stats.arenas_in_use, 1u);
  EXPECT_EQ(stats.arena_bytes, 512u);
  EXPECT_EQ(stats.backend_allocations, 1u);  // the arena, nothing else
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  EXPECT_EQ(Read(kData, 0), "abcdefgh");
  EXPECT_EQ(Read(kFill, 0), Floats({2.5, 2.5, 2.5, 2.5}));
  for (StreamHandle s : streams_) ASSERT_OK(backend_->SynchronizeStream(s));
  buffers_->Release(/*uncached=*/false);
  stats = memory_pools_[0]->stats();
  EXPECT_EQ(stats.arenas_in_use, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
}

TEST_F(BufferCoherenceTest, UploadIntoAnArenaZeroesWhatASharerLeft) {
  // "fill" and then "data" (16 bytes, 8 of data) at the same addresses.
  const scheduler::Plan plan = PlacementPlan(256, 0, 0, /*data_bytes=*/16);
  Init(16, &plan);
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  EXPECT_EQ(Read(kFill, 0), Floats({2.5, 2.5, 2.5, 2.5}));
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  EXPECT_EQ(Read(kData, 0), "abcdefgh" + std::string(8, '\0'));
  // The arena's host memory: the fill's 16 bytes, which the data reused.
  EXPECT_EQ(backend_->materialized_bytes(0), 16u);
}

TEST_F(BufferCoherenceTest, CopyOverwrittenByASharerIsNoLongerCurrent) {
  const scheduler::Plan plan = PlacementPlan(256, 0, 0);
  Init(8, &plan);
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  ASSERT_OK(buffers_->MakeCurrent(kData, 1, 1, streams_[1]));
  // The plan orders the copy to device 1 before the next use of the
  // addresses.
  ASSERT_OK(backend_->SynchronizeStream(streams_[1]));
  // "fill" takes the addresses: "data" is current on device 1 only.
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  EXPECT_EQ(buffers_->latest(kData).where, 1);
  EXPECT_EQ(Read(kFill, 0), Floats({2.5, 2.5, 2.5, 2.5}));
  // Used on device 0 again: copied back, not read from what "fill" left.
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  EXPECT_EQ(Read(kData, 0), "abcdefgh");
  ASSERT_OK(buffers_->CheckNotLost(kData));
  ASSERT_OK(buffers_->CheckNotLost(kFill));
}

TEST_F(BufferCoherenceTest, OnlyVersionOverwrittenFailsLaterUses) {
  const scheduler::Plan plan = PlacementPlan(256, 0, 0);
  Init(8, &plan);
  ASSERT_OK(buffers_->MakeCurrent(kData, 0, 0, streams_[0]));
  const BufferUse write{kData, Access::kWrite};
  buffers_->MarkWritten({&write, 1}, 0, streams_[0]);
  ASSERT_OK(buffers_->MakeCurrent(kFill, 0, 0, streams_[0]));
  EXPECT_THAT(buffers_->MakeCurrent(kData, 1, 1, streams_[1]),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("buffer 'data': its latest version was "
                                 "overwritten")));
  EXPECT_THAT(buffers_->CheckNotLost(kData),
              StatusIs(absl::StatusCode::kInternal));
}

TEST_F(BufferCoherenceTest, PlaceRejectsAPlaceOutsideTheArena) {
  Init();
  const scheduler::Plan plan = PlacementPlan(256, 0, 248);
  EXPECT_THAT(buffers_->Place(plan, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not lie in that device's arena")));
}

TEST(BufferCoherenceAllocateTest, AllocatesWhatEachDeviceNodeUses) {
  SimBackend::Options options;
  options.num_devices = 2;
  options.memory_bytes = 64 << 10;
  std::unique_ptr<SimBackend> backend = SimBackend::Create(options).value();
  MemoryPool pool0(backend.get(), 0, {});
  MemoryPool pool1(backend.get(), 1, {});
  std::vector<MemoryPool*> pools = {&pool0, &pool1};
  std::vector<BufferSpec> buffers(2);
  buffers[0].name = "small";
  buffers[0].size_bytes = 100;
  buffers[1].name = "big";
  buffers[1].size_bytes = 1 << 20;
  std::vector<scheduler::NodeSpec> nodes(2);
  nodes[0].name = "k";
  nodes[0].op = "fill";
  nodes[0].args = {BufferUse{0, Access::kWrite}, 1.0};
  nodes[1].name = "h";
  nodes[1].op = "fill";
  nodes[1].engine = scheduler::Engine::kHost;
  nodes[1].args = {BufferUse{1, Access::kWrite}, 1.0};
  const scheduler::Graph graph("g", std::move(buffers), std::move(nodes));
  scheduler::Plan plan;
  plan.nodes.resize(2);
  plan.nodes[0].node = 0;
  plan.nodes[0].device = 1;
  plan.nodes[1].node = 1;
  plan.nodes[1].device = 0;
  NullJobTracer tracer;
  JobEvents events({}, 0);

  {
    BufferCoherence coherence(&graph, {backend.get(), pools, &events, &tracer});
    // With host gates the host node needs no device memory.
    ASSERT_OK(coherence.AllocateFor(graph, plan, /*host_gates=*/true));
    EXPECT_GT(backend->memory_used_bytes(1), 0u);
    EXPECT_EQ(backend->memory_used_bytes(0), 0u);
    coherence.Release(/*uncached=*/true);
  }
  BufferCoherence coherence(&graph, {backend.get(), pools, &events, &tracer});
  EXPECT_THAT(coherence.AllocateFor(graph, plan, /*host_gates=*/false),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("buffer 'big' (first used by node 'h' on "
                                 "device 0): ")));
  coherence.Release(/*uncached=*/true);
}

}  // namespace
}  // namespace weft::runtime
