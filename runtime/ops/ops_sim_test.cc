// The linear-algebra and comparison ops end to end on the simulator: a
// graph from its wire form is validated, planned over two devices and run
// node by node and as device graphs, and its outputs are checked against
// values worked out by hand.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"
#include "weft/v1/weft.pb.h"

namespace weft::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

std::string FloatBytes(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// Text of a buffer with initial data, for the graph below.
std::string DataBuffer(const std::string& name,
                       const std::vector<float>& values) {
  std::string escaped;
  for (unsigned char c : FloatBytes(values)) {
    static const char kHex[] = "0123456789abcdef";
    escaped += "\\x";
    escaped += kHex[c >> 4];
    escaped += kHex[c & 15];
  }
  return "buffers { name: '" + name +
         "' size_bytes: " + std::to_string(values.size() * 4) +
         " dtype: FLOAT32 data: '" + escaped + "' }\n";
}

// A = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]] (row-major 4 x 3),
// x = [2, -1, 0.5], q = [0.5, 1, 0.5, 5], two = [2].
//   gemv(4, 3, A, x, y)     y = [2-2+1.5, 8-5+3, 14-8+4.5, 20-11+6]
//                             = [1.5, 6, 10.5, 15]
//   copy(y, r)              r = y
//   sub(r, q, r)            r = [1, 5, 10, 10]          (in place)
//   mul(r, two, m)          m = [2, 10, 20, 20]         (broadcast)
//   div(m, q, d)            d = [4, 10, 40, 4]
//   div(d, two, half)       half = [2, 5, 20, 2]        (maybe on the host)
//   mul(half, half, half)   half = [4, 25, 400, 4]      (in place, twice)
//   dot(r, q, s)            s = 0.5 + 5 + 5 + 50 = 60.5
//   less(s, 100, lt)        lt = 1
//   greater(s, 100, gt)     gt = 0
//   greater(s, 60, gt60)    gt60 = 1
// With `host`, `halve` runs on the HOST engine (the CPU kernels directly);
// device graphs leave out jobs with host nodes, so the graph path has none.
std::string OpsGraphText(bool host = false) {
  std::string text = "name: 'ops'\n";
  text += DataBuffer("A", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  text += DataBuffer("x", {2, -1, 0.5f});
  text += DataBuffer("q", {0.5f, 1, 0.5f, 5});
  text += R"pb(
    buffers { name: 'two' size_bytes: 4 dtype: FLOAT32 fill: 2 }
    buffers { name: 'y' size_bytes: 16 dtype: FLOAT32 output: true }
    buffers { name: 'r' size_bytes: 16 dtype: FLOAT32 output: true }
    buffers { name: 'm' size_bytes: 16 dtype: FLOAT32 output: true }
    buffers { name: 'd' size_bytes: 16 dtype: FLOAT32 output: true }
    buffers { name: 'half' size_bytes: 16 dtype: FLOAT32 output: true }
    buffers { name: 's' size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: 'lt' size_bytes: 4 dtype: INT32 fill: 7 output: true }
    buffers { name: 'gt' size_bytes: 4 dtype: INT32 fill: 7 output: true }
    buffers { name: 'gt60' size_bytes: 4 dtype: INT32 output: true }
    nodes {
      name: 'gemv'
      op: 'gemv'
      args { i32: 4 }
      args { i32: 3 }
      args { buffer { name: 'A' access: READ } }
      args { buffer { name: 'x' access: READ } }
      args { buffer { name: 'y' access: WRITE } }
    }
    nodes {
      name: 'copy'
      op: 'copy'
      args { buffer { name: 'y' access: READ } }
      args { buffer { name: 'r' access: WRITE } }
    }
    nodes {
      name: 'sub'
      op: 'sub'
      args { buffer { name: 'r' access: READ } }
      args { buffer { name: 'q' access: READ } }
      args { buffer { name: 'r' access: WRITE } }
    }
    nodes {
      name: 'mul'
      op: 'mul'
      args { buffer { name: 'r' access: READ } }
      args { buffer { name: 'two' access: READ } }
      args { buffer { name: 'm' access: WRITE } }
    }
    nodes {
      name: 'div'
      op: 'div'
      args { buffer { name: 'm' access: READ } }
      args { buffer { name: 'q' access: READ } }
      args { buffer { name: 'd' access: WRITE } }
    }
  )pb";
  text += host ? "nodes { name: 'halve' engine: HOST"
               : "nodes { name: 'halve' engine: COMPUTE";
  text += R"pb(
      op: 'div'
      args { buffer { name: 'd' access: READ } }
      args { buffer { name: 'two' access: READ } }
      args { buffer { name: 'half' access: WRITE } }
    }
          nodes {
      name: 'square'
      op: 'mul'
      args { buffer { name: 'half' access: READ } }
      args { buffer { name: 'half' access: READ } }
      args { buffer { name: 'half' access: READ_WRITE } }
    }
    nodes {
      name: 'dot'
      op: 'dot'
      args { buffer { name: 'r' access: READ } }
      args { buffer { name: 'q' access: READ } }
      args { buffer { name: 's' access: WRITE } }
    }
    nodes {
      name: 'less'
      op: 'less'
      args { buffer { name: 's' access: READ } }
      args { f32: 100 }
      args { buffer { name: 'lt' access: WRITE } }
    }
    nodes {
      name: 'greater'
      op: 'greater'
      args { buffer { name: 's' access: READ } }
      args { f64: 100 }
      args { buffer { name: 'gt' access: READ_WRITE } }
    }
    nodes {
      name: 'greater60'
      op: 'greater'
      args { buffer { name: 's' access: READ } }
      args { i32: 60 }
      args { buffer { name: 'gt60' access: WRITE } }
    }
  )pb";
  return text;
}

