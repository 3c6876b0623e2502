// Tests of CudaBackend on a real GPU. Without a visible device (or in a
// build without CUDA) every test skips itself, so `bazel test //...` passes
// on machines without GPUs and really checks the backend on machines with.
#include "runtime/cuda/cuda_backend.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "runtime/host_buffer.h"
#include "runtime/ops/cpu_kernels.h"
#include "scheduler/graph.h"
#include "scheduler/occupancy.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

#define WEFT_TEST_CONCAT_INNER(a, b) a##b
#define WEFT_TEST_CONCAT(a, b) WEFT_TEST_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                         \
  do {                                          \
    const absl::Status assert_ok_ = (expr);     \
    ASSERT_TRUE(assert_ok_.ok()) << assert_ok_; \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                  \
  auto WEFT_TEST_CONCAT(statusor_, __LINE__) = (rexpr);   \
  ASSERT_TRUE(WEFT_TEST_CONCAT(statusor_, __LINE__).ok()) \
      << WEFT_TEST_CONCAT(statusor_, __LINE__).status();  \
  lhs = std::move(WEFT_TEST_CONCAT(statusor_, __LINE__)).value()

DeviceBufferArg Buffer(DevicePtr ptr, uint64_t bytes, DType dtype,
                       Access access = Access::kReadWrite) {
  DeviceBufferArg arg;
  arg.ptr = ptr;
  arg.size_bytes = bytes;
  arg.dtype = dtype;
  arg.access = access;
  return arg;
}

DevicePtr Offset(DevicePtr ptr, uint64_t bytes) {
  return DevicePtr{ptr.device, ptr.address + bytes};
}

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::string ToBytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::Create();
    if (!backend.ok()) {
      ASSERT_EQ(backend.status().code(), absl::StatusCode::kUnavailable)
          << backend.status();
      EXPECT_EQ(VisibleCudaDevices(), 0);
      GTEST_SKIP() << backend.status().message();
    }
    backend_ = std::move(backend).value();
    ASSERT_GT(backend_->device_count(), 0);
    absl::StatusOr<StreamHandle> stream = backend_->CreateStream(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *stream;
  }

  void TearDown() override {
    if (backend_ == nullptr) return;
    for (DevicePtr ptr : allocations_) EXPECT_TRUE(backend_->Free(ptr).ok());
    EXPECT_TRUE(backend_->DestroyStream(stream_).ok());
  }

  // Allocates `bytes` on `device`, freed at tear-down.
  absl::StatusOr<DevicePtr> Alloc(uint64_t bytes, int device = 0) {
    absl::StatusOr<DevicePtr> ptr = backend_->Allocate(device, bytes);
    if (ptr.ok()) allocations_.push_back(*ptr);
    return ptr;
  }

  // A device buffer holding `contents`, uploaded synchronously.
  absl::StatusOr<DevicePtr> Upload(const std::string& contents,
                                   int device = 0) {
    absl::StatusOr<DevicePtr> ptr = Alloc(contents.size(), device);
    if (!ptr.ok()) return ptr;
    absl::StatusOr<StreamHandle> stream = backend_->CreateStream(device);
    if (!stream.ok()) return stream.status();
    absl::Status s = backend_->CopyHostToDevice(*ptr, contents.data(),
                                                contents.size(), *stream);
    if (s.ok()) s = backend_->SynchronizeStream(*stream);
    if (absl::Status d = backend_->DestroyStream(*stream); s.ok()) s = d;
    if (!s.ok()) return s;
    return ptr;
  }

  // `bytes` bytes read back after the work on `stream_` has finished.
  absl::StatusOr<std::string> Download(DevicePtr ptr, uint64_t bytes) {
    std::string out(bytes, '\0');
    absl::Status s = backend_->SynchronizeStream(stream_);
    if (s.ok()) s = backend_->CopyDeviceToHost(out.data(), ptr, bytes, stream_);
    if (s.ok()) s = backend_->SynchronizeStream(stream_);
    if (!s.ok()) return s;
    return out;
  }

  absl::Status Run(std::string op, std::vector<KernelArg> args,
                   double cost_us = 0) {
    KernelLaunch launch;
    launch.op = std::move(op);
    launch.args = std::move(args);
    launch.cost_us = cost_us;
    return backend_->Launch(launch, stream_);
  }

  std::unique_ptr<CudaBackend> backend_;
  StreamHandle stream_;
  std::vector<DevicePtr> allocations_;
};

