#include "runtime/kernel_launch_builder.h"

#include <string>
#include <variant>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"

namespace weft::runtime {
namespace {

scheduler::Graph Build(const std::string& text) {
  weft::v1::Graph proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
  absl::StatusOr<scheduler::Graph> graph =
      scheduler::BuildGraph(proto, scheduler::GraphLimits());
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

TEST(KernelLaunchBuilderTest, BuiltInOpResolvesBuffersOnTheDevice) {
  const scheduler::Graph graph = Build(R"pb(
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 }
    buffers { name: "y" size_bytes: 64 dtype: FLOAT32 }
    nodes {
      name: "axpy"
      op: "axpy"
      args { f32: 2.5 }
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: READ_WRITE } }
      cost { estimated_us: 7 }
    }
  )pb");
  const KernelLaunch launch =
      BuildKernelLaunch(graph, graph.node(0), [](scheduler::BufferId b) {
        return DevicePtr{1, 0x1000u + 0x100u * static_cast<uint64_t>(b)};
      });
  EXPECT_EQ(launch.op, "axpy");
  EXPECT_EQ(launch.cost_us, 7);
  EXPECT_EQ(launch.user_kernel, nullptr);
  ASSERT_EQ(launch.args.size(), 3u);
  EXPECT_EQ(std::get<float>(launch.args[0]), 2.5f);
  const auto& x = std::get<DeviceBufferArg>(launch.args[1]);
  EXPECT_EQ(x.ptr.device, 1);
  EXPECT_EQ(x.ptr.address, 0x1000u);
  EXPECT_EQ(x.size_bytes, 64u);
  EXPECT_EQ(x.dtype, scheduler::DType::kFloat32);
  EXPECT_EQ(x.access, scheduler::Access::kRead);
  const auto& y = std::get<DeviceBufferArg>(launch.args[2]);
  EXPECT_EQ(y.ptr.address, 0x1100u);
  EXPECT_EQ(y.access, scheduler::Access::kReadWrite);
}

TEST(KernelLaunchBuilderTest, CarriesOccupancyAndEngine) {
  const scheduler::Graph graph = Build(R"pb(
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 }
    buffers { name: "y" size_bytes: 64 dtype: FLOAT32 }
    nodes {
      name: "quarter"
      op: "spin"
      args { buffer { name: "x" access: READ } }
      cost { estimated_us: 5 occupancy: 0.25 }
    }
    nodes {
      name: "copy"
      op: "copy"
      engine: COPY
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: WRITE } }
      cost { estimated_us: 3 }
    }
    nodes {
      name: "whole"
      op: "spin"
      args { buffer { name: "y" access: READ } }
    }
  )pb");
  auto address = [](scheduler::BufferId) { return DevicePtr{0, 0x1000}; };
  const KernelLaunch quarter = BuildKernelLaunch(graph, graph.node(0), address);
  EXPECT_EQ(quarter.occupancy_units, scheduler::kOccupancyUnits / 4);
  EXPECT_EQ(quarter.engine, scheduler::Engine::kCompute);
  const KernelLaunch copy = BuildKernelLaunch(graph, graph.node(1), address);
  EXPECT_EQ(copy.engine, scheduler::Engine::kCopy);
  EXPECT_EQ(copy.occupancy_units, scheduler::kOccupancyUnits);
  EXPECT_EQ(copy.cost_us, 3);
  const KernelLaunch whole = BuildKernelLaunch(graph, graph.node(2), address);
  EXPECT_EQ(whole.occupancy_units, scheduler::kOccupancyUnits);
}

TEST(KernelLaunchBuilderTest, UserKernelCarriesItsModuleAndTypedScalars) {
  const scheduler::Graph graph = Build(R"pb(
    modules { name: "m" ptx: ".version 8.0\n.target sm_90\n" }
    buffers { name: "out" size_bytes: 16 dtype: INT64 }
    nodes {
      name: "k"
      kernel {
        module: "m"
        kernel: "fill"
        grid { x: 1 }
        block { x: 32 }
      }
      args { buffer { name: "out" access: WRITE } }
      args { i64: -3 }
      args { f64: 0.5 }
      args { i32: 9 }
    }
  )pb");
  const KernelLaunch launch =
      BuildKernelLaunch(graph, graph.node(0), [](scheduler::BufferId) {
        return DevicePtr{0, 8};
      });
  ASSERT_NE(launch.user_kernel, nullptr);
  EXPECT_EQ(launch.user_kernel->kernel, "fill");
  ASSERT_NE(launch.module, nullptr);
  EXPECT_EQ(launch.module->name, "m");
  ASSERT_EQ(launch.args.size(), 4u);
  EXPECT_EQ(std::get<DeviceBufferArg>(launch.args[0]).access,
            scheduler::Access::kWrite);
  EXPECT_EQ(std::get<int64_t>(launch.args[1]), -3);
  EXPECT_EQ(std::get<double>(launch.args[2]), 0.5);
  EXPECT_EQ(std::get<int32_t>(launch.args[3]), 9);
}

}  // namespace
}  // namespace weft::runtime
