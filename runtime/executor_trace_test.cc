// Per-job traces: spans per stream and copy engine on the device clock,
// flows for event waits, and their trace-event rendering.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/sim/sim_backend.h"
#include "runtime/trace.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::weft::testing::StatusIs;

class ExecutorTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = 64 << 20;
    // 10 GB/s everywhere: 10000 bytes per microsecond.
    options.bandwidth_gbps = {{10, 10, 10}, {10, 10, 10}, {10, 10, 10}};
    options.time_scale = 0;  // exact virtual times
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec;
    exec.backend = backend_.get();
    executor_ = Executor::Create(exec).value();
  }
  void TearDown() override {
    executor_.reset();
    backend_.reset();
  }

  void Run(const TestJob& job, Outcome& outcome) {
    ASSERT_TRUE(
        executor_
            ->Start(job.graph(), job.plan(), outcome.Callbacks(/*traced=*/true))
            .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_EQ(outcome.on_trace_calls, 1);
  }

  // Spans by name.
  static std::map<std::string, TraceSpan> ByName(const JobTrace& trace) {
    std::map<std::string, TraceSpan> spans;
    for (const TraceSpan& span : trace.spans) spans[span.name] = span;
    return spans;
  }

  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorTraceTest, ForkJoinSpansFollowTheDeviceClock) {
  // root (100) -> a (200, device 0) and b (300, device 1) -> join (50).
  TestJob job(3, {0, 0, 1});
  job.set_name("fork join");
  job.Node("root", "spin", {}, 0, {}, 0, 100);
  job.Node("a", "spin", {}, 1, {0}, 1, 200);
  job.Node("b", "spin", {}, 2, {0}, 2, 300);
  job.Node("join", "spin", {}, 0, {1, 2}, -1, 50);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  const JobTrace& trace = outcome.trace;
  EXPECT_TRUE(trace.device_clock);
  EXPECT_EQ(trace.name, "fork join");
  std::map<std::string, TraceSpan> spans = ByName(trace);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_DOUBLE_EQ(spans["root"].start_us, 0);
  EXPECT_DOUBLE_EQ(spans["root"].end_us, 100);
  EXPECT_DOUBLE_EQ(spans["a"].start_us, 100);
  EXPECT_DOUBLE_EQ(spans["a"].end_us, 300);
  EXPECT_DOUBLE_EQ(spans["b"].start_us, 100);
  EXPECT_DOUBLE_EQ(spans["b"].end_us, 400);
  EXPECT_DOUBLE_EQ(spans["join"].start_us, 400);
  EXPECT_DOUBLE_EQ(spans["join"].end_us, 450);
  EXPECT_DOUBLE_EQ(trace.NodeMakespanUs(), 450);
  EXPECT_EQ(spans["join"].op, "spin");
  EXPECT_EQ(spans["b"].node, 2);
  // One track per stream used: root and join share theirs.
  EXPECT_EQ(spans["root"].track, spans["join"].track);
  EXPECT_NE(spans["root"].track, spans["a"].track);
  EXPECT_EQ(trace.tracks[spans["b"].track].device, 1);
  EXPECT_THAT(trace.tracks[spans["b"].track].name, HasSubstr("stream"));
  // Waits: root -> a, root -> b, a -> join, b -> join.
  std::vector<std::pair<std::string, std::string>> flows;
  for (const TraceFlow& f : trace.flows) {
    flows.emplace_back(trace.spans[f.from_span].name,
                       trace.spans[f.to_span].name);
  }
  EXPECT_THAT(flows,
              ::testing::UnorderedElementsAre(
                  std::make_pair("root", "a"), std::make_pair("root", "b"),
                  std::make_pair("a", "join"), std::make_pair("b", "join")));
}

