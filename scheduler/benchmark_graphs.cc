#include "scheduler/benchmark_graphs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weft::scheduler {
namespace {

constexpr double kBytesPerUs = kDeviceGbps * 1e3;  // 1 GB/s = 1e3 B/us
constexpr uint64_t kFloat = 4;
constexpr uint64_t kDouble = 8;
constexpr uint64_t kInt = 4;

// `lo` at kMinScale to `hi` at kMaxScale, in even steps.
uint64_t Scaled(uint64_t lo, uint64_t hi, int scale) {
  scale = std::clamp(scale, kMinScale, kMaxScale);
  return lo + (hi - lo) * static_cast<uint64_t>(scale - kMinScale) /
                  static_cast<uint64_t>(kMaxScale - kMinScale);
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// One buffer argument of a kernel and how many times the kernel streams
// through the buffer (2: read, then overwritten in place; 1/16: one
// partition's rows).
struct Use {
  BufferId buffer;
  Access access;
  double passes;
};

Use Read(BufferId b, double passes = 1) { return {b, Access::kRead, passes}; }
// GrCUDA treats every non-const pointer as read and written.
Use Rw(BufferId b, double passes = 1) {
  return {b, Access::kReadWrite, passes};
}
Use Write(BufferId b) { return {b, Access::kWrite, 1}; }

// Builds one graph of `spin` nodes; buffer and node names must be unique.
class ShapeBuilder {
 public:
  explicit ShapeBuilder(std::string name) : name_(std::move(name)) {}

  // An array the host writes at initialization only, or scratch: free to
  // create on any device (see the header).
  BufferId Resident(std::string name, uint64_t bytes) {
    return AddBuffer(std::move(name), bytes, BufferSpec::Init::kZero);
  }
  // An array the host rewrites every iteration: uploaded from the host.
  BufferId HostWritten(std::string name, uint64_t bytes) {
    return AddBuffer(std::move(name), bytes, BufferSpec::Init::kData);
  }
  void MarkOutput(BufferId b) { buffers_[b].output = true; }

  // Bytes a kernel with these uses streams.
  double Bytes(const std::vector<Use>& uses) const {
    double bytes = 0;
    for (const Use& use : uses) {
      bytes +=
          use.passes * static_cast<double>(buffers_[use.buffer].size_bytes);
    }
    return bytes;
  }

  // A kernel costed by the header's rule.
  NodeId Kernel(std::string name, const std::vector<Use>& uses,
                double factor = 1) {
    return Spin(std::move(name), uses,
                kLaunchUs + factor * Bytes(uses) / kBytesPerUs);
  }

  NodeId Spin(std::string name, const std::vector<Use>& uses, double cost_us) {
    NodeSpec node;
    node.name = std::move(name);
    node.op = "spin";
    node.cost_us = cost_us;
    for (const Use& use : uses) {
      node.args.push_back(BufferUse{use.buffer, use.access});
    }
    nodes_.push_back(std::move(node));
    return static_cast<NodeId>(nodes_.size() - 1);
  }

  Graph Build() && {
    return Graph(name_, std::move(buffers_), std::move(nodes_));
  }

 private:
  BufferId AddBuffer(std::string name, uint64_t bytes, BufferSpec::Init init) {
    BufferSpec buffer;
    buffer.name = std::move(name);
    buffer.size_bytes = bytes;
    buffer.init = init;
    // The planner looks only at the size; one byte of data marks the
    // buffer as host-initialized.
    if (init == BufferSpec::Init::kData) buffer.data = "x";
    buffers_.push_back(std::move(buffer));
    return static_cast<BufferId>(buffers_.size() - 1);
  }

  std::string name_;
  std::vector<BufferSpec> buffers_;
  std::vector<NodeSpec> nodes_;
};

BenchmarkCase MakeCase(std::string name, Suite suite, ShapeBuilder builder) {
  return BenchmarkCase{std::move(name), suite, std::move(builder).Build()};
}

std::string ScaleName(absl::string_view shape, int scale) {
  return absl::StrCat(shape, " scale ", scale);
}

// The data-transfer-to-square ratio of B1 (see the header).
constexpr double kVecFactor = 4;
// Black-Scholes kernels as long as their uploads (see the header).
constexpr double kBlackScholesFactor = 18;

// One B1 join: two squares and a reduction; `suffix` names partition i.
// B1's squares take their input as a non-const pointer, B1M's as const.
void AddVecJoin(ShapeBuilder& b, uint64_t n, const std::string& suffix,
                Access input) {
  const BufferId x = b.HostWritten("x" + suffix, n * kFloat);
  const BufferId y = b.HostWritten("y" + suffix, n * kFloat);
  const BufferId x1 = b.Resident("x1" + suffix, n * kFloat);
  const BufferId y1 = b.Resident("y1" + suffix, n * kFloat);
  const BufferId res = b.HostWritten("res" + suffix, kFloat);
  b.MarkOutput(res);
  b.Kernel("square_x" + suffix, {{x, input, 1}, Rw(x1)}, kVecFactor);
  b.Kernel("square_y" + suffix, {{y, input, 1}, Rw(y1)}, kVecFactor);
  b.Kernel("reduce" + suffix, {Read(x1), Read(y1), Rw(res)}, kVecFactor);
}

void AddBlackScholes(ShapeBuilder& b, int kernels, uint64_t n) {
  for (int i = 0; i < kernels; ++i) {
    const BufferId x = b.HostWritten(absl::StrCat("x", i), n * kDouble);
    const BufferId y = b.Resident(absl::StrCat("y", i), n * kDouble);
    b.MarkOutput(y);
    b.Kernel(absl::StrCat("bs", i), {Read(x), Rw(y)}, kBlackScholesFactor);
  }
}

}  // namespace

BenchmarkCase B1Vec(int scale) {
  ShapeBuilder b("b1_vec");
  AddVecJoin(b, Scaled(160'000'000, 950'000'000, scale), "",
             Access::kReadWrite);
  return MakeCase(ScaleName("B1", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B5BlackScholes(int scale) {
  ShapeBuilder b("b5_black_scholes");
  AddBlackScholes(b, 10, Scaled(10'000'000, 35'000'000, scale));
  return MakeCase(ScaleName("B5", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B6Ml(int scale) {
  const uint64_t n = Scaled(1'600'000, 8'000'000, scale);
  const uint64_t f = 200, c = 10;
  ShapeBuilder b("b6_ml");
  const BufferId x = b.Resident("X", n * f * kInt);
  const BufferId z = b.Resident("Z", n * f * kFloat);
  const BufferId nbf = b.Resident("NBF", c * f * kFloat);
  const BufferId rc = b.Resident("RC", c * f * kFloat);
  const BufferId ri = b.Resident("RI", c * kFloat);
  const BufferId amax = b.Resident("AMAX", n * kFloat);
  const BufferId l = b.Resident("L", n * kFloat);
  const BufferId r1 = b.HostWritten("R1", n * c * kFloat);
  const BufferId r2 = b.HostWritten("R2", n * c * kFloat);
  const BufferId r = b.Resident("R", n * kInt);
  b.MarkOutput(r);

  struct Step {
    const char* name;
    std::vector<Use> uses;
    bool naive_bayes;
  };
  // GrCUDA's issue order; the two chains interleave.
  const std::vector<Step> steps = {
      {"rr_1", {Read(x), Rw(z)}, false},
      {"nb_1", {Read(x), Rw(nbf), Rw(r1, 2)}, true},
      {"rr_2", {Rw(z), Rw(rc), Rw(r2, 2)}, false},
      {"nb_2", {Rw(r1), Rw(amax)}, true},
      {"nb_3", {Rw(r1), Rw(amax), Rw(l)}, true},
      {"rr_3", {Rw(r2, 2), Rw(ri)}, false},
      {"nb_4", {Rw(r1, 2), Rw(l)}, true},
      {"softmax_1", {Rw(r1, 2)}, true},
      {"softmax_2", {Rw(r2, 2)}, false},
  };
  double rr_bytes = 0, nb_bytes = 0;
  for (const Step& step : steps) {
    (step.naive_bayes ? nb_bytes : rr_bytes) += b.Bytes(step.uses);
  }
  // "RR takes ~2x the time of NB".
  const double nb_factor = rr_bytes / (2 * nb_bytes);
  for (const Step& step : steps) {
    b.Kernel(step.name, step.uses, step.naive_bayes ? nb_factor : 1);
  }
  b.Kernel("argmax", {Rw(r1), Rw(r2), Rw(r)});
  return MakeCase(ScaleName("B6", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B7Hits(int scale, int iterations) {
  const uint64_t n = Scaled(25'000'000, 180'000'000, scale);
  const uint64_t nnz = 3 * n;
  ShapeBuilder b("b7_hits");
  // The CSR matrix and its transpose ("2"), written at initialization.
  const BufferId ptr = b.Resident("ptr", (n + 1) * kInt);
  const BufferId idx = b.Resident("idx", nnz * kInt);
  const BufferId val = b.Resident("val", nnz * kInt);
  const BufferId ptr2 = b.Resident("ptr2", (n + 1) * kInt);
  const BufferId idx2 = b.Resident("idx2", nnz * kInt);
  const BufferId val2 = b.Resident("val2", nnz * kInt);
  // reset_result rewrites the scores and norms every iteration.
  const BufferId auth1 = b.HostWritten("auth1", n * kFloat);
  const BufferId auth2 = b.HostWritten("auth2", n * kFloat);
  const BufferId hub1 = b.HostWritten("hub1", n * kFloat);
  const BufferId hub2 = b.HostWritten("hub2", n * kFloat);
  const BufferId auth_norm = b.HostWritten("auth_norm", kFloat);
  const BufferId hub_norm = b.HostWritten("hub_norm", kFloat);
  b.MarkOutput(auth1);
  b.MarkOutput(hub1);
  // Each iteration reads the scores the previous one wrote, which stands
  // for GrCUDA's host barrier between iterations.
  for (int it = 0; it < iterations; ++it) {
    const std::string s = absl::StrCat("_", it);
    b.Kernel("spmv_a" + s,
             {Read(ptr2), Read(idx2), Read(val2), Read(hub1), Rw(auth2)});
    b.Kernel("spmv_h" + s,
             {Read(ptr), Read(idx), Read(val), Read(auth1), Rw(hub2)});
    b.Kernel("sum_a" + s, {Read(auth2), Rw(auth_norm)});
    b.Kernel("sum_h" + s, {Read(hub2), Rw(hub_norm)});
    b.Kernel("divide_a" + s, {Read(auth2), Rw(auth1), Rw(auth_norm)});
    b.Kernel("divide_h" + s, {Read(hub2), Rw(hub1), Rw(hub_norm)});
  }
  return MakeCase(ScaleName("B7", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B8Image(int scale) {
  const uint64_t side = Scaled(6400, 20000, scale);
  const uint64_t image_bytes = side * side * kFloat;
  ShapeBuilder b("b8_image");
  const BufferId image = b.Resident("image", image_bytes);
  const BufferId bs = b.Resident("blurred_small", image_bytes);
  const BufferId bl = b.Resident("blurred_large", image_bytes);
  const BufferId bu = b.Resident("blurred_unsharpen", image_bytes);
  const BufferId ms = b.Resident("mask_small", image_bytes);
  const BufferId ml = b.Resident("mask_large", image_bytes);
  const BufferId iu = b.Resident("image_unsharpen", image_bytes);
  const BufferId img2 = b.Resident("image2", image_bytes);
  const BufferId img3 = b.Resident("image3", image_bytes);
  const BufferId ks = b.Resident("kernel_small", 3 * 3 * kFloat);
  const BufferId kl = b.Resident("kernel_large", 5 * 5 * kFloat);
  const BufferId ku = b.Resident("kernel_unsharpen", 3 * 3 * kFloat);
  const BufferId max = b.HostWritten("maximum", kFloat);
  const BufferId min = b.HostWritten("minimum", kFloat);
  b.MarkOutput(img3);
  // The first reset is launched with n = 0: it touches nothing.
  b.Kernel("reset_1d", {Rw(img3, 0)});
  b.Kernel("reset_2d", {Rw(img3)});
  b.Kernel("blur_small", {Read(image), Rw(bs), Read(ks)});
  b.Kernel("blur_large", {Read(image), Rw(bl), Read(kl)});
  b.Kernel("blur_unsharpen", {Read(image), Rw(bu), Read(ku)});
  b.Kernel("sobel_small", {Rw(bs), Rw(ms)});
  b.Kernel("sobel_large", {Rw(bl), Rw(ml)});
  b.Kernel("maximum", {Read(ml), Rw(max)});
  b.Kernel("minimum", {Read(ml), Rw(min)});
  b.Kernel("extend", {Rw(ml, 2), Read(min), Read(max)});
  b.Kernel("unsharpen", {Rw(image), Rw(bu), Rw(iu)});
  b.Kernel("combine", {Read(iu), Read(bl), Read(ml), Rw(img2)});
  b.Kernel("combine_2", {Read(img2), Read(bs), Read(ms), Rw(img3)});
  return MakeCase(ScaleName("B8", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B10Dl(int scale) {
  const uint64_t s = Scaled(12000, 22000, scale);
  // 8 then 16 channels; stride 2, then pooling by 5.
  const uint64_t l1 = (s / 2) * (s / 2) * 8 * kFloat;
  const uint64_t l2 = (s / 10) * (s / 10) * 8 * kFloat;
  const uint64_t l3 = (s / 20) * (s / 20) * 16 * kFloat;
  ShapeBuilder b("b10_dl");
  const BufferId x = b.HostWritten("x", s * s * kFloat);
  const BufferId y = b.HostWritten("y", s * s * kFloat);
  const BufferId x1 = b.Resident("x1", l1);
  const BufferId y1 = b.Resident("y1", l1);
  const BufferId x11 = b.Resident("x11", l2);
  const BufferId y11 = b.Resident("y11", l2);
  const BufferId x2 = b.Resident("x2", l3);
  const BufferId y2 = b.Resident("y2", l3);
  const BufferId k1 = b.Resident("k1", 8 * 9 * kFloat);
  const BufferId k3 = b.Resident("k3", 8 * 9 * kFloat);
  const BufferId k2 = b.Resident("k2", 8 * 9 * 16 * kFloat);
  const BufferId k4 = b.Resident("k4", 8 * 9 * 16 * kFloat);
  const BufferId z = b.Resident("z", 2 * l3);
  const BufferId dense = b.Resident("dense", 2 * l3);
  const BufferId res = b.HostWritten("res", kFloat);
  b.MarkOutput(res);
  b.Kernel("conv_x1", {Rw(x1), Rw(x), Read(k1)});
  b.Kernel("conv_y1", {Rw(y1), Rw(y), Read(k3)});
  b.Kernel("pool_x", {Rw(x11), Read(x1)});
  b.Kernel("pool_y", {Rw(y11), Read(y1)});
  b.Kernel("conv_x2", {Rw(x2), Rw(x11), Read(k2)});
  b.Kernel("conv_y2", {Rw(y2), Rw(y11), Read(k4)});
  b.Kernel("concat", {Rw(z), Read(x2), Read(y2)});
  b.Kernel("dot", {Read(z), Read(dense), Rw(res)});
  return MakeCase(ScaleName("B10", scale), Suite::kGrcudaSingleGpu,
                  std::move(b));
}

BenchmarkCase B1mVec(int scale) {
  const uint64_t chunk =
      CeilDiv(Scaled(160'000'000, 950'000'000, scale), kPartitions);
  ShapeBuilder b("b1m_vec");
  for (int i = 0; i < kPartitions; ++i) {
    AddVecJoin(b, chunk, absl::StrCat("_", i), Access::kRead);
  }
  return MakeCase(ScaleName("B1M", scale), Suite::kGrcudaMultiGpu,
                  std::move(b));
}

BenchmarkCase B5mBlackScholes(int scale) {
  ShapeBuilder b("b5m_black_scholes");
  AddBlackScholes(b, 24, Scaled(10'000'000, 35'000'000, scale));
  return MakeCase(ScaleName("B5M", scale), Suite::kGrcudaMultiGpu,
                  std::move(b));
}

BenchmarkCase B6mMl(int scale) {
  const uint64_t n = Scaled(1'000'000, 1'800'000, scale);
  const uint64_t rows = CeilDiv(n, kPartitions);
  const uint64_t f = 1024, c = 16;
  const double share = 1.0 / kPartitions;
  ShapeBuilder b("b6m_ml");
  std::vector<BufferId> x, z, mean, stddev;
  for (int i = 0; i < kPartitions; ++i) {
    x.push_back(b.Resident(absl::StrCat("X_", i), rows * f * kInt));
    z.push_back(b.Resident(absl::StrCat("Z_", i), rows * f * kFloat));
    // resetIteration zeroes the partial sums.
    mean.push_back(b.HostWritten(absl::StrCat("MEAN_", i), f * kFloat));
    stddev.push_back(b.HostWritten(absl::StrCat("STD_", i), f * kFloat));
  }
  const BufferId nbf = b.Resident("NBF", c * f * kFloat);
  const BufferId rc = b.Resident("RC", c * f * kFloat);
  const BufferId ri = b.Resident("RI", c * kFloat);
  const BufferId amax = b.Resident("AMAX", n * kFloat);
  const BufferId l = b.Resident("L", n * kFloat);
  const BufferId r1 = b.HostWritten("R1", n * c * kFloat);
  const BufferId r2 = b.HostWritten("R2", n * c * kFloat);
  const BufferId r = b.Resident("R", n * kInt);
  b.MarkOutput(r);
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("rr_1_", i),
             {Read(x[i]), Rw(mean[i]), Rw(stddev[i])});
  }
  // Partition 0 accumulates the others' sums: a chain. (For i = 0 GrCUDA
  // also passes MEAN_0 and STD_0 as the const inputs; one use is enough.)
  for (int i = 0; i < kPartitions; ++i) {
    std::vector<Use> uses = {Rw(mean[0]), Rw(stddev[0])};
    if (i > 0) {
      uses.push_back(Read(mean[i]));
      uses.push_back(Read(stddev[i]));
    }
    b.Kernel(absl::StrCat("rr_1_1_", i), uses);
  }
  // R2 and R1 are outputs declared const: partitions write disjoint rows.
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("rr_1_2_", i),
             {Read(x[i]), Rw(z[i]), Read(mean[0]), Read(stddev[0])});
    b.Kernel(absl::StrCat("rr_2_", i),
             {Read(z[i]), Read(rc), Read(r2, 2 * share)});
  }
  b.Kernel("rr_3", {Rw(r2, 2), Read(ri)});
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("nb_1_", i),
             {Read(x[i]), Read(nbf), Read(r1, 2 * share)});
  }
  b.Kernel("nb_2", {Rw(r1), Rw(amax)});
  b.Kernel("nb_3", {Read(r1), Read(amax), Rw(l)});
  b.Kernel("nb_4", {Rw(r1, 2), Read(l)});
  b.Kernel("softmax_1", {Rw(r1, 2)});
  b.Kernel("softmax_2", {Rw(r2, 2)});
  b.Kernel("argmax", {Read(r1), Read(r2), Rw(r)});
  return MakeCase(ScaleName("B6M", scale), Suite::kGrcudaMultiGpu,
                  std::move(b));
}

BenchmarkCase B9mCg(int scale, int iterations) {
  const uint64_t n = Scaled(20000, 60000, scale);
  const uint64_t rows = CeilDiv(n, kPartitions);
  const double share = 1.0 / kPartitions;
  ShapeBuilder b("b9m_cg");
  std::vector<BufferId> a;
  for (int i = 0; i < kPartitions; ++i) {
    a.push_back(b.Resident(absl::StrCat("A_", i), rows * n * kFloat));
  }
  // resetIteration rewrites x, t1 and t2.
  const BufferId x = b.HostWritten("x", n * kFloat);
  const BufferId vb = b.Resident("b", n * kFloat);
  const BufferId p = b.Resident("p", n * kFloat);
  const BufferId r = b.Resident("r", n * kFloat);
  const BufferId y = b.Resident("y", n * kFloat);
  const BufferId t1 = b.HostWritten("t1", kFloat);
  const BufferId t2 = b.HostWritten("t2", kFloat);
  b.MarkOutput(x);
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("precondition_", i), {Rw(a[i], 2)});
  }
  // r = b - A x, by row blocks; r is an output declared const.
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("mvma_", i),
             {Read(a[i]), Read(x), Read(vb, share), Read(r, share)});
  }
  b.Kernel("copy", {Rw(p), Rw(r)});
  b.Kernel("l2", {Read(r), Rw(t1)});
  // The host reads t1 and t2 twice per iteration; each iteration depends
  // on the previous one through p, r, x, t1 and t2 instead.
  for (int it = 0; it < iterations; ++it) {
    const std::string s = absl::StrCat("_", it);
    for (int i = 0; i < kPartitions; ++i) {
      b.Kernel(absl::StrCat("mul_", i, s),
               {Read(a[i]), Read(p), Read(y, share)});
    }
    b.Kernel("dot" + s, {Read(p), Rw(y), Rw(t2)});
    // GrCUDA also passes x (and r) as the const `val`: one use is enough.
    b.Kernel("saxpy_x" + s, {Rw(x, 2), Read(p)});
    b.Kernel("saxpy_r" + s, {Rw(r, 2), Read(y)});
    b.Kernel("l2" + s, {Read(r), Rw(t1)});
    b.Kernel("saxpy_p" + s, {Rw(p, 2), Read(r)});
  }
  return MakeCase(ScaleName("B9M", scale), Suite::kGrcudaMultiGpu,
                  std::move(b));
}

BenchmarkCase B11mMul(int scale) {
  const uint64_t n = Scaled(20000, 60000, scale);
  const uint64_t rows = CeilDiv(n, kPartitions);
  ShapeBuilder b("b11m_mul");
  std::vector<BufferId> x, z;
  for (int i = 0; i < kPartitions; ++i) {
    x.push_back(b.HostWritten(absl::StrCat("x_", i), rows * n * kFloat));
    z.push_back(b.Resident(absl::StrCat("z_", i), rows * kFloat));
  }
  const BufferId y = b.HostWritten("y", n * kFloat);
  const BufferId z_out = b.Resident("z_out", n * kFloat);
  b.MarkOutput(z_out);
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("mul_", i), {Read(x[i]), Read(y), Rw(z[i])});
  }
  // z_out is read-write in every copy: the copies form a chain.
  for (int i = 0; i < kPartitions; ++i) {
    b.Kernel(absl::StrCat("copy_", i),
             {Read(z[i]), Rw(z_out, 1.0 / kPartitions)});
  }
  return MakeCase(ScaleName("B11M", scale), Suite::kGrcudaMultiGpu,
                  std::move(b));
}

BenchmarkCase ForkJoin(int width, int length) {
  constexpr uint64_t kBytes = uint64_t{4} << 20;
  std::mt19937 rng(static_cast<uint32_t>(width * 1000 + length));
  std::uniform_real_distribution<double> cost(100, 1000);
  ShapeBuilder b(absl::StrCat("fork_join_", width, "x", length));
  const BufferId in = b.HostWritten("in", kBytes);
  const BufferId root = b.Resident("root", kBytes);
  b.Spin("root", {Read(in), Write(root)}, 100);
  std::vector<BufferId> tails;
  for (int w = 0; w < width; ++w) {
    BufferId prev = root;
    for (int k = 0; k < length; ++k) {
      const BufferId out = b.Resident(absl::StrCat("b", w, "_", k), kBytes);
      b.Spin(absl::StrCat("n", w, "_", k), {Read(prev), Write(out)}, cost(rng));
      prev = out;
    }
    tails.push_back(prev);
  }
  const BufferId result = b.Resident("out", kBytes);
  b.MarkOutput(result);
  std::vector<Use> join;
  for (BufferId tail : tails) join.push_back(Read(tail));
  join.push_back(Write(result));
  b.Spin("join", join, 100);
  return MakeCase(absl::StrCat("fork-join ", width, "x", length),
                  Suite::kSynthetic, std::move(b));
}

BenchmarkCase RandomLayered(int nodes, int width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> cost(10, 2000);
  std::uniform_real_distribution<double> log_size(std::log(4096.0),
                                                  std::log(64.0 * (1 << 20)));
  std::uniform_int_distribution<int> fan_in(1, 3);
  auto size = [&] { return static_cast<uint64_t>(std::exp(log_size(rng))); };
  ShapeBuilder b(absl::StrCat("random_", nodes, "_", seed));
  const int inputs = std::max(1, width / 4);
  for (int i = 0; i < inputs; ++i) b.HostWritten(absl::StrCat("in", i), size());
  const int last_layer = (nodes - 1) / width;
  for (int v = 0; v < nodes; ++v) {
    const int layer = v / width;
    std::vector<Use> uses;
    const int k = fan_in(rng);
    for (int a = 0; a < k; ++a) {
      int read = 0;
      if (layer == 0) {
        read = std::uniform_int_distribution<int>(0, inputs - 1)(rng);
      } else {
        // Node u's buffer is inputs + u.
        const int lo = std::max(0, (layer - 2) * width);
        const int hi = layer * width - 1;
        read = inputs + std::uniform_int_distribution<int>(lo, hi)(rng);
      }
      uses.push_back(Read(read));
    }
    const BufferId out = b.Resident(absl::StrCat("b", v), size());
    if (layer == last_layer) b.MarkOutput(out);
    uses.push_back(Write(out));
    b.Spin(absl::StrCat("n", v), uses, cost(rng));
  }
  return MakeCase(absl::StrCat("random ", nodes, " seed ", seed),
                  Suite::kSynthetic, std::move(b));
}

std::vector<BenchmarkCase> AllScheduleCases() {
  std::vector<BenchmarkCase> cases;
  using Builder = BenchmarkCase (*)(int);
  const Builder grcuda[] = {
      B1Vec,                                    // VEC
      B5BlackScholes,                           // B&S
      B6Ml,                                     // ML
      [](int scale) { return B7Hits(scale); },  // HITS
      B8Image,                                  // IMG
      B10Dl,                                    // DL
      B1mVec,                                   // multi-GPU VEC
      B5mBlackScholes,                          // multi-GPU B&S
      B6mMl,                                    // multi-GPU ML
      [](int scale) { return B9mCg(scale); },   // CG
      B11mMul,                                  // MUL
  };
  for (Builder build : grcuda) {
    for (int scale = kMinScale; scale <= kMaxScale; ++scale) {
      cases.push_back(build(scale));
    }
  }
  for (const auto& [width, length] : {std::pair{4, 4}, std::pair{16, 4},
                                      std::pair{16, 16}, std::pair{64, 8}}) {
    cases.push_back(ForkJoin(width, length));
  }
  for (const auto& [nodes, width] :
       {std::pair{50, 8}, std::pair{200, 16}, std::pair{1000, 32}}) {
    for (uint32_t seed : {1u, 2u}) {
      cases.push_back(RandomLayered(nodes, width, seed));
    }
  }
  return cases;
}

std::vector<BenchmarkCase> WideScheduleCases(absl::Span<const uint32_t> seeds) {
  std::vector<BenchmarkCase> cases;
  for (int nodes : {30, 100, 300, 600, 3000}) {
    for (int width : {4, 8, 16, 32, 64}) {
      if (width > nodes / 2) continue;
      for (uint32_t seed : seeds) {
        BenchmarkCase c = RandomLayered(nodes, width, seed);
        c.name = absl::StrCat("random ", nodes, "w", width, " seed ", seed);
        cases.push_back(std::move(c));
      }
    }
  }
  for (int width : {2, 3, 8, 32, 128}) {
    for (int length : {1, 2, 3, 8, 32}) {
      if (width * length > 1024) continue;
      cases.push_back(ForkJoin(width, length));
    }
  }
  for (int scale : {kMinScale, kMaxScale}) {
    for (int iterations : {1, 2, 10}) {
      BenchmarkCase hits = B7Hits(scale, iterations);
      hits.name = absl::StrCat(hits.name, " iter", iterations);
      cases.push_back(std::move(hits));
      BenchmarkCase cg = B9mCg(scale, iterations);
      cg.name = absl::StrCat(cg.name, " iter", iterations);
      cases.push_back(std::move(cg));
    }
  }
  return cases;
}

}  // namespace weft::scheduler
