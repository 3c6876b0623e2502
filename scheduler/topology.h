// The machine's copy bandwidths: how fast bytes move between the host and
// each device and between devices.
//
// A Topology is a square matrix of GB/s (1e9 bytes per second) over
// num_devices + 1 memories: devices 0 .. num_devices - 1, then the host
// (index num_devices; kHost in the accessors). Entry (from, to) is the speed
// of a copy from `from` to `to`; the diagonal is a device's copy within
// itself. Zero means "no direct link": copies between two devices without
// one are staged through the host.
//
// FromCsv reads the bandwidth files GrCUDA produces ("connection graph"
// CSVs): a header line, then rows `From,To,GB/s` where -1 is the host. As in
// GrCUDA, rows naming a device at or beyond num_devices are dropped, values
// are floored (to smooth measurement noise), a host row sets both
// directions of that host link, and device pairs are made symmetric by
// averaging the two directions. Default(n) models n simulated devices with
// the simulated backend's defaults: 25 GB/s to and from the host, 300 GB/s
// between and within devices.
//
// Immutable after construction; thread-compatible (safe to share).
#ifndef WEFT_SCHEDULER_TOPOLOGY_H_
#define WEFT_SCHEDULER_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft::scheduler {

class Topology {
 public:
  static constexpr int kHost = -1;
  static constexpr double kDefaultHostGbps = 25;
  static constexpr double kDefaultPeerGbps = 300;

  // One simulated machine of `num_devices` devices (at least 1).
  static Topology Default(int num_devices);

  // `gbps` is (num_devices + 1) square, the host last. INVALID_ARGUMENT if
  // it is not square, has fewer than 2 rows, holds a negative or non-finite
  // value, or leaves a device without a link to and from the host.
  static absl::StatusOr<Topology> FromMatrix(
      std::vector<std::vector<double>> gbps);

  // GrCUDA's CSV format (see the file comment), for `num_devices` devices.
  // INVALID_ARGUMENT naming the line for malformed rows, and if a device is
  // left without a link to and from the host.
  static absl::StatusOr<Topology> FromCsv(absl::string_view csv,
                                          int num_devices);
  // FromCsv on a file's contents; NOT_FOUND if it cannot be read.
  static absl::StatusOr<Topology> LoadCsvFile(const std::string& path,
                                              int num_devices);

  int num_devices() const { return num_devices_; }
  // GB/s from `from` to `to`; either may be kHost. 0: no direct link.
  double gbps(int from, int to) const {
    return gbps_[Index(from) * (num_devices_ + 1) + Index(to)];
  }
  // Microseconds to copy `bytes` from `from` to `to`: 0 when they are the
  // same memory, staged through the host when there is no direct link.
  // Inline: device policies ask it for every use of every node.
  double TransferUs(uint64_t bytes, int from, int to) const {
    if (from == to || bytes == 0) return 0;
    const double direct = gbps(from, to);
    // GB/s = 1e3 bytes per microsecond.
    if (direct > 0) return static_cast<double>(bytes) / (direct * 1e3);
    return static_cast<double>(bytes) / (gbps(from, kHost) * 1e3) +
           static_cast<double>(bytes) / (gbps(kHost, to) * 1e3);
  }

  // The matrix, host last (for display and for the simulated backend).
  std::vector<std::vector<double>> Matrix() const;

 private:
  Topology(int num_devices, std::vector<double> gbps)
      : num_devices_(num_devices), gbps_(std::move(gbps)) {}
  int Index(int memory) const {
    return memory == kHost ? num_devices_ : memory;
  }
  static absl::Status Validate(int num_devices,
                               const std::vector<double>& gbps);

  int num_devices_ = 0;
  std::vector<double> gbps_;  // (num_devices_ + 1)^2, row-major
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_TOPOLOGY_H_
