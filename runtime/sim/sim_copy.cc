#include "runtime/sim/sim_copy.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/occupancy.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using Engine = SimDeviceModel::Engine;

SimCopies::SimCopies(std::vector<double> bandwidth_gbps, SimMemory* memory,
                     std::vector<SimDeviceModel*> models)
    : bandwidth_gbps_(std::move(bandwidth_gbps)),
      memory_(memory),
      models_(std::move(models)),
      host_(static_cast<int>(models_.size())) {}

absl::StatusOr<std::vector<double>> SimCopies::BandwidthMatrix(
    int num_devices, const std::vector<std::vector<double>>& given,
    double host_to_device, double device_to_host, double device_to_device) {
  const int n = num_devices;
  for (double gbps : {host_to_device, device_to_host, device_to_device}) {
    if (std::isnan(gbps)) {
      return absl::InvalidArgumentError("copy bandwidth must not be NaN");
    }
  }
  if (!given.empty()) {
    if (static_cast<int>(given.size()) != n + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bandwidth_gbps must have num_devices + 1 = ", n + 1,
                       " rows (the host last), got ", given.size()));
    }
    for (int r = 0; r <= n; ++r) {
      const std::vector<double>& row = given[r];
      if (static_cast<int>(row.size()) != n + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("bandwidth_gbps[", r, "] must have ", n + 1,
                         " entries, got ", row.size()));
      }
      for (int c = 0; c <= n; ++c) {
        if (std::isnan(row[c]) || row[c] < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "bandwidth_gbps[", r, "][", c, "] must be >= 0, got ", row[c]));
        }
        if (row[c] == 0 && r != c && (r == n || c == n)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "bandwidth_gbps[", r, "][", c, "]: device ", r == n ? c : r,
              " needs a link to and from the host"));
        }
      }
    }
  }
  std::vector<double> bandwidth((n + 1) * (n + 1), 0);
  for (int from = 0; from <= n; ++from) {
    for (int to = 0; to <= n; ++to) {
      double gbps = 0;
      if (!given.empty()) {
        gbps = given[from][to];
      } else {
        if (from == n) {
          gbps = host_to_device;
        } else if (to == n) {
          gbps = device_to_host;
        } else {
          gbps = device_to_device;
        }
        // A scalar's zero or negative is instantaneous.
        if (!(gbps > 0)) gbps = std::numeric_limits<double>::infinity();
      }
      bandwidth[from * (n + 1) + to] = gbps;
    }
  }
  return bandwidth;
}

double SimCopies::DurationUs(uint64_t bytes, int from, int to) const {
  const double gbps = bandwidth_gbps_[from * (host_ + 1) + to];
  if (gbps == 0 && from != to) {
    // No direct link between two devices: staged through the host.
    return DurationUs(bytes, from, host_) + DurationUs(bytes, host_, to);
  }
  if (!(gbps > 0) || std::isinf(gbps)) return 0;
  // 1 GB/s moves 1e3 bytes per microsecond.
  return static_cast<double>(bytes) / (gbps * 1e3);
}

std::unique_ptr<SimCopyRecord> SimCopies::Upload(DevicePtr dst,
                                                 const void* host_src,
                                                 uint64_t src_bytes,
                                                 uint64_t bytes) const {
  auto copy = std::make_unique<SimCopyRecord>();
  copy->kind = SimCopyRecord::Kind::kHostToDevice;
  copy->dst = dst;
  copy->host_src = host_src;
  copy->host_src_bytes = src_bytes;
  copy->bytes = bytes;
  copy->model = models_[dst.device];
  copy->engine = Engine::kHostToDevice;
  copy->duration = DurationUs(bytes, host_, dst.device);
  return copy;
}

std::unique_ptr<SimCopyRecord> SimCopies::Download(void* host_dst,
                                                   DevicePtr src,
                                                   uint64_t bytes) const {
  auto copy = std::make_unique<SimCopyRecord>();
  copy->kind = SimCopyRecord::Kind::kDeviceToHost;
  copy->src = src;
  copy->host_dst = host_dst;
  copy->bytes = bytes;
  copy->model = models_[src.device];
  copy->engine = Engine::kDeviceToHost;
  copy->duration = DurationUs(bytes, src.device, host_);
  return copy;
}

std::unique_ptr<SimCopyRecord> SimCopies::DownloadBuffer(HostBuffer* dst,
                                                         DevicePtr src,
                                                         uint64_t bytes) const {
  std::unique_ptr<SimCopyRecord> copy = Download(nullptr, src, bytes);
  copy->host_buffer = dst;
  return copy;
}

std::unique_ptr<SimCopyRecord> SimCopies::Copy(DevicePtr dst, DevicePtr src,
                                               uint64_t bytes) const {
  auto copy = std::make_unique<SimCopyRecord>();
  copy->kind = SimCopyRecord::Kind::kDeviceToDevice;
  copy->dst = dst;
  copy->src = src;
  copy->bytes = bytes;
  // Copies into a device run on its device-to-device engine, whichever
  // stream issued them.
  copy->model = models_[dst.device];
  copy->engine = Engine::kDeviceToDevice;
  copy->duration = DurationUs(bytes, src.device, dst.device);
  return copy;
}

void SimCopies::Enqueue(SimStream& queue,
                        std::unique_ptr<SimCopyRecord> copy) const {
  SimCopyRecord* const kept = copy.get();  // owned by the work from here
  kept->model->EnqueueInTurn(
      queue, kept->engine, kept->duration, &kept->ticket,
      [this, copy = std::move(copy)](SimStream::Timing& timing) {
        return Run(*copy, timing);
      });
}

absl::Status SimCopies::Run(SimCopyRecord& copy,
                            SimStream::Timing& timing) const {
  // The bytes move once; before its turn the stream parks and comes back
  // to book (`moved` remembers).
  if (!copy.moved) {
    WEFT_RETURN_IF_ERROR(MoveBytes(copy));
    copy.moved = true;
  }
  return copy.model->BookInTurn(
      copy.engine, copy.duration, scheduler::kOccupancyUnits,
      copy.ticket.has_value() ? &*copy.ticket : nullptr, timing);
}

absl::Status SimCopies::CheckHealthy(int device) const {
  const SimDeviceHealth& health = models_[device]->health();
  if (health.lost()) return health.error();
  return absl::OkStatus();
}

absl::Status SimCopies::MoveBytes(const SimCopyRecord& copy) const {
  switch (copy.kind) {
    case SimCopyRecord::Kind::kHostToDevice:
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.dst.device));
      return memory_->Write(copy.dst, copy.host_src, copy.host_src_bytes,
                            copy.bytes);
    case SimCopyRecord::Kind::kDeviceToHost:
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.src.device));
      if (copy.host_buffer != nullptr) {
        return memory_->ReadInto(copy.src, copy.bytes, copy.host_buffer);
      }
      return memory_->Read(copy.src, copy.bytes, copy.host_dst);
    case SimCopyRecord::Kind::kDeviceToDevice:
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.src.device));
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.dst.device));
      return memory_->Copy(copy.dst, copy.src, copy.bytes);
  }
  return absl::OkStatus();
}

}  // namespace weft::runtime