TEST_F(CudaBackendTest, DescribesEveryDevice) {
  EXPECT_EQ(VisibleCudaDevices(), backend_->device_count());
  for (int d = 0; d < backend_->device_count(); ++d) {
    const DeviceInfo info = backend_->device_info(d);
    EXPECT_EQ(info.index, d);
    EXPECT_FALSE(info.name.empty());
    EXPECT_FALSE(info.simulated);
    EXPECT_GT(info.memory_total_bytes, 0u);
    // The context and other processes hold some of it.
    EXPECT_GT(info.memory_usable_bytes, 0u);
    EXPECT_LT(info.memory_usable_bytes, info.memory_total_bytes);
    EXPECT_EQ(UsableMemoryBytes(info), info.memory_usable_bytes);
    EXPECT_THAT(info.uuid,
                MatchesRegex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                             "[0-9a-f]{4}-[0-9a-f]{12}"));
  }
  EXPECT_TRUE(backend_->device_info(backend_->device_count()).name.empty());
}

TEST_F(CudaBackendTest, MemoryUsedCountsAllocations) {
  constexpr uint64_t kBytes = 256ull << 20;
  ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Alloc(kBytes));
  EXPECT_NE(ptr.address, 0u);
  EXPECT_EQ(ptr.device, 0);
  EXPECT_GE(backend_->memory_used_bytes(0), kBytes);
  EXPECT_LE(backend_->memory_used_bytes(0),
            backend_->device_info(0).memory_total_bytes);
}

TEST_F(CudaBackendTest, HostDeviceRoundTrip) {
  std::mt19937 rng(7);
  std::string data(1000003, '\0');  // odd size on purpose
  for (char& c : data) c = static_cast<char>(rng());
  ASSERT_OK_AND_ASSIGN(DevicePtr a, Upload(data));
  ASSERT_OK_AND_ASSIGN(DevicePtr b, Alloc(data.size()));
  ASSERT_OK(backend_->CopyDeviceToDevice(b, a, data.size(), stream_));
  ASSERT_OK_AND_ASSIGN(std::string back, Download(b, data.size()));
  EXPECT_TRUE(back == data);
}

TEST_F(CudaBackendTest, PaddedUploadZeroesTheTail) {
  const std::string junk(4099, 'j');
  ASSERT_OK_AND_ASSIGN(DevicePtr a, Upload(junk));
  ASSERT_OK(
      backend_->CopyHostToDevicePadded(a, "abc", 3, junk.size(), stream_));
  ASSERT_OK_AND_ASSIGN(std::string back, Download(a, junk.size()));
  EXPECT_TRUE(back == "abc" + std::string(junk.size() - 3, '\0'));
  ASSERT_OK(backend_->CopyHostToDevicePadded(a, nullptr, 0, 16, stream_));
  ASSERT_OK_AND_ASSIGN(back, Download(a, 17));
  EXPECT_TRUE(back == std::string(17, '\0'));
  EXPECT_EQ(backend_->CopyHostToDevicePadded(a, "abc", 3, 2, stream_).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaBackendTest, CopiesOutsideAllocationsAreRejected) {
  ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Alloc(1024));
  std::string host(2048, 'x');
  absl::Status s =
      backend_->CopyHostToDevice(Offset(ptr, 512), host.data(), 1024, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not inside an allocation"));
}

TEST_F(CudaBackendTest, OutOfMemoryIsResourceExhausted) {
  const uint64_t too_much = backend_->device_info(0).memory_total_bytes * 4;
  absl::StatusOr<DevicePtr> ptr = Alloc(too_much);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ptr.status().message(), HasSubstr("cudaErrorMemoryAllocation"));
  EXPECT_THAT(ptr.status().message(), HasSubstr("on device 0"));
  // The failure leaves the device usable.
  ASSERT_OK_AND_ASSIGN(DevicePtr small, Alloc(4096));
  EXPECT_NE(small.address, 0u);
}