absl::StatusOr<scheduler::Graph> Build(const std::string& text) {
  weft::v1::Graph proto;
  if (!google::protobuf::TextFormat::ParseFromString(text, &proto)) {
    return absl::InvalidArgumentError("unparsable graph text");
  }
  scheduler::GraphLimits limits;
  limits.num_devices = 2;
  return scheduler::BuildGraph(proto, limits);
}

class OpsSimTest : public ::testing::TestWithParam<LaunchMode> {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = 16 << 20;
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec;
    exec.backend = backend_.get();
    exec.max_streams_per_device = 8;
    executor_ = Executor::Create(exec).value();
  }
  void TearDown() override {
    executor_.reset();
    backend_.reset();
  }

  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_P(OpsSimTest, EveryNewOpMatchesTheHandComputation) {
  const bool graphs = GetParam() == LaunchMode::kDeviceGraphs;
  absl::StatusOr<scheduler::Graph> built = Build(OpsGraphText(!graphs));
  ASSERT_TRUE(built.ok()) << built.status();
  auto graph = std::make_shared<const scheduler::Graph>(*std::move(built));

  scheduler::PlannerOptions options;
  options.num_devices = 2;
  options.device_policy = scheduler::DevicePolicyKind::kRoundRobin;
  options.explain = false;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, options);
  ASSERT_TRUE(plan.ok()) << plan.status();

  absl::Notification done;
  absl::Status status;
  absl::flat_hash_map<std::string, std::string> outputs;
  JobCallbacks callbacks;
  callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers out) {
    status = std::move(s);
    for (const auto& [name, buffer] : out) outputs[name] = buffer.ToString();
    done.Notify();
  };
  absl::StatusOr<uint64_t> run = executor_->Start(
      graph, std::make_shared<const scheduler::Plan>(*std::move(plan)),
      std::move(callbacks), JobOptions{GetParam()});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_TRUE(status.ok()) << status;

  EXPECT_THAT(Values<float>(outputs.at("y")), ElementsAre(1.5, 6, 10.5, 15));
  EXPECT_THAT(Values<float>(outputs.at("r")), ElementsAre(1, 5, 10, 10));
  EXPECT_THAT(Values<float>(outputs.at("m")), ElementsAre(2, 10, 20, 20));
  EXPECT_THAT(Values<float>(outputs.at("d")), ElementsAre(4, 10, 40, 4));
  EXPECT_THAT(Values<float>(outputs.at("half")), ElementsAre(4, 25, 400, 4));
  EXPECT_THAT(Values<float>(outputs.at("s")), ElementsAre(60.5));
  EXPECT_THAT(Values<int32_t>(outputs.at("lt")), ElementsAre(1));
  EXPECT_THAT(Values<int32_t>(outputs.at("gt")), ElementsAre(0));
  EXPECT_THAT(Values<int32_t>(outputs.at("gt60")), ElementsAre(1));
  if (graphs) {
    EXPECT_GT(backend_->graph_stats().instantiations, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, OpsSimTest,
                         ::testing::Values(LaunchMode::kStreams,
                                           LaunchMode::kDeviceGraphs),
                         [](const ::testing::TestParamInfo<LaunchMode>& info) {
                           return info.param == LaunchMode::kStreams
                                      ? "Streams"
                                      : "DeviceGraphs";
                         });

TEST(OpsGraphTest, SimulatedDevicesRunEveryNewOpInDeviceGraphs) {
  SimBackend::Options options;
  std::unique_ptr<SimBackend> backend = SimBackend::Create(options).value();
  for (const char* op :
       {"sub", "mul", "div", "dot", "gemv", "less", "greater"}) {
    EXPECT_TRUE(backend->supports_device_graph_op(op)) << op;
  }
}

// A node may name one buffer twice with different access modes: validation
// accepts sub(r, q, r), and dependencies order it after r's writer and
// before r's next reader (the outputs above depend on that).
TEST(OpsGraphTest, ValidationAcceptsAnInputThatIsAlsoTheOutput) {
  absl::StatusOr<scheduler::Graph> graph = Build(OpsGraphText());
  ASSERT_TRUE(graph.ok()) << graph.status();
  const scheduler::NodeId sub = graph->FindNode("sub");
  ASSERT_GE(sub, 0);
  const std::vector<scheduler::BufferUse> uses = graph->BufferUses(sub);
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].buffer, uses[2].buffer);
  EXPECT_EQ(uses[0].access, scheduler::Access::kRead);
  EXPECT_EQ(uses[2].access, scheduler::Access::kWrite);
}

TEST(OpsGraphTest, ValidationRejectsGemvWritingItsInput) {
  std::string text = OpsGraphText();
  const std::string y_write = "args { buffer { name: 'y' access: WRITE } }";
  const size_t at = text.find(y_write);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, y_write.size(),
               "args { buffer { name: 'A' access: READ_WRITE } }");
  absl::StatusOr<scheduler::Graph> graph = Build(text);
  EXPECT_THAT(
      graph.status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("graph.nodes[0].args[4].buffer.name: op 'gemv' cannot "
                         "write its result into its input 'A'")));
}

}  // namespace
}  // namespace weft::runtime
