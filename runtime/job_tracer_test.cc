#include "runtime/job_tracer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/event_pool.h"
#include "runtime/forwarding_backend.h"
#include "runtime/job_events.h"
#include "runtime/sim/sim_backend.h"
#include "runtime/trace.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

KernelLaunch Spin(double us) {
  KernelLaunch launch;
  launch.op = "spin";
  launch.cost_us = us;
  return launch;
}

TEST(NullJobTracerTest, RecordsNothing) {
  NullJobTracer tracer;
  EXPECT_EQ(tracer.Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream,
                                    0, "a", "spin", 0},
                         StreamHandle{1}, 0),
            -1);
  tracer.End(-1, StreamHandle{1}, 0);
  tracer.NodeIssued(0, -1, {}, -1);
  EXPECT_EQ(tracer.Take(), nullptr);
}

// The simulator, with or without its stamps (without: as CUDA, whose
// traces use marker events), counting the points marked.
class MarkingBackend final : public ForwardingBackend {
 public:
  MarkingBackend(Backend* backend, bool stamps)
      : ForwardingBackend(backend), stamps_(stamps) {}
  bool supports_stamps() const override { return stamps_; }
  absl::StatusOr<std::shared_ptr<const DeviceStamp>> Stamp(
      StreamHandle stream) override {
    ++marks;
    return ForwardingBackend::Stamp(stream);
  }
  absl::Status RecordEvent(EventHandle event, StreamHandle stream) override {
    ++marks;
    return ForwardingBackend::RecordEvent(event, stream);
  }
  int marks = 0;

 private:
  const bool stamps_;
};

// A stamp counted while it lives.
class CountedStamp final : public DeviceStamp {
 public:
  CountedStamp(std::shared_ptr<const DeviceStamp> stamp, int* live)
      : stamp_(std::move(stamp)), live_(live) {
    ++*live_;
  }
  ~CountedStamp() override { --*live_; }
  std::optional<double> TimeUs() const override { return stamp_->TimeUs(); }

 private:
  std::shared_ptr<const DeviceStamp> stamp_;
  int* live_;
};

// The simulator's stamps, counted while they live.
class CountingStampsBackend final : public ForwardingBackend {
 public:
  explicit CountingStampsBackend(Backend* backend)
      : ForwardingBackend(backend) {}
  bool supports_stamps() const override { return true; }
  absl::StatusOr<std::shared_ptr<const DeviceStamp>> Stamp(
      StreamHandle stream) override {
    absl::StatusOr<std::shared_ptr<const DeviceStamp>> stamp =
        ForwardingBackend::Stamp(stream);
    if (!stamp.ok()) return stamp.status();
    return std::make_shared<CountedStamp>(*std::move(stamp), &live);
  }
  int live = 0;
};

// Parameter: whether the backend stamps.
class RecordingJobTracerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 1;
    options.time_scale = 0;  // unpaced: exact virtual times
    sim_ = SimBackend::Create(options).value();
    backend_ = std::make_unique<MarkingBackend>(sim_.get(), GetParam());
    pool_ = std::make_unique<EventPool>(backend_.get(), 0);
    pools_.push_back(pool_.get());
    events_ = std::make_unique<JobEvents>(pools_, 1);
    stream_ = backend_->CreateStream(0).value();
  }
  void TearDown() override { events_->ReleaseAll(); }

  RecordingJobTracer::Options TracerOptions(bool device_clock) {
    RecordingJobTracer::Options options;
    options.backend = backend_.get();
    options.events = events_.get();
    options.device_clock = device_clock;
    options.name = "g";
    options.num_nodes = 2;
    options.num_events = 1;
    return options;
  }

  // Marker events the tracer holds: none where the backend stamps.
  int HeldFor(int marks) const { return GetParam() ? 0 : marks; }

  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<MarkingBackend> backend_;
  std::unique_ptr<EventPool> pool_;
  std::vector<EventPool*> pools_;
  std::unique_ptr<JobEvents> events_;
  StreamHandle stream_;
};