TEST_F(CudaBackendTest, BadHandlesAndDevices) {
  EXPECT_EQ(backend_->CreateStream(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status s = backend_->CreateStream(backend_->device_count()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("out of range"));
  s = backend_->SynchronizeStream(StreamHandle{987654});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("unknown stream handle 987654"));
  s = backend_->QueryEvent(EventHandle{987654}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  s = backend_->Free(DevicePtr{0, 0x1234});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not the start of an allocation"));
  s = backend_->AddHostCallback(stream_, HostCallback());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("empty host callback"));
}

TEST_F(CudaBackendTest, FillWritesEveryDtype) {
  constexpr uint64_t kBytes = 40000;  // several blocks, all dtypes divide it
  ASSERT_OK_AND_ASSIGN(DevicePtr f32, Alloc(kBytes));
  ASSERT_OK_AND_ASSIGN(DevicePtr f64, Alloc(kBytes));
  ASSERT_OK_AND_ASSIGN(DevicePtr i32, Alloc(kBytes));
  ASSERT_OK_AND_ASSIGN(DevicePtr i64, Alloc(kBytes));
  ASSERT_OK_AND_ASSIGN(DevicePtr raw, Alloc(kBytes - 3));
  ASSERT_OK(Run("fill", {Buffer(f32, kBytes, DType::kFloat32), 2.5}));
  ASSERT_OK(Run("fill", {Buffer(f64, kBytes, DType::kFloat64), int64_t{-3}}));
  ASSERT_OK(Run("fill", {Buffer(i32, kBytes, DType::kInt32), 1e12}));
  ASSERT_OK(Run("fill", {Buffer(i64, kBytes, DType::kInt64), -7.9f}));
  ASSERT_OK(
      Run("fill", {Buffer(raw, kBytes - 3, DType::kBytes), int32_t{511}}));

  ASSERT_OK_AND_ASSIGN(std::string b, Download(f32, kBytes));
  EXPECT_EQ(FromBytes<float>(b), std::vector<float>(kBytes / 4, 2.5f));
  ASSERT_OK_AND_ASSIGN(b, Download(f64, kBytes));
  EXPECT_EQ(FromBytes<double>(b), std::vector<double>(kBytes / 8, -3.0));
  ASSERT_OK_AND_ASSIGN(b, Download(i32, kBytes));
  EXPECT_EQ(
      FromBytes<int32_t>(b),
      std::vector<int32_t>(kBytes / 4, std::numeric_limits<int32_t>::max()));
  ASSERT_OK_AND_ASSIGN(b, Download(i64, kBytes));
  EXPECT_EQ(FromBytes<int64_t>(b), std::vector<int64_t>(kBytes / 8, -7));
  ASSERT_OK_AND_ASSIGN(b, Download(raw, kBytes - 3));
  EXPECT_EQ(b, std::string(kBytes - 3, '\xff'));
}

TEST_F(CudaBackendTest, AxpyMatchesHostArithmetic) {
  constexpr int kN = (1 << 20) + 3;
  std::vector<float> x(kN), y(kN + 100);
  for (int i = 0; i < kN; ++i) x[i] = 0.5f * i - 17.25f;
  for (int i = 0; i < kN + 100; ++i) y[i] = 1.0f - 0.125f * i;
  ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(ToBytes(x)));
  ASSERT_OK_AND_ASSIGN(DevicePtr dy, Upload(ToBytes(y)));
  const float a = 1.7f;
  ASSERT_OK(Run("axpy", {a, Buffer(dx, kN * 4, DType::kFloat32, Access::kRead),
                         Buffer(dy, (kN + 100) * 4, DType::kFloat32)}));
  ASSERT_OK_AND_ASSIGN(std::string b, Download(dy, (kN + 100) * 4));
  const std::vector<float> got = FromBytes<float>(b);
  for (int i = 0; i < kN + 100; ++i) {
    // Elements past len(x) are untouched.
    const float want = i < kN ? a * x[i] + y[i] : y[i];
    ASSERT_EQ(got[i], want) << "at " << i;
  }
}

TEST_F(CudaBackendTest, ScaleMatchesHostArithmetic) {
  constexpr int kN = 300001;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = std::sin(0.001f * i) * 100.0f;
  ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(ToBytes(x)));
  ASSERT_OK(Run("scale", {int32_t{-3}, Buffer(dx, kN * 4, DType::kFloat32)}));
  ASSERT_OK_AND_ASSIGN(std::string b, Download(dx, kN * 4));
  const std::vector<float> got = FromBytes<float>(b);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], -3.0f * x[i]) << "at " << i;
}

TEST_F(CudaBackendTest, AddUsesTheShortestOperand) {
  constexpr int kN = 70000;
  std::vector<float> a(kN - 10), b(kN), out(kN, -1.0f);
  for (int i = 0; i < kN - 10; ++i) a[i] = 0.25f * i;
  for (int i = 0; i < kN; ++i) b[i] = 3.0f - i;
  ASSERT_OK_AND_ASSIGN(DevicePtr da, Upload(ToBytes(a)));
  ASSERT_OK_AND_ASSIGN(DevicePtr db, Upload(ToBytes(b)));
  ASSERT_OK_AND_ASSIGN(DevicePtr dout, Upload(ToBytes(out)));
  ASSERT_OK(Run("add", {Buffer(da, (kN - 10) * 4, DType::kFloat32),
                        Buffer(db, kN * 4, DType::kFloat32),
                        Buffer(dout, kN * 4, DType::kFloat32)}));
  ASSERT_OK_AND_ASSIGN(std::string bytes, Download(dout, kN * 4));
  const std::vector<float> got = FromBytes<float>(bytes);
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(got[i], i < kN - 10 ? a[i] + b[i] : -1.0f) << "at " << i;
  }
}

