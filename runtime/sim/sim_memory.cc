#include "runtime/sim/sim_memory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

// Simulated address spaces start away from zero (zero is never valid) and
// hand out 256-byte aligned ranges, as cudaMalloc does.
constexpr uint64_t kFirstAddress = uint64_t{1} << 20;
constexpr uint64_t kAlignment = 256;

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

}  // namespace

SimMemory::Allocation::~Allocation() {
  if (data != nullptr && materialized != nullptr) {
    materialized->fetch_sub(size, std::memory_order_relaxed);
  }
}

SimMemory::SimMemory(std::vector<std::string> device_names,
                     uint64_t capacity_bytes)
    : names_(std::move(device_names)),
      capacity_(capacity_bytes),
      materialized_(new Counter[names_.size()]) {
  absl::MutexLock lock(&mu_);
  devices_.resize(names_.size());
  for (Device& device : devices_) device.next_address = kFirstAddress;
}

absl::Status SimMemory::CheckDevice(int device) const {
  if (device < 0 || device >= num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " does not exist (", num_devices(), " devices)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DevicePtr> SimMemory::Allocate(int device, uint64_t bytes) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  absl::MutexLock lock(&mu_);
  Device& dev = devices_[device];
  const uint64_t free_bytes = capacity_ - dev.used;
  if (bytes > free_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device ", device, " (", names_[device],
                     ") is out of memory: requested ", bytes, " bytes, ",
                     free_bytes, " bytes free of ", capacity_));
  }
  auto allocation = std::make_shared<Allocation>();
  allocation->size = bytes;
  allocation->materialized = &materialized_[device].bytes;
  // No host memory yet (Materialize). Zero-byte allocations still get a
  // distinct address.
  const uint64_t backing = bytes == 0 ? 1 : bytes;
  const uint64_t address = dev.next_address;
  allocation->address = address;
  dev.next_address += (backing + kAlignment - 1) / kAlignment * kAlignment;
  dev.used += bytes;
  dev.allocations.emplace(address, std::move(allocation));
  return DevicePtr{device, address};
}

absl::Status SimMemory::Free(DevicePtr ptr) {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  std::shared_ptr<Allocation> released;  // let go of outside mu_
  absl::MutexLock lock(&mu_);
  Device& dev = devices_[ptr.device];
  auto it = dev.allocations.find(ptr.address);
  if (it == dev.allocations.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", ptr.device, ": ", Hex(ptr.address),
                     " is not the start of an allocation"));
  }
  dev.used -= it->second->size;
  released = std::move(it->second);
  dev.allocations.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<SimMemory::Resolved> SimMemory::Resolve(DevicePtr ptr,
                                                       uint64_t bytes,
                                                       Need need) const {
  absl::MutexLock lock(&mu_);
  return ResolveLocked(ptr, bytes, need);
}

absl::Status SimMemory::ResolveArgs(
    absl::Span<const KernelArg> args, Need need,
    absl::FunctionRef<void(const KernelArg&, Resolved*)> each) const {
  absl::MutexLock lock(&mu_);
  for (const KernelArg& arg : args) {
    if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
      WEFT_ASSIGN_OR_RETURN(Resolved r,
                            ResolveLocked(b->ptr, b->size_bytes, need));
      each(arg, &r);
    } else {
      each(arg, nullptr);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SimMemory::Resolved> SimMemory::ResolveLocked(DevicePtr ptr,
                                                             uint64_t bytes,
                                                             Need need) const {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  const Device& dev = devices_[ptr.device];
  auto it = dev.allocations.upper_bound(ptr.address);
  if (it != dev.allocations.begin()) {
    --it;
    Allocation& a = *it->second;
    const uint64_t offset = ptr.address - a.address;
    if (offset <= a.size && bytes <= a.size - offset) {
      if (need == Need::kContents) {
        WEFT_RETURN_IF_ERROR(Materialize(ptr.device, a));
      }
      char* data = a.data == nullptr ? nullptr : a.data.get() + offset;
      return Resolved{it->second, data};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device ", ptr.device, ": [", Hex(ptr.address), ", +", bytes,
                   ") is not inside an allocation"));
}

absl::Status SimMemory::Materialize(int device, Allocation& allocation) const {
  if (allocation.data != nullptr) return absl::OkStatus();
  // calloc: zeroed pages the OS hands out lazily, so even a large buffer
  // costs no host time to zero here. A zero-byte allocation gets a byte,
  // so that its address is never null.
  const uint64_t bytes = std::max<uint64_t>(allocation.size, 1);
  allocation.data.reset(static_cast<char*>(std::calloc(bytes, 1)));
  if (allocation.data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device, ": host memory for the contents of a ",
        allocation.size, "-byte simulated allocation is exhausted"));
  }
  allocation.materialized->fetch_add(allocation.size,
                                     std::memory_order_relaxed);
  return absl::OkStatus();
}

uint64_t SimMemory::used_bytes(int device) const {
  if (device < 0 || device >= num_devices()) return 0;
  absl::MutexLock lock(&mu_);
  return devices_[device].used;
}

uint64_t SimMemory::materialized_bytes(int device) const {
  if (device < 0 || device >= num_devices()) return 0;
  return materialized_[device].bytes.load(std::memory_order_relaxed);
}

}  // namespace weft::runtime
