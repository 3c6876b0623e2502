#include "runtime/executor_test_util.h"

#include <algorithm>
#include <cstring>
#include <variant>

#include "runtime/ops/cpu_kernels.h"

namespace weft::runtime::executor_testing {

// fill(x) on device 0 -> axpy(x, y) on device 1 -> reduce_sum(y) on
// device 0, so x and y each cross devices once.
TestJob VectorPipeline(float fill_value, int n) {
  TestJob job(2, {0, 1});
  std::vector<float> y0(n);
  for (int i = 0; i < n; ++i) y0[i] = static_cast<float>(i);
  const int x = job.Buffer("x", n * 4, DType::kFloat32);
  const int y = job.Buffer("y", n * 4, DType::kFloat32, BufferSpec::Init::kData,
                           0, FloatBytes(y0), true);
  const int sum = job.Buffer("sum", 4, DType::kFloat32, BufferSpec::Init::kFill,
                             -1, "", true);
  job.Node("fill", "fill", {Use(x, Access::kWrite), fill_value}, 0, {}, 0);
  job.Node("axpy", "axpy",
           {3.0f, Use(x, Access::kRead), Use(y, Access::kReadWrite)}, 1, {0},
           1);
  job.Node("reduce", "reduce_sum",
           {Use(y, Access::kRead), Use(sum, Access::kWrite)}, 0, {1});
  return job;
}

void ExpectPipelineResult(Outcome& outcome, float fill_value, int n) {
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.failed_node, -1);
  ASSERT_EQ(outcome.outputs.size(), 2u);
  std::vector<float> y = Floats(outcome.outputs.at("y"));
  ASSERT_EQ(y.size(), static_cast<size_t>(n));
  double expected_sum = 0;
  for (int i = 0; i < n; ++i) {
    const float want = 3.0f * fill_value + static_cast<float>(i);
    EXPECT_EQ(y[i], want) << "y[" << i << "]";
    expected_sum += want;
  }
  std::vector<float> sum = Floats(outcome.outputs.at("sum"));
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0], static_cast<float>(expected_sum));
}

void ExpectNoMemoryHeld(const Backend& backend, const Executor& executor) {
  const std::vector<DeviceLoad> load = executor.Load();
  ASSERT_EQ(static_cast<int>(load.size()), backend.device_count());
  for (int d = 0; d < backend.device_count(); ++d) {
    EXPECT_EQ(load[d].memory.in_use_bytes, 0u) << "device " << d;
    EXPECT_EQ(load[d].memory.arenas_in_use, 0u) << "device " << d;
    EXPECT_EQ(load[d].memory.arena_bytes, 0u) << "device " << d;
    EXPECT_EQ(backend.memory_used_bytes(d), load[d].memory.cached_bytes)
        << "device " << d;
  }
}

absl::StatusOr<OutputBytes> RunOnHost(const scheduler::Graph& graph) {
  const CpuKernelTable kernels = CpuKernelTable::WithBuiltins();
  std::vector<std::string> memory;
  for (const BufferSpec& b : graph.buffers()) {
    std::string bytes(b.size_bytes, '\0');
    if (b.init == BufferSpec::Init::kData) {
      std::memcpy(bytes.data(), b.data.data(),
                  std::min(bytes.size(), b.data.size()));
    } else if (b.init == BufferSpec::Init::kFill) {
      const HostArg args[] = {
          HostBufferArg{bytes.data(), bytes.size(), b.dtype, Access::kWrite},
          b.fill};
      absl::Status filled = kernels.Run("fill", args);
      if (!filled.ok()) return filled;
    }
    memory.push_back(std::move(bytes));
  }
  for (const scheduler::NodeSpec& node : graph.nodes()) {
    std::vector<HostArg> args;
    for (const scheduler::Arg& arg : node.args) {
      if (const auto* use = std::get_if<scheduler::BufferUse>(&arg)) {
        const BufferSpec& b = graph.buffer(use->buffer);
        args.push_back(HostBufferArg{memory[use->buffer].data(), b.size_bytes,
                                     b.dtype, use->access});
      } else if (const auto* f = std::get_if<float>(&arg)) {
        args.push_back(*f);
      } else if (const auto* d = std::get_if<double>(&arg)) {
        args.push_back(*d);
      }
    }
    absl::Status ran = kernels.Run(node.op, args);
    if (!ran.ok()) return ran;
  }
  OutputBytes out;
  for (size_t b = 0; b < memory.size(); ++b) {
    if (graph.buffer(b).output) out[graph.buffer(b).name] = memory[b];
  }
  return out;
}

OutputBytes CpuReference(const scheduler::Graph& graph) {
  absl::StatusOr<OutputBytes> out = RunOnHost(graph);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : OutputBytes();
}

}  // namespace weft::runtime::executor_testing