TEST_F(CudaBackendTest, ReduceSumSmallLargeAndEmpty) {
  for (int n : {0, 1, 1000, 3 * 1000 * 1000 + 5}) {
    SCOPED_TRACE(n);
    std::vector<float> x(n);
    double want = 0;
    for (int i = 0; i < n; ++i) {
      x[i] = static_cast<float>((i % 1000) * 0.001 - 0.3);
      want += x[i];
    }
    // Upload needs at least one byte; the argument says how many count.
    std::string bytes = ToBytes(x);
    if (bytes.empty()) bytes.assign(4, '\0');
    ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(bytes));
    ASSERT_OK_AND_ASSIGN(DevicePtr dout,
                         Upload(ToBytes(std::vector<float>{5.0f, 9.0f})));
    ASSERT_OK(Run("reduce_sum",
                  {Buffer(dx, uint64_t{4} * n, DType::kFloat32, Access::kRead),
                   Buffer(dout, 8, DType::kFloat32, Access::kWrite)}));
    ASSERT_OK_AND_ASSIGN(std::string out, Download(dout, 8));
    const std::vector<float> got = FromBytes<float>(out);
    EXPECT_FLOAT_EQ(got[0], static_cast<float>(want));
    EXPECT_EQ(got[1], 9.0f);  // only element 0 is written
  }
}

HostBufferArg HostF32(std::vector<float>& v) {
  return HostBufferArg{v.data(), v.size() * sizeof(float), DType::kFloat32,
                       Access::kReadWrite};
}

// Inputs that exercise rounding: no simple binary fractions.
std::vector<float> Wavy(int n, float phase) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(0.37f * i + phase) * 3.3f;
  return v;
}

TEST_F(CudaBackendTest, SubMulDivMatchTheCpuReference) {
  constexpr int kN = 100003;
  for (const char* op : {"sub", "mul", "div"}) {
    for (bool broadcast : {false, true}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(absl::StrCat(op, broadcast ? " broadcast" : "",
                                  in_place ? " in place" : ""));
        std::vector<float> a = Wavy(kN, 0.5f);
        std::vector<float> b =
            broadcast ? std::vector<float>{-1.7f} : Wavy(kN + 7, 1.25f);
        std::vector<float> out(kN + 5, 42.0f);  // past len(a): untouched
        ASSERT_OK_AND_ASSIGN(DevicePtr da, Upload(ToBytes(a)));
        ASSERT_OK_AND_ASSIGN(DevicePtr db, Upload(ToBytes(b)));
        ASSERT_OK_AND_ASSIGN(DevicePtr dout, Upload(ToBytes(out)));
        const DevicePtr dst = in_place ? da : dout;
        const uint64_t dst_bytes = in_place ? kN * 4 : (kN + 5) * 4;
        ASSERT_OK(
            Run(op, {Buffer(da, kN * 4, DType::kFloat32, Access::kRead),
                     Buffer(db, b.size() * 4, DType::kFloat32, Access::kRead),
                     Buffer(dst, dst_bytes, DType::kFloat32, Access::kWrite)}));
        std::vector<float>& want = in_place ? a : out;
        ASSERT_OK(CpuKernelTable::WithBuiltins().Run(
            op, {HostF32(a), HostF32(b), HostF32(want)}));
        ASSERT_OK_AND_ASSIGN(std::string bytes, Download(dst, dst_bytes));
        const std::vector<float> got = FromBytes<float>(bytes);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          // Bit for bit (both round to nearest); NaN never occurs here.
          ASSERT_EQ(got[i], want[i]) << "at " << i;
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, DotMatchesTheCpuReferenceAtAnyLength) {
  for (int n : {0, 1, 255, 1000, 2049 * 8, 3 * 1000 * 1000 + 5}) {
    SCOPED_TRACE(n);
    std::vector<float> x = Wavy(n + 3, 0.1f);
    std::vector<float> y = Wavy(n, 2.0f);
    std::string ybytes = ToBytes(y);
    if (ybytes.empty()) ybytes.assign(4, '\0');
    ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(ToBytes(x)));
    ASSERT_OK_AND_ASSIGN(DevicePtr dy, Upload(ybytes));
    // Stale contents: the launch sequence must not accumulate onto them.
    ASSERT_OK_AND_ASSIGN(DevicePtr dout,
                         Upload(ToBytes(std::vector<float>{5.0f, 9.0f})));
    for (int repeat = 0; repeat < 2; ++repeat) {
      ASSERT_OK(Run(
          "dot", {Buffer(dx, x.size() * 4, DType::kFloat32, Access::kRead),
                  Buffer(dy, uint64_t{4} * n, DType::kFloat32, Access::kRead),
                  Buffer(dout, 8, DType::kFloat32, Access::kReadWrite)}));
    }
    std::vector<float> want = {5.0f, 9.0f};
    ASSERT_OK(DotKernel({HostF32(x), HostF32(y), HostF32(want)}));
    ASSERT_OK_AND_ASSIGN(std::string out, Download(dout, 8));
    const std::vector<float> got = FromBytes<float>(out);
    EXPECT_FLOAT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], 9.0f);  // only element 0 is written
  }
}

