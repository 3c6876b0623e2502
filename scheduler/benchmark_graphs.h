// Graph shapes for measuring schedule quality: GrCUDA's benchmark DAGs,
// NNC-style fork/joins and random layered DAGs, as Weft graphs of `spin`
// nodes whose costs model a V100-class machine.
//
// The GrCUDA shapes follow its benchmark suite (single GPU: B1 VEC, B5 B&S,
// B6 ML, B7 HITS, B8 IMG, B10 DL; multi-GPU, P = 16 partitions: B1M VEC,
// B5M B&S, B6M ML, B9M CG, B11M MUL): one node per kernel launch, in
// GrCUDA's issue order, with the read/write sets its scheduler sees: a
// `const` pointer is READ (so are the outputs GrCUDA deliberately declares
// const to avoid false serialization), any other pointer READ_WRITE. One
// graph is one steady-state iteration:
//
//   - arrays the host rewrites every iteration start on the host
//     (BufferSpec::Init::kData, their real size), so their uploads over the
//     25 GB/s host links are part of the schedule, as in GrCUDA;
//   - arrays the host writes only at initialization, and scratch arrays,
//     are zero-initialized: the cost model creates them in place for free,
//     as GrCUDA finds them already on a device after the first iteration;
//   - what the host reads at the end is `output`.
//
// Host synchronizations inside an iteration (B7 HITS, B9M CG) cannot be
// expressed in a graph; those shapes unroll a few iterations instead, each
// depending on the previous one through the buffers they share.
//
// Cost rule. Every kernel is memory-bound on a device streaming
// kDeviceGbps (900 GB/s):
//
//   cost_us = kLaunchUs + factor x bytes / kDeviceGbps
//
// where `bytes` is what the kernel streams: each array argument once, an
// array it reads and then overwrites in place twice, and a partition's
// share of an array it touches only in part; tiny arrays count their size.
// `factor` is 1 unless GrCUDA's notes give a ratio:
//   - B1/B1M: "data-transfer takes about 4x-5x longer than the square
//     computation": factor 4 (uploading x at 25 GB/s takes 4.5x the square);
//     the reduction runs with the same launch shape and gets the same;
//   - B5/B5M: Black-Scholes is compute-bound; factor 18 makes a kernel as
//     long as the upload of its input, which is what GrCUDA's up-to-2.8x
//     gains from overlapping transfers with computation require;
//   - B6: "RR takes ~2x the time of NB": the Naive Bayes kernels are scaled
//     so that the RR chain costs twice the NB chain (launches aside).
// kLaunchUs (5 us) keeps kernels on tiny arrays from costing nothing.
//
// `scale` (kMinScale .. kMaxScale) sets the problem size, spread evenly
// from the small to the large end of the V100 sizes in GrCUDA's notes.
//
// All builders are deterministic (the random ones are seeded) and
// thread-safe.
#ifndef WEFT_SCHEDULER_BENCHMARK_GRAPHS_H_
#define WEFT_SCHEDULER_BENCHMARK_GRAPHS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

inline constexpr double kDeviceGbps = 900;
inline constexpr double kLaunchUs = 5;
inline constexpr int kMinScale = 1;
inline constexpr int kMaxScale = 4;
// Partitions of every GrCUDA multi-GPU benchmark.
inline constexpr int kPartitions = 16;

enum class Suite {
  kGrcudaSingleGpu,  // B1 .. B10
  kGrcudaMultiGpu,   // B1M .. B11M: what GrCUDA's multi-GPU speedups cover
  kSynthetic,        // fork/join and random DAGs
};

struct BenchmarkCase {
  std::string name;  // short and unique, e.g. "B5 scale 2"
  Suite suite = Suite::kSynthetic;
  Graph graph;
};

// GrCUDA's single-GPU suite. REQUIRES (all builders with a scale):
// kMinScale <= scale <= kMaxScale.

// B1 VEC: two squares joined by a reduction (3 nodes); N = 160M..950M
// floats.
BenchmarkCase B1Vec(int scale);
// B5 B&S: 10 independent Black-Scholes kernels (the IPDPS-era K = 10);
// 10M..35M doubles each.
BenchmarkCase B5BlackScholes(int scale);
// B6 ML: Ridge Regression chain (4 kernels) and Naive Bayes chain (5)
// joined by an argmax (10 nodes); 1.6M..8M rows, 200 features, 10 classes.
BenchmarkCase B6Ml(int scale);
// B7 HITS (IPDPS-era kernels): `iterations` x 6 nodes; 25M..180M
// vertices, 3 edges per vertex.
BenchmarkCase B7Hits(int scale, int iterations = 5);
// B8 IMG: the 13-kernel image pipeline; 6400..20000 pixels a side.
BenchmarkCase B8Image(int scale);
// B10 DL: two convolution chains joined by a concat and a dense layer (8
// nodes); 12000..22000 pixels a side.
BenchmarkCase B10Dl(int scale);

// GrCUDA's multi-GPU suite.

// B1M VEC: 16 independent B1 joins (48 nodes); N = 160M..950M in all.
BenchmarkCase B1mVec(int scale);
// B5M B&S: 24 independent kernels (multi_gpu/bench_5.py's count; the Java
// version has 11); 10M..35M doubles each.
BenchmarkCase B5mBlackScholes(int scale);
// B6M ML, partitioned (87 nodes); 1.0M..1.8M rows, 1024 features, 16
// classes.
BenchmarkCase B6mMl(int scale);
// B9M CG: setup (34 nodes) then `iterations` x 21 nodes (97 for 3);
// N = 20000..60000.
BenchmarkCase B9mCg(int scale, int iterations = 3);
// B11M MUL: 16 partial matrix-vector products, then 16 copies into one
// result in a serial chain (32 nodes); N = 20000..60000.
BenchmarkCase B11mMul(int scale);

// NNC-style fork/join: a root, `width` parallel branches of `length`
// nodes, a join (width x length + 2 nodes). Branch costs vary (100 to
// 1000 us, seeded); every node passes a 4 MiB buffer on.
// REQUIRES: width >= 1, length >= 1.
BenchmarkCase ForkJoin(int width, int length);

// A random layered DAG of `nodes` nodes in layers of `width`: costs 10 to
// 2000 us, buffer sizes 4 KiB to 64 MiB (log-uniform); each node writes its
// own buffer and reads 1-3 buffers from the previous two layers, the first
// layer host-initialized inputs. REQUIRES: nodes >= 1, width >= 1.
BenchmarkCase RandomLayered(int nodes, int width, uint32_t seed);

// Every shape above at several sizes: each GrCUDA shape at every scale,
// a few fork/joins and random DAGs (50, 200 and 1000 nodes, two seeds
// each). Under 100 cases, none over 5000 nodes; names are unique.
std::vector<BenchmarkCase> AllScheduleCases();

// A wider family of the same shapes at sizes, widths and seeds that
// AllScheduleCases does not have, to check that what holds there holds
// beyond it: random layered DAGs of 30 to 3000 nodes at widths 4 to 64
// (three seeds each, none of AllScheduleCases'), fork/joins of widths 2
// to 128 and lengths 1 to 32, and B7 and B9M at other iteration counts
// ("B7 scale 1 iter2"). Names are unique and differ from
// AllScheduleCases'. `seeds` replaces the random DAGs' seeds (none of
// 1 to 3, which AllScheduleCases uses).
inline constexpr uint32_t kWideSeeds[] = {11, 12, 13};
std::vector<BenchmarkCase> WideScheduleCases(
    absl::Span<const uint32_t> seeds = kWideSeeds);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_BENCHMARK_GRAPHS_H_
