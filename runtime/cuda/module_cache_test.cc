// User kernels on a real GPU, through CudaBackend (which owns the module
// cache): CUDA source compiled by NVRTC and hand-written PTX, launched with
// typed arguments and checked against the same computation on the CPU.
// Every case skips itself where no GPU is visible.
#include "runtime/cuda/module_cache.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "scheduler/graph.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;

constexpr char kSaxpySource[] = R"cu(
extern "C" __global__ void saxpy(float a, const float* x, float* y,
                                 long long n, double bias) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + (float)bias;
}
)cu";

// x[i] += value for i < n (nvcc -ptx, PTX ISA 7.0 for older drivers).
constexpr char kAddScalarPtx[] = R"ptx(
.version 7.0
.target sm_80
.address_size 64

.visible .entry add_scalar(
	.param .u64 add_scalar_param_0,
	.param .f32 add_scalar_param_1,
	.param .u32 add_scalar_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [add_scalar_param_0];
	ld.param.f32 	%f1, [add_scalar_param_1];
	ld.param.u32 	%r2, [add_scalar_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f2, [%rd4];
	add.f32 	%f3, %f2, %f1;
	st.global.f32 	[%rd4], %f3;
$L__BB0_2:
	ret;
}
)ptx";

scheduler::ModuleSpec CudaModule(const std::string& name,
                                 const std::string& source) {
  scheduler::ModuleSpec module;
  module.name = name;
  module.kind = scheduler::ModuleSpec::Kind::kCudaSource;
  module.code = source;
  return module;
}

scheduler::ModuleSpec PtxModule(const std::string& name,
                                const std::string& ptx) {
  scheduler::ModuleSpec module;
  module.name = name;
  module.kind = scheduler::ModuleSpec::Kind::kPtx;
  module.code = ptx;
  return module;
}

// A graph of one kernel node, enough for PrepareModules.
scheduler::Graph OneKernelGraph(scheduler::ModuleSpec module,
                                const std::string& kernel) {
  scheduler::NodeSpec node;
  node.name = "k";
  node.op = std::string(scheduler::kUserKernelOp);
  node.kernel = scheduler::KernelSpec{};
  node.kernel->module = 0;
  node.kernel->kernel = kernel;
  return scheduler::Graph("g", {}, {node}, {std::move(module)});
}

class UserKernelGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::Create();
    if (!backend.ok()) {
      ASSERT_EQ(backend.status().code(), absl::StatusCode::kUnavailable)
          << backend.status();
      GTEST_SKIP() << backend.status().message();
    }
    backend_ = std::move(backend).value();
    stream_ = backend_->CreateStream(0).value();
  }

  void TearDown() override {
    if (backend_ == nullptr) return;
    for (DevicePtr ptr : allocations_) EXPECT_TRUE(backend_->Free(ptr).ok());
    EXPECT_TRUE(backend_->DestroyStream(stream_).ok());
  }

  DevicePtr UploadFloats(const std::vector<float>& values) {
    const uint64_t bytes = values.size() * sizeof(float);
    DevicePtr ptr = backend_->Allocate(0, bytes).value();
    allocations_.push_back(ptr);
    EXPECT_TRUE(
        backend_->CopyHostToDevice(ptr, values.data(), bytes, stream_).ok());
    EXPECT_TRUE(backend_->SynchronizeStream(stream_).ok());
    return ptr;
  }

  std::vector<float> DownloadFloats(DevicePtr ptr, size_t n) {
    std::vector<float> out(n);
    EXPECT_TRUE(backend_->SynchronizeStream(stream_).ok());
    EXPECT_TRUE(
        backend_->CopyDeviceToHost(out.data(), ptr, n * sizeof(float), stream_)
            .ok());
    EXPECT_TRUE(backend_->SynchronizeStream(stream_).ok());
    return out;
  }

  std::unique_ptr<CudaBackend> backend_;
  StreamHandle stream_;
  std::vector<DevicePtr> allocations_;
};

