#include "runtime/executor_test_util.h"

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
    EXPECT_EQ(backend.memory_used_bytes(d), load[d].memory.cached_bytes)
        << "device " << d;
  }
}

}  // namespace weft::runtime::executor_testing