TEST_F(CudaBackendTest, GemvMatchesTheCpuReference) {
  struct Shape {
    int rows, cols;
  };
  for (Shape shape : {Shape{4, 3}, Shape{1, 1}, Shape{33, 1000},
                      Shape{5000, 37}, Shape{1, 100000}, Shape{70000, 2}}) {
    SCOPED_TRACE(absl::StrCat(shape.rows, " x ", shape.cols));
    const int m = shape.rows, k = shape.cols;
    std::vector<float> a = Wavy(m * k + 11, 0.3f);  // longer than rows * cols
    std::vector<float> x = Wavy(k, 1.1f);
    std::vector<float> y(m + 2, -8.0f);
    ASSERT_OK_AND_ASSIGN(DevicePtr da, Upload(ToBytes(a)));
    ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(ToBytes(x)));
    ASSERT_OK_AND_ASSIGN(DevicePtr dy, Upload(ToBytes(y)));
    ASSERT_OK(Run("gemv",
                  {int32_t{m}, int64_t{k},
                   Buffer(da, a.size() * 4, DType::kFloat32, Access::kRead),
                   Buffer(dx, x.size() * 4, DType::kFloat32, Access::kRead),
                   Buffer(dy, y.size() * 4, DType::kFloat32, Access::kWrite)}));
    ASSERT_OK(GemvKernel(
        {int32_t{m}, int32_t{k}, HostF32(a), HostF32(x), HostF32(y)}));
    ASSERT_OK_AND_ASSIGN(std::string bytes, Download(dy, y.size() * 4));
    const std::vector<float> got = FromBytes<float>(bytes);
    for (int r = 0; r < m + 2; ++r) {
      ASSERT_FLOAT_EQ(got[r], y[r]) << "row " << r;
    }
    EXPECT_EQ(got[m], -8.0f);
    EXPECT_EQ(got[m + 1], -8.0f);
  }
}

TEST_F(CudaBackendTest, LessAndGreaterMatchTheCpuReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float x0 : {-1.0f, 0.0f, 0.5f, 2.0f, nan}) {
    for (const char* op : {"less", "greater"}) {
      SCOPED_TRACE(absl::StrCat(op, " ", x0));
      std::vector<float> x = {x0, 100.0f};
      std::vector<int32_t> flag = {7, 7};
      ASSERT_OK_AND_ASSIGN(DevicePtr dx, Upload(ToBytes(x)));
      ASSERT_OK_AND_ASSIGN(DevicePtr dflag, Upload(ToBytes(flag)));
      ASSERT_OK(Run(op, {Buffer(dx, 8, DType::kFloat32, Access::kRead), 0.5,
                         Buffer(dflag, 8, DType::kInt32, Access::kWrite)}));
      ASSERT_OK(CpuKernelTable::WithBuiltins().Run(
          op, {HostF32(x), 0.5,
               HostBufferArg{flag.data(), 8, DType::kInt32, Access::kWrite}}));
      ASSERT_OK_AND_ASSIGN(std::string bytes, Download(dflag, 8));
      EXPECT_EQ(FromBytes<int32_t>(bytes), flag);
      EXPECT_EQ(flag[1], 7);
    }
  }
}