TEST_P(RecordingJobTracerTest, DeviceClockSpansRunBetweenMarkers) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  // Node 0 signals event 0; node 1 waits on it.
  const int a = tracer.Begin(
      TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0, "a", "spin", 0},
      stream_, 0);
  ASSERT_OK(backend_->Launch(Spin(10), stream_));
  tracer.End(a, stream_, 0);
  tracer.NodeIssued(0, a, {}, 0);
  const int b = tracer.Begin(
      TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0, "b", "spin", 1},
      stream_, 0);
  ASSERT_OK(backend_->Launch(Spin(5), stream_));
  tracer.End(b, stream_, 0);
  const int32_t waits[] = {0};
  tracer.NodeIssued(1, b, waits, -1);
  // Back to back: b's start is a's end.
  EXPECT_EQ(backend_->marks, 3);
  EXPECT_EQ(events_->held(), HeldFor(3));
  ASSERT_OK(backend_->SynchronizeStream(stream_));

  std::shared_ptr<const RecordedTrace> recorded = tracer.Take();
  ASSERT_NE(recorded, nullptr);
  // Every point's time was known at Take: no stamp is kept.
  for (const RecordedSpan& span : recorded->spans) {
    EXPECT_EQ(span.start.stamp, nullptr);
    EXPECT_EQ(span.end.stamp, nullptr);
  }
  const std::optional<JobTrace> trace = recorded->Build();
  EXPECT_EQ(trace->name, "g");
  EXPECT_TRUE(trace->device_clock);
  ASSERT_EQ(trace->tracks.size(), 1u);
  EXPECT_EQ(trace->tracks[0].device, 0);
  EXPECT_EQ(trace->tracks[0].name, absl::StrCat("stream ", stream_.value));
  ASSERT_EQ(trace->spans.size(), 2u);
  EXPECT_EQ(trace->spans[0].name, "a");
  EXPECT_DOUBLE_EQ(trace->spans[0].start_us, 0);
  EXPECT_DOUBLE_EQ(trace->spans[0].end_us, 10);
  EXPECT_EQ(trace->spans[1].node, 1);
  EXPECT_DOUBLE_EQ(trace->spans[1].start_us, 10);
  EXPECT_DOUBLE_EQ(trace->spans[1].end_us, 15);
  EXPECT_THAT(trace->flows, ElementsAre(AllOf(Field(&TraceFlow::from_span, 0),
                                              Field(&TraceFlow::to_span, 1))));
}

TEST_P(RecordingJobTracerTest, DirtyStreamTakesAFreshStartMarker) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  const TracedWork work{SpanKind::kKernel, TraceTrackKind::kStream, 0, "a"};
  tracer.End(tracer.Begin(work, stream_, 0), stream_, 0);
  EXPECT_EQ(backend_->marks, 2);
  tracer.End(tracer.Begin(work, stream_, 0), stream_, 0);
  EXPECT_EQ(backend_->marks, 3);  // started where the last one ended
  tracer.Dirty(stream_);
  tracer.End(tracer.Begin(work, stream_, 0), stream_, 0);
  EXPECT_EQ(backend_->marks, 5);
  EXPECT_EQ(events_->held(), HeldFor(5));
}

TEST_P(RecordingJobTracerTest, CopyEnginesAndTheHostHaveTracksOfTheirOwn) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  tracer.Begin(
      TracedWork{SpanKind::kCopy, TraceTrackKind::kHostToDevice, 0, "x upload"},
      stream_, 0);
  tracer.Begin(TracedWork{SpanKind::kCopy, TraceTrackKind::kDeviceToHost, 0,
                          "x download"},
               stream_, 0);
  tracer.Begin(
      TracedWork{SpanKind::kCopy, TraceTrackKind::kPeer, 0, "x d1->d0"},
      stream_, 0);
  tracer.Begin(TracedWork{SpanKind::kHost, TraceTrackKind::kStream, -1, "h"},
               stream_, 0);
  tracer.Begin(
      TracedWork{SpanKind::kCopy, TraceTrackKind::kHostToDevice, 0, "y upload"},
      stream_, 0);
  const std::optional<JobTrace> trace = tracer.Take()->Build();
  EXPECT_THAT(trace->tracks,
              ElementsAre(Field(&TraceTrack::name, "H2D"),
                          Field(&TraceTrack::name, "D2H"),
                          Field(&TraceTrack::name, "D2D"),
                          AllOf(Field(&TraceTrack::name, "host"),
                                Field(&TraceTrack::device, -1))));
  EXPECT_TRUE(trace->spans.empty());  // none was ended
}

