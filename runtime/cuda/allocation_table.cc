#include "runtime/cuda/allocation_table.h"

#include "absl/strings/str_cat.h"

namespace weft::runtime::cuda {

void AllocationTable::Add(DevicePtr start, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  entries_.emplace(start.address, Entry{start.device, bytes});
}

absl::Status AllocationTable::Remove(DevicePtr start) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(start.address);
  if (it == entries_.end() || it->second.device != start.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", start.device, ": 0x", absl::Hex(start.address),
                     " is not the start of an allocation"));
  }
  entries_.erase(it);
  return absl::OkStatus();
}

absl::Status AllocationTable::CheckRange(DevicePtr ptr, uint64_t bytes,
                                         absl::string_view what) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.upper_bound(ptr.address);
  if (it != entries_.begin()) {
    --it;
    const uint64_t start = it->first;
    const Entry& entry = it->second;
    if (entry.device == ptr.device && ptr.address - start <= entry.bytes &&
        bytes <= entry.bytes - (ptr.address - start)) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " [0x", absl::Hex(ptr.address), ", +", bytes,
                   ") is not inside an allocation on device ", ptr.device));
}

std::vector<DevicePtr> AllocationTable::TakeAll() {
  absl::MutexLock lock(&mu_);
  std::vector<DevicePtr> starts;
  starts.reserve(entries_.size());
  for (const auto& [address, entry] : entries_) {
    starts.push_back(DevicePtr{entry.device, address});
  }
  entries_.clear();
  return starts;
}

}  // namespace weft::runtime::cuda