TEST_F(CudaBackendTest, NewOpsRejectWhatTheCpuReferenceRejects) {
  ASSERT_OK_AND_ASSIGN(DevicePtr p, Alloc(64));
  const auto f32 = [&](uint64_t offset, uint64_t bytes) {
    return Buffer(Offset(p, offset), bytes, DType::kFloat32);
  };
  // gemv: y inside A, y is x, A too small, a floating-point dimension.
  absl::Status s =
      Run("gemv", {int32_t{2}, int32_t{2}, f32(0, 16), f32(16, 8), f32(8, 8)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("argument 4 (y) overlaps argument 2 (A)"));
  s = Run("gemv", {int32_t{2}, int32_t{2}, f32(0, 16), f32(16, 8), f32(16, 8)});
  EXPECT_THAT(s.message(), HasSubstr("argument 4 (y) overlaps argument 3 (x)"));
  s = Run("gemv",
          {int32_t{3}, int32_t{2}, f32(0, 16), f32(16, 8), f32(32, 12)});
  EXPECT_THAT(s.message(), HasSubstr("(A) holds 4 float32 elements, fewer "
                                     "than rows * cols = 6"));
  s = Run("gemv", {2.0f, int32_t{2}, f32(0, 16), f32(16, 8), f32(32, 8)});
  EXPECT_THAT(s.message(), HasSubstr("(rows) must be an integer scalar"));
  // dot into its input.
  s = Run("dot", {f32(0, 16), f32(16, 16), f32(20, 4)});
  EXPECT_THAT(s.message(), HasSubstr("argument 2 (out) overlaps argument 1"));
  // sub: b of 2 elements for 4; an output shifted against its input.
  s = Run("sub", {f32(0, 16), f32(16, 8), f32(32, 16)});
  EXPECT_THAT(s.message(), HasSubstr("(b) holds 2 float32 elements"));
  s = Run("mul", {f32(0, 16), f32(32, 4), f32(4, 16)});
  EXPECT_THAT(s.message(), HasSubstr("overlaps argument 0 without being"));
  // less: flag must be int32.
  s = Run("less", {f32(0, 4), 1.0f, f32(4, 4)});
  EXPECT_THAT(s.message(), HasSubstr("(flag) must be int32"));
}

TEST_F(CudaBackendTest, CopyOpHonoursSizesAndOverlap) {
  std::string src(1000, '\0');
  for (int i = 0; i < 1000; ++i) src[i] = static_cast<char>(i * 7);
  ASSERT_OK_AND_ASSIGN(DevicePtr dsrc, Upload(src));
  ASSERT_OK_AND_ASSIGN(DevicePtr ddst, Upload(std::string(2000, '\x11')));
  ASSERT_OK(Run("copy", {Buffer(dsrc, 1000, DType::kBytes, Access::kRead),
                         Buffer(ddst, 2000, DType::kBytes, Access::kWrite)}));
  ASSERT_OK_AND_ASSIGN(std::string got, Download(ddst, 2000));
  EXPECT_EQ(got, src + std::string(1000, '\x11'));

  absl::Status s = Run("copy", {Buffer(ddst, 2000, DType::kBytes),
                                Buffer(dsrc, 1000, DType::kBytes)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("smaller than source"));

  // Overlapping views of one allocation behave like memmove.
  std::string expected = got;
  std::memmove(expected.data() + 100, expected.data(), 1500);
  ASSERT_OK(Run("copy", {Buffer(ddst, 1500, DType::kBytes),
                         Buffer(Offset(ddst, 100), 1500, DType::kBytes)}));
  ASSERT_OK_AND_ASSIGN(got, Download(ddst, 2000));
  EXPECT_EQ(got, expected);
}

TEST_F(CudaBackendTest, RejectsBadLaunches) {
  ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Alloc(64));
  absl::Status s = Run("no_such_op", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("no_such_op"));
  s = Run("scale", {2.0f, Buffer(ptr, 64, DType::kInt32)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("must be float32"));
  s = Run("axpy", {2.0f, Buffer(ptr, 64, DType::kFloat32)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected 3 arguments"));
  s = Run("fill", {Buffer(ptr, 128, DType::kFloat32), 1.0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not inside an allocation"));
  s = Run("spin", {Buffer(ptr, 64, DType::kBytes), 1.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("must be a buffer"));
}

TEST_F(CudaBackendTest, SpinOccupiesTheStreamForItsCost) {
  ASSERT_OK_AND_ASSIGN(EventHandle done, backend_->CreateEvent(0));
  const absl::Time start = absl::Now();
  ASSERT_OK(Run("spin", {}, /*cost_us=*/50000));
  ASSERT_OK(backend_->RecordEvent(done, stream_));
  ASSERT_OK_AND_ASSIGN(bool finished_early, backend_->QueryEvent(done));
  EXPECT_FALSE(finished_early);
  ASSERT_OK(backend_->SynchronizeStream(stream_));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(49));
  ASSERT_OK_AND_ASSIGN(bool finished, backend_->QueryEvent(done));
  EXPECT_TRUE(finished);
  ASSERT_OK(backend_->DestroyEvent(done));
}

// Four spins of 40 ms on four streams: spins that each fill the device
// take turns (about 160 ms), quarter-device spins run side by side (about
// 40 ms), as the cost model shares a device by occupancy.
TEST_F(CudaBackendTest, SpinsShareTheDeviceByOccupancy) {
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(StreamHandle s, backend_->CreateStream(0));
    streams.push_back(s);
  }
  auto four_spins = [&](int32_t occupancy_units) -> absl::Duration {
    const absl::Time start = absl::Now();
    for (StreamHandle s : streams) {
      KernelLaunch spin;
      spin.op = "spin";
      spin.cost_us = 40000;
      spin.occupancy_units = occupancy_units;
      EXPECT_TRUE(backend_->Launch(spin, s).ok());
    }
    for (StreamHandle s : streams) {
      EXPECT_TRUE(backend_->SynchronizeStream(s).ok());
    }
    return absl::Now() - start;
  };
  const absl::Duration full = four_spins(scheduler::kOccupancyUnits);
  const absl::Duration quarter = four_spins(scheduler::kOccupancyUnits / 4);
  EXPECT_GE(full, absl::Milliseconds(150)) << "full-device spins overlapped";
  EXPECT_GE(quarter, absl::Milliseconds(39));
  EXPECT_LT(quarter, absl::Milliseconds(120))
      << "quarter-device spins did not run side by side";
  for (StreamHandle s : streams) {
    EXPECT_TRUE(backend_->DestroyStream(s).ok());
  }
}

// Downloads of a chunk or more go through page-locked chunks; more at
// once than there are chunks copy straight into their buffers. Every byte
// arrives either way.
TEST_F(CudaBackendTest, LargeDownloadsArriveWhole) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  for (uint64_t bytes : {8 * kMiB - 1, 8 * kMiB, 20 * kMiB + 123}) {
    std::string contents(bytes, '\0');
    for (uint64_t i = 0; i < bytes; ++i) {
      contents[i] = static_cast<char>((i * 7 + i / 4099) & 0xff);
    }
    ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Upload(contents));
    HostBuffer out;
    ASSERT_OK(backend_->CopyDeviceToHostBuffer(&out, ptr, bytes, stream_));
    ASSERT_OK(backend_->SynchronizeStream(stream_));
    EXPECT_EQ(out.size(), bytes);
    EXPECT_TRUE(out.ToString() == contents) << bytes << " bytes differ";
  }
  constexpr int kAtOnce = 20;
  const std::string pattern(8 * kMiB, 'w');
  ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Upload(pattern));
  std::vector<StreamHandle> streams;
  std::vector<HostBuffer> outs(kAtOnce);
  for (int i = 0; i < kAtOnce; ++i) {
    ASSERT_OK_AND_ASSIGN(StreamHandle s, backend_->CreateStream(0));
    streams.push_back(s);
    ASSERT_OK(
        backend_->CopyDeviceToHostBuffer(&outs[i], ptr, pattern.size(), s));
  }
  for (int i = 0; i < kAtOnce; ++i) {
    ASSERT_OK(backend_->SynchronizeStream(streams[i]));
    EXPECT_TRUE(outs[i].ToString() == pattern) << "download " << i;
    EXPECT_TRUE(backend_->DestroyStream(streams[i]).ok());
  }
}

TEST_F(CudaBackendTest, SmallDownloadsIntoPageableMemoryDoNotWait) {
  // Behind a 300 ms spin, a 4-byte copy into pageable memory returns while
  // the spin still runs, and the bytes are there once the stream is done,
  // in stream order before a host callback added after it.
  const std::string contents = "abcd";
  ASSERT_OK_AND_ASSIGN(DevicePtr ptr, Upload(contents));
  ASSERT_OK_AND_ASSIGN(EventHandle copied, backend_->CreateEvent(0));
  ASSERT_OK(Run("spin", {}, /*cost_us=*/300000));
  auto out = std::make_unique<char[]>(4);
  ASSERT_OK(backend_->CopyDeviceToHost(out.get(), ptr, 4, stream_));
  ASSERT_OK(backend_->RecordEvent(copied, stream_));
  ASSERT_OK_AND_ASSIGN(bool done_already, backend_->QueryEvent(copied));
  EXPECT_FALSE(done_already) << "the copy waited for the spin";
  absl::Notification called;
  std::string seen;
  ASSERT_OK(backend_->AddHostCallback(stream_, [&](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    seen.assign(out.get(), 4);
    called.Notify();
  }));
  ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(seen, contents);
  ASSERT_OK(backend_->SynchronizeStream(stream_));
  ASSERT_OK(backend_->DestroyEvent(copied));
}

TEST_F(CudaBackendTest, EventsOrderWorkAcrossStreams) {
  constexpr uint64_t kBytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(DevicePtr x, Upload(std::string(kBytes, '\0')));
  ASSERT_OK_AND_ASSIGN(DevicePtr y, Upload(std::string(kBytes, '\0')));
  ASSERT_OK_AND_ASSIGN(StreamHandle other, backend_->CreateStream(0));
  ASSERT_OK_AND_ASSIGN(EventHandle written, backend_->CreateEvent(0));

  // Producer: a long spin delays the write of 7s into x.
  ASSERT_OK(Run("spin", {Buffer(x, kBytes, DType::kFloat32)}, 100000));
  ASSERT_OK(Run("fill", {Buffer(x, kBytes, DType::kFloat32), 7.0f}));
  ASSERT_OK(backend_->RecordEvent(written, stream_));
  // Consumer on another stream: without the wait it would copy zeros.
  ASSERT_OK(backend_->StreamWaitEvent(other, written));
  KernelLaunch copy;
  copy.op = "copy";
  copy.args = {Buffer(x, kBytes, DType::kFloat32, Access::kRead),
               Buffer(y, kBytes, DType::kFloat32, Access::kWrite)};
  ASSERT_OK(backend_->Launch(copy, other));
  std::string host(kBytes, '\0');
  ASSERT_OK(backend_->CopyDeviceToHost(host.data(), y, kBytes, other));
  ASSERT_OK(backend_->SynchronizeStream(other));
  EXPECT_EQ(FromBytes<float>(host), std::vector<float>(kBytes / 4, 7.0f));
  ASSERT_OK_AND_ASSIGN(bool recorded_done, backend_->QueryEvent(written));
  EXPECT_TRUE(recorded_done);
  ASSERT_OK(backend_->DestroyEvent(written));
  ASSERT_OK(backend_->DestroyStream(other));
}

TEST_F(CudaBackendTest, HostCallbacksRunInStreamOrderAfterTheWork) {
  constexpr uint64_t kBytes = 4096;
  ASSERT_OK_AND_ASSIGN(DevicePtr x, Alloc(kBytes));
  std::vector<float> host(kBytes / 4, 0.0f);
  absl::Mutex mu;
  std::vector<std::string> order;
  std::vector<float> seen;
  absl::Notification done;

  ASSERT_OK(Run("spin", {}, 20000));
  ASSERT_OK(Run("fill", {Buffer(x, kBytes, DType::kFloat32), 4.5}));
  ASSERT_OK(backend_->CopyDeviceToHost(host.data(), x, kBytes, stream_));
  ASSERT_OK(backend_->AddHostCallback(stream_, [&](absl::Status status) {
    absl::MutexLock lock(&mu);
    order.push_back(status.ok() ? "first" : std::string(status.message()));
    seen = host;  // the copy before the callback has landed
  }));
  ASSERT_OK(backend_->AddHostCallback(stream_, [&](absl::Status status) {
    {
      absl::MutexLock lock(&mu);
      order.push_back(status.ok() ? "second" : std::string(status.message()));
    }
    // Callbacks run on a backend thread that may enqueue more work.
    const absl::Status enqueued =
        backend_->AddHostCallback(stream_, [&](absl::Status inner) {
          {
            absl::MutexLock lock(&mu);
            order.push_back(inner.ok() ? "nested"
                                       : std::string(inner.message()));
          }
          done.Notify();
        });
    if (!enqueued.ok()) {
      absl::MutexLock lock(&mu);
      order.push_back(std::string(enqueued.message()));
      done.Notify();
    }
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  EXPECT_THAT(order, ElementsAre("first", "second", "nested"));
  EXPECT_EQ(seen, std::vector<float>(kBytes / 4, 4.5f));
}

TEST_F(CudaBackendTest, DestructionWaitsForCallbacksAddedByCallbacks) {
  CudaBackend* backend = backend_.get();
  const StreamHandle stream = stream_;
  absl::Notification outer_ran;
  absl::Notification nested_ran;
  absl::Mutex mu;
  absl::Status nested_status = absl::UnknownError("nested never ran");
  ASSERT_OK(Run("spin", {}, 20000));
  ASSERT_OK(backend_->AddHostCallback(
      stream_, [&, backend, stream](absl::Status status) {
        // Runs while the destructor below may already be waiting: more work and
        // a callback behind it must still be delivered before it returns.
        KernelLaunch spin;
        spin.op = "spin";
        spin.cost_us = 20000;
        absl::Status s = status;
        if (s.ok()) s = backend->Launch(spin, stream);
        if (s.ok()) {
          s = backend->AddHostCallback(stream, [&](absl::Status inner) {
            absl::MutexLock lock(&mu);
            nested_status = inner;
            nested_ran.Notify();
          });
        }
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          nested_status = s;
        }
        outer_ran.Notify();
      }));
  // The destructor releases the stream; TearDown has nothing left to do.
  backend_.reset();
  EXPECT_TRUE(outer_ran.HasBeenNotified());
  EXPECT_TRUE(nested_ran.HasBeenNotified());
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(nested_status.ok()) << nested_status;
}

TEST_F(CudaBackendTest, PeerCopyBetweenDevices) {
  if (backend_->device_count() < 2) GTEST_SKIP() << "needs two devices";
  constexpr uint64_t kBytes = (8 << 20) + 12;
  std::string data(kBytes, '\0');
  std::mt19937 rng(11);
  for (char& c : data) c = static_cast<char>(rng());
  ASSERT_OK_AND_ASSIGN(DevicePtr on0, Upload(data, 0));
  ASSERT_OK_AND_ASSIGN(DevicePtr on1, Alloc(kBytes, 1));
  ASSERT_OK_AND_ASSIGN(DevicePtr back_on0, Alloc(kBytes, 0));
  ASSERT_OK_AND_ASSIGN(StreamHandle stream1, backend_->CreateStream(1));
  ASSERT_OK_AND_ASSIGN(EventHandle copied, backend_->CreateEvent(1));

  // Device 0 -> device 1 through the backend's copy, issued on device 1.
  ASSERT_OK(backend_->CopyDeviceToDevice(on1, on0, kBytes, stream1));
  ASSERT_OK(backend_->RecordEvent(copied, stream1));
  // Device 1 -> device 0 through the copy op, on device 0 after the event.
  ASSERT_OK(backend_->StreamWaitEvent(stream_, copied));
  ASSERT_OK(Run("copy", {Buffer(on1, kBytes, DType::kBytes, Access::kRead),
                         Buffer(back_on0, kBytes, DType::kBytes)}));
  ASSERT_OK_AND_ASSIGN(std::string got, Download(back_on0, kBytes));
  EXPECT_TRUE(got == data);

  // An event of device 1 cannot be recorded on a stream of device 0.
  absl::Status s = backend_->RecordEvent(copied, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("belongs to device 1"));
  ASSERT_OK(backend_->DestroyEvent(copied));
  ASSERT_OK(backend_->DestroyStream(stream1));
}

}  // namespace
}  // namespace weft::runtime
