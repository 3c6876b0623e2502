// Host <-> device transfer speed on a GPU, the ways Weft moves bytes.
//
// For each size: an output download as the executor makes it
// (CudaBackend::CopyDeviceToHostBuffer: through page-locked chunks, into a
// new buffer), a download straight into a new pageable buffer (the same
// call with no chunk free), and into memory already touched, pageable and
// page-locked (what the link gives); the host's own cost of a new buffer
// (zeroing it); and uploads from pageable and page-locked memory. Printed
// in GB/s, the median of `runs`.
//
//   bazel run -c opt //runtime/cuda:cuda_transfer_bench -- [runs]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/host_buffer.h"

namespace weft::runtime {
namespace {

// Median GB/s of `runs` calls of `body` moving `bytes`; negative on error.
double Rate(uint64_t bytes, int runs, const std::function<bool()>& body) {
  std::vector<double> rates;
  for (int r = 0; r < runs; ++r) {
    const absl::Time start = absl::Now();
    if (!body()) return -1;
    const double s = absl::ToDoubleSeconds(absl::Now() - start);
    rates.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

int Main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  absl::StatusOr<std::unique_ptr<CudaBackend>> created = CudaBackend::Create();
  if (!created.ok()) {
    std::printf("no GPU: %s\n", created.status().ToString().c_str());
    return 0;
  }
  CudaBackend& backend = **created;
  const StreamHandle stream = backend.CreateStream(0).value();
  std::printf("device 0: %s; GB/s, median of %d\n",
              backend.device_info(0).name.c_str(), runs);
  std::printf("%9s %12s %12s %12s %12s %12s %12s %12s\n", "MiB", "download",
              "pageable_new", "pageable", "pinned", "zero_new", "up_pageable",
              "up_pinned");
  for (uint64_t mib : {16, 64, 256, 1024}) {
    const uint64_t bytes = mib << 20;
    const DevicePtr src = backend.Allocate(0, bytes).value();
    auto sync = [&] { return backend.SynchronizeStream(stream).ok(); };
    const double download = Rate(bytes, runs, [&] {
      HostBuffer out;
      return backend.CopyDeviceToHostBuffer(&out, src, bytes, stream).ok() &&
             sync();
    });
    const double pageable_new = Rate(bytes, runs, [&] {
      HostBuffer out;
      return backend
                 .CopyDeviceToHost(out.Reset(bytes, bytes), src, bytes, stream)
                 .ok() &&
             sync();
    });
    std::string touched(bytes, '\0');
    const double pageable = Rate(bytes, runs, [&] {
      return backend.CopyDeviceToHost(touched.data(), src, bytes, stream)
                 .ok() &&
             sync();
    });
    void* pinned = nullptr;
    if (cudaMallocHost(&pinned, bytes) != cudaSuccess) return 1;
    const double pinned_rate = Rate(bytes, runs, [&] {
      return backend.CopyDeviceToHost(pinned, src, bytes, stream).ok() &&
             sync();
    });
    const double zero_new = Rate(bytes, runs, [&] {
      HostBuffer out;
      out.Reset(bytes, bytes);
      return true;
    });
    const double up_pageable = Rate(bytes, runs, [&] {
      return backend.CopyHostToDevice(src, touched.data(), bytes, stream)
                 .ok() &&
             sync();
    });
    const double up_pinned = Rate(bytes, runs, [&] {
      return backend.CopyHostToDevice(src, pinned, bytes, stream).ok() &&
             sync();
    });
    (void)cudaFreeHost(pinned);
    (void)backend.Free(src);
    std::printf("%9llu %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f\n",
                static_cast<unsigned long long>(mib), download, pageable_new,
                pageable, pinned_rate, zero_new, up_pageable, up_pinned);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
