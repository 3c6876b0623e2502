#include "runtime/sim/sim_faults.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::runtime {

SimFaults::SimFaults(int num_devices)
    : num_devices_(num_devices), per_device_(new Counter[num_devices]) {}

absl::Status SimFaults::Inject(SimLaunchFault fault) {
  if (fault.device < -1 || fault.device >= num_devices_) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch fault on device ", fault.device, ": there are ",
                     num_devices_, " devices (-1 is any)"));
  }
  if (fault.nth == 0) {
    return absl::InvalidArgumentError("launch fault: nth counts from 1");
  }
  if (fault.status.ok()) {
    return absl::InvalidArgumentError(
        "launch fault: the status must be an error");
  }
  absl::MutexLock lock(&mu_);
  const uint64_t base = fault.device < 0
                            ? total_.load()
                            : per_device_[fault.device].launches.load();
  faults_.push_back(
      Armed{fault.device, base + fault.nth, std::move(fault.status)});
  armed_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status SimFaults::Next(int device, absl::string_view op) {
  const uint64_t on_device = ++per_device_[device].launches;
  const uint64_t total = ++total_;
  if (!armed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Armed& f = faults_[i];
    const bool hit =
        f.device < 0 ? f.at == total : f.device == device && f.at == on_device;
    if (!hit) continue;
    absl::Status status(
        f.status.code(),
        absl::StrCat(f.status.message(), " (launch ",
                     f.device < 0 ? total : on_device,
                     f.device < 0 ? " overall" : "", " on device ", device,
                     ", op '", op, "')"));
    faults_.erase(faults_.begin() + i);
    armed_.store(!faults_.empty(), std::memory_order_release);
    return status;
  }
  return absl::OkStatus();
}

}  // namespace weft::runtime