TEST_F(UserKernelGpuTest, CudaSourceKernelMatchesTheCpu) {
  constexpr int kN = 1000;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = 0.5f * i;
    y[i] = 3.0f - i;
  }
  DevicePtr dx = UploadFloats(x);
  DevicePtr dy = UploadFloats(y);
  scheduler::ModuleSpec module = CudaModule("saxpy_mod", kSaxpySource);
  scheduler::KernelSpec spec;
  spec.module = 0;
  spec.kernel = "saxpy";
  spec.grid[0] = (kN + 127) / 128;
  spec.block[0] = 128;
  KernelLaunch launch;
  launch.op = std::string(scheduler::kUserKernelOp);
  launch.user_kernel = &spec;
  launch.module = &module;
  launch.args = {
      2.5f, DeviceBufferArg{dx, kN * 4, DType::kFloat32, Access::kRead},
      DeviceBufferArg{dy, kN * 4, DType::kFloat32, Access::kReadWrite},
      int64_t{kN}, 0.25};
  ASSERT_TRUE(backend_->PrepareModules(OneKernelGraph(module, "saxpy")).ok());
  absl::Status launched = backend_->Launch(launch, stream_);
  ASSERT_TRUE(launched.ok()) << launched;
  std::vector<float> out = DownloadFloats(dy, kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_FLOAT_EQ(out[i], 2.5f * x[i] + y[i] + 0.25f) << i;
  }
}

TEST_F(UserKernelGpuTest, PtxKernelMatchesTheCpu) {
  constexpr int kN = 300;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = static_cast<float>(i);
  DevicePtr dx = UploadFloats(x);
  scheduler::ModuleSpec module = PtxModule("ptx_mod", kAddScalarPtx);
  scheduler::KernelSpec spec;
  spec.module = 0;
  spec.kernel = "add_scalar";
  spec.grid[0] = 2;
  spec.block[0] = 128;  // 256 threads: the last 44 elements stay as they are
  KernelLaunch launch;
  launch.op = std::string(scheduler::kUserKernelOp);
  launch.user_kernel = &spec;
  launch.module = &module;
  launch.args = {
      DeviceBufferArg{dx, kN * 4, DType::kFloat32, Access::kReadWrite}, 1.5f,
      int32_t{kN}};
  absl::Status launched = backend_->Launch(launch, stream_);
  ASSERT_TRUE(launched.ok()) << launched;
  std::vector<float> out = DownloadFloats(dx, kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_FLOAT_EQ(out[i], i < 256 ? x[i] + 1.5f : x[i]) << i;
  }
}

TEST_F(UserKernelGpuTest, CompileErrorIsInvalidArgumentNamingTheModule) {
  absl::Status s = backend_->PrepareModules(OneKernelGraph(
      CudaModule("broken", "extern \"C\" __global__ void k() { int x = ; }"),
      "k"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("graph.modules[0]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("module 'broken'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected an expression"));
}

TEST_F(UserKernelGpuTest, BadPtxAndMissingKernelAreInvalidArgument) {
  absl::Status bad_ptx = backend_->PrepareModules(
      OneKernelGraph(PtxModule("junk", ".version 7.0\nnot ptx at all\n"), "k"));
  EXPECT_EQ(bad_ptx.code(), absl::StatusCode::kInvalidArgument) << bad_ptx;
  EXPECT_THAT(std::string(bad_ptx.message()),
              HasSubstr("graph.modules[0]: module 'junk' does not load"));

  absl::Status missing = backend_->PrepareModules(
      OneKernelGraph(PtxModule("ptx_mod", kAddScalarPtx), "nope"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("graph.nodes[0].kernel.kernel: no kernel 'nope' in "
                        "module 'ptx_mod'"));
}

TEST_F(UserKernelGpuTest, BufferOutsideAnAllocationIsRejected) {
  scheduler::ModuleSpec module = PtxModule("ptx_mod", kAddScalarPtx);
  scheduler::KernelSpec spec;
  spec.kernel = "add_scalar";
  KernelLaunch launch;
  launch.op = std::string(scheduler::kUserKernelOp);
  launch.user_kernel = &spec;
  launch.module = &module;
  launch.args = {
      DeviceBufferArg{DevicePtr{0, 16}, 4, DType::kFloat32, Access::kReadWrite},
      1.0f, int32_t{1}};
  absl::Status s = backend_->Launch(launch, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'add_scalar'"));
}

}  // namespace
}  // namespace weft::runtime