TEST_F(ExecutorTraceTest, CopiesLandOnTheirEngineTracks) {
  // w (device 0) writes 1 MB, r (device 1) reads it: a 100 us peer copy on
  // device 1's D2D engine between them.
  TestJob job(2, {0, 1});
  const int buf = job.Buffer("buf", 1000000, DType::kBytes,
                             BufferSpec::Init::kZero, 0, "", true);
  const int src = job.Buffer("src", 1000000, DType::kBytes,
                             BufferSpec::Init::kData, 0, "abc");
  job.Node("w", "copy", {Use(src, Access::kRead), Use(buf, Access::kWrite)}, 0,
           {}, 0, 100);
  job.Node("r", "spin", {Use(buf, Access::kRead)}, 1, {0}, -1, 100);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.outputs.at("buf").substr(0, 3), "abc");
  const JobTrace& trace = outcome.trace;
  std::map<std::string, TraceSpan> spans = ByName(trace);
  ASSERT_TRUE(spans.count("src upload"));
  ASSERT_TRUE(spans.count("buf d0->d1"));
  ASSERT_TRUE(spans.count("buf download"));
  ASSERT_TRUE(spans.count("buf init"));
  const TraceSpan& upload = spans["src upload"];
  const TraceSpan& peer = spans["buf d0->d1"];
  const TraceSpan& download = spans["buf download"];
  EXPECT_EQ(upload.kind, SpanKind::kCopy);
  EXPECT_EQ(upload.bytes, 1000000u);
  EXPECT_EQ(trace.tracks[upload.track].name, "H2D");
  EXPECT_EQ(trace.tracks[upload.track].device, 0);
  EXPECT_EQ(trace.tracks[peer.track].name, "D2D");
  EXPECT_EQ(trace.tracks[peer.track].device, 1);
  EXPECT_EQ(trace.tracks[download.track].name, "D2H");
  EXPECT_DOUBLE_EQ(upload.end_us - upload.start_us, 100);
  EXPECT_DOUBLE_EQ(peer.end_us - peer.start_us, 100);
  // The upload precedes w, the peer copy sits between w and r.
  EXPECT_LE(upload.end_us, spans["w"].start_us);
  EXPECT_DOUBLE_EQ(peer.start_us, spans["w"].end_us);
  EXPECT_DOUBLE_EQ(spans["r"].start_us, peer.end_us);
  EXPECT_EQ(spans["buf init"].kind, SpanKind::kKernel);
  EXPECT_EQ(spans["buf init"].node, -1);
  // Renders with one thread per track.
  const std::string json = ToTraceEventJson(trace);
  EXPECT_THAT(json, HasSubstr(R"("name":"buf d0->d1","cat":"copy")"));
  EXPECT_THAT(json, HasSubstr(R"("args":{"name":"D2D"})"));
  EXPECT_THAT(json, HasSubstr(R"("ph":"s")"));
}

TEST_F(ExecutorTraceTest, AFillOverAWholeBufferIsItsFirstVersion) {
  // Three float32 buffers of 12 bytes that a fill writes first: `zeros`
  // (initially zeros) and `data` (initially "abcdefghijkl") are made by the
  // fill alone, with neither their zeros nor an upload before it. `tail`
  // holds 14 bytes: the fill writes three whole elements and its last two
  // bytes keep their initial contents, so it is made first.
  TestJob job(1);
  const int zeros = job.Buffer("zeros", 12, DType::kFloat32,
                               BufferSpec::Init::kZero, 0, "", true);
  const int data = job.Buffer("data", 12, DType::kFloat32,
                              BufferSpec::Init::kData, 0, "abcdefghijkl", true);
  const int tail =
      job.Buffer("tail", 14, DType::kFloat32, BufferSpec::Init::kData, 0,
                 "abcdefghijklmn", true);
  job.Node("f1", "fill", {Use(zeros, Access::kWrite), 2.0f}, 0);
  job.Node("f2", "fill", {Use(data, Access::kReadWrite), 3.0f}, 0);
  job.Node("f3", "fill", {Use(tail, Access::kWrite), 4.0f}, 0);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  auto floats = [](float v, int n) {
    std::string bytes;
    for (int i = 0; i < n; ++i) {
      bytes.append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
    return bytes;
  };
  EXPECT_EQ(outcome.outputs.at("zeros"), floats(2.0f, 3));
  EXPECT_EQ(outcome.outputs.at("data"), floats(3.0f, 3));
  EXPECT_EQ(outcome.outputs.at("tail"), floats(4.0f, 3) + "mn");
  std::map<std::string, TraceSpan> spans = ByName(outcome.trace);
  EXPECT_FALSE(spans.count("zeros init"));
  EXPECT_FALSE(spans.count("data upload"));
  EXPECT_TRUE(spans.count("tail upload"));
  EXPECT_TRUE(spans.count("f1"));
  EXPECT_TRUE(spans.count("zeros download"));
}

TEST_F(ExecutorTraceTest, FailedJobsDeliverTheirTraceToo) {
  TestJob job(1, {0});
  job.Node("ok", "spin", {}, 0, {}, -1, 10);
  job.Node("bad", "no_such_op", {}, 0);
  Outcome outcome;
  Run(job, outcome);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kUnimplemented));
  std::map<std::string, TraceSpan> spans = ByName(outcome.trace);
  EXPECT_EQ(spans.size(), 1u);
  EXPECT_TRUE(spans.count("ok"));
}

TEST_F(ExecutorTraceTest, UntracedJobsRecordNothing) {
  TestJob job(1, {0});
  job.Node("a", "spin", {}, 0, {}, -1, 10);
  Outcome outcome;
  ASSERT_TRUE(
      executor_->Start(job.graph(), job.plan(), outcome.Callbacks()).ok());
  ASSERT_TRUE(outcome.Wait());
  EXPECT_EQ(outcome.on_trace_calls, 0);
  // Only the plan needs events here: none.
  EXPECT_EQ(backend_->event_count(), 0);
}

}  // namespace
}  // namespace weft::runtime