TEST_P(RecordingJobTracerTest, HostClockSpansOnlyCompletedNodes) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/false));
  const int a = tracer.Begin(
      TracedWork{SpanKind::kHost, TraceTrackKind::kStream, -1, "a", "add", 0},
      stream_, 0);
  tracer.End(a, stream_, 0);
  tracer.NodeIssued(0, a, {}, -1);
  const int copy = tracer.Begin(
      TracedWork{SpanKind::kCopy, TraceTrackKind::kHostToDevice, 0, "x"},
      stream_, 0);
  EXPECT_GE(copy, 0);
  EXPECT_EQ(backend_->marks, 0);  // nothing marked on the host clock
  tracer.NodeStarted(0);
  tracer.NodeCompleted(0);
  const std::optional<JobTrace> trace = tracer.Take()->Build();
  EXPECT_FALSE(trace->device_clock);
  ASSERT_EQ(trace->spans.size(), 1u);
  EXPECT_EQ(trace->spans[0].name, "a");
  EXPECT_EQ(trace->spans[0].op, "add");
  EXPECT_DOUBLE_EQ(trace->spans[0].start_us, 0);
  EXPECT_GE(trace->spans[0].end_us, 0);
}

TEST_P(RecordingJobTracerTest, TheTraceIsBuiltAfterTheJobLetsGoOfItsEvents) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  const int a = tracer.Begin(
      TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0, "a", "spin", 0},
      stream_, 0);
  ASSERT_OK(backend_->Launch(Spin(7), stream_));
  tracer.End(a, stream_, 0);
  ASSERT_OK(backend_->SynchronizeStream(stream_));
  std::shared_ptr<const RecordedTrace> recorded = tracer.Take();
  events_->ReleaseAll();
  ASSERT_OK(backend_->DestroyStream(stream_));
  // Built later, on another thread, as GetJobTrace does.
  std::optional<JobTrace> trace;
  std::thread([&] { trace = recorded->Build(); }).join();
  ASSERT_EQ(trace->spans.size(), 1u);
  EXPECT_DOUBLE_EQ(trace->spans[0].end_us - trace->spans[0].start_us, 7);
}

TEST_P(RecordingJobTracerTest, TakeHandsOverOnceAndStartsAfresh) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  const TracedWork work{SpanKind::kKernel, TraceTrackKind::kStream, 0, "a"};
  tracer.End(tracer.Begin(work, stream_, 0), stream_, 0);
  ASSERT_OK(backend_->SynchronizeStream(stream_));
  EXPECT_EQ(tracer.Take()->Build().spans.size(), 1u);
  const std::shared_ptr<const RecordedTrace> again = tracer.Take();
  EXPECT_TRUE(again->spans.empty());
  EXPECT_TRUE(again->tracks.empty());
  EXPECT_EQ(again->name, "g");
}

TEST_P(RecordingJobTracerTest, AFullTraceCountsTheSpansItDrops) {
  for (const bool device_clock : {true, false}) {
    RecordingJobTracer::Options options = TracerOptions(device_clock);
    options.max_spans = 3;
    RecordingJobTracer tracer(std::move(options));
    std::vector<int> spans;
    for (int i = 0; i < 10; ++i) {
      const int span =
          tracer.Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0,
                                  "k", "spin", 0},
                       stream_, 0);
      ASSERT_OK(backend_->Launch(Spin(1), stream_));
      tracer.End(span, stream_, 0);
      spans.push_back(span);
    }
    EXPECT_THAT(spans, ElementsAre(0, 1, 2, -1, -1, -1, -1, -1, -1, -1));
    // A full trace holds no more marker events either.
    if (device_clock) {
      EXPECT_LE(events_->held(), HeldFor(4));
      EXPECT_FALSE(tracer.NewMarker(0).ok());
    }
    ASSERT_OK(backend_->SynchronizeStream(stream_));
    std::shared_ptr<const RecordedTrace> recorded = tracer.Take();
    ASSERT_NE(recorded, nullptr);
    EXPECT_EQ(recorded->spans.size(), 3u);
    EXPECT_EQ(recorded->spans_dropped, 7);
    const JobTrace trace = recorded->Build();
    EXPECT_EQ(trace.spans_dropped, 7);
    EXPECT_THAT(ToTraceEventJson(trace),
                ::testing::HasSubstr(R"("spansDropped":7)"));
    events_->ReleaseAll();
  }
}

// A loop's spans of one node, and the executor's copies of one buffer,
// hold their names and ops once; a node whose name changes (a nested job
// reusing its ids) gets the new one.
TEST_P(RecordingJobTracerTest, SpansShareTheirNamesAndOps) {
  RecordingJobTracer tracer(TracerOptions(/*device_clock=*/true));
  const std::string long_name(40, 'n');  // past the small-string buffer
  for (int i = 0; i < 100; ++i) {
    const int span =
        tracer.Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0,
                                long_name, "spin", 0},
                     stream_, 0);
    ASSERT_OK(backend_->Launch(Spin(1), stream_));
    tracer.End(span, stream_, 0);
    tracer.Begin(TracedWork{SpanKind::kCopy, TraceTrackKind::kHostToDevice, 0,
                            "upload x"},
                 stream_, 0);
  }
  tracer.Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0,
                          "renamed", "spin", 0},
               stream_, 0);
  ASSERT_OK(backend_->SynchronizeStream(stream_));
  std::shared_ptr<const RecordedTrace> recorded = tracer.Take();
  ASSERT_EQ(recorded->spans.size(), 201u);
  EXPECT_THAT(recorded->strings, ::testing::UnorderedElementsAre(
                                     long_name, "spin", "upload x", "renamed"));
  const RecordedSpan& last = recorded->spans.back();
  EXPECT_EQ(recorded->String(last.name), "renamed");
  EXPECT_EQ(recorded->String(last.op), "spin");
  EXPECT_EQ(recorded->spans[1].op, -1);  // a copy has no op
  // The long name is counted once, not once per span.
  EXPECT_LT(
      recorded->ApproxBytes(),
      static_cast<int64_t>(recorded->spans.capacity() * sizeof(RecordedSpan) +
                           100 * 64 + 1024));
  const JobTrace trace = recorded->Build();
  EXPECT_EQ(trace.spans.front().name, long_name);
  EXPECT_EQ(trace.spans.front().op, "spin");
}

// A long trace gives up the stamps of its finished spans as it goes, and
// holds none once taken; their times stay.
TEST(RecordingJobTracerStampsTest, FinishedSpansGiveUpTheirStamps) {
  SimBackend::Options sim_options;
  sim_options.num_devices = 1;
  sim_options.time_scale = 0;
  std::unique_ptr<SimBackend> sim = SimBackend::Create(sim_options).value();
  CountingStampsBackend backend(sim.get());
  EventPool pool(&backend, 0);
  std::vector<EventPool*> pools = {&pool};
  JobEvents events(pools, 1);
  const StreamHandle stream = backend.CreateStream(0).value();
  RecordingJobTracer::Options options;
  options.backend = &backend;
  options.events = &events;
  options.device_clock = true;
  options.name = "g";
  options.num_nodes = 1;
  constexpr int kSpans = 20000;
  {
    RecordingJobTracer tracer(options);
    int most_live = 0;
    for (int i = 0; i < kSpans; ++i) {
      const int span =
          tracer.Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream, 0,
                                  "k", "spin", 0},
                       stream, 0);
      ASSERT_OK(backend.Launch(Spin(1), stream));
      tracer.End(span, stream, 0);
      // Each span's work done before the next: its stamps know their times.
      ASSERT_OK(backend.SynchronizeStream(stream));
      most_live = std::max(most_live, backend.live);
    }
    // A stamp per span ends it (and starts the next): at most the spans of
    // two sweeps hold theirs.
    EXPECT_LE(most_live, 2 * 4096 + 2);
    std::shared_ptr<const RecordedTrace> recorded = tracer.Take();
    EXPECT_LE(backend.live, 1);  // the stream's last end, held to start more
    const JobTrace trace = recorded->Build();
    ASSERT_EQ(trace.spans.size(), static_cast<size_t>(kSpans));
    EXPECT_DOUBLE_EQ(trace.spans.back().end_us, kSpans);
  }
  EXPECT_EQ(backend.live, 0);
  events.ReleaseAll();
}

INSTANTIATE_TEST_SUITE_P(StampsAndEvents, RecordingJobTracerTest,
                         ::testing::Bool(), [](const auto& info) {
                           return info.param ? "Stamps" : "MarkerEvents";
                         });

}  // namespace
}  // namespace weft::runtime
