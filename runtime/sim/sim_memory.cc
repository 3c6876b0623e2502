#include "runtime/sim/sim_memory.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
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

std::atomic<uint64_t> next_memory_id{1};

// The calling thread's last few allocations found by CheckRange, valid
// while their memory (told apart by an id that is never reused) has freed
// nothing since.
struct CheckedAllocations {
  static constexpr int kEntries = 8;
  struct Entry {
    uint64_t memory = 0;
    uint64_t frees = 0;
    int device = -1;
    uint64_t begin = 0;
    uint64_t end = 0;
  };
  Entry entries[kEntries];
  int next = 0;  // the entry replaced next
};
thread_local CheckedAllocations tls_checked;

// How many of the first `bytes` of `data` hold data: up to its last nonzero
// byte. Looks back from the end a block at a time.
uint64_t DataBytes(const char* data, uint64_t bytes) {
  static constexpr char kZeros[4096] = {};
  uint64_t end = bytes;
  while (end > 0) {
    const uint64_t block = std::min<uint64_t>(end, sizeof(kZeros));
    if (std::memcmp(data + end - block, kZeros, block) != 0) break;
    end -= block;
  }
  while (end > 0 && data[end - 1] == 0) --end;
  return end;
}

}  // namespace

uint64_t SimRanges::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return 0;
  // The first range touching [begin, end), if any.
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;
  uint64_t covered = 0;
  uint64_t first = begin;
  uint64_t last = end;
  while (it != ranges_.end() && it->first <= end) {
    const uint64_t b = std::max(it->first, begin);
    const uint64_t e = std::min(it->second, end);
    if (e > b) covered += e - b;
    first = std::min(first, it->first);
    last = std::max(last, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace_hint(it, first, last);
  const uint64_t added = (end - begin) - covered;
  bytes_ += added;
  return added;
}

uint64_t SimRanges::Remove(uint64_t begin, uint64_t end) {
  if (begin >= end) return 0;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  uint64_t removed = 0;
  while (it != ranges_.end() && it->first < end) {
    const uint64_t b = it->first;
    const uint64_t e = it->second;
    removed += std::min(e, end) - std::max(b, begin);
    it = ranges_.erase(it);
    if (b < begin) ranges_.emplace_hint(it, b, begin);
    if (e > end) it = ranges_.emplace_hint(it, end, e);
  }
  bytes_ -= removed;
  return removed;
}

void SimRanges::ForEach(
    uint64_t begin, uint64_t end,
    absl::FunctionRef<void(uint64_t, uint64_t)> each) const {
  if (begin >= end) return;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second > begin) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    each(std::max(it->first, begin), std::min(it->second, end));
  }
}

void SimRanges::ForEachGap(
    uint64_t begin, uint64_t end,
    absl::FunctionRef<void(uint64_t, uint64_t)> each) const {
  uint64_t at = begin;
  ForEach(begin, end, [&](uint64_t b, uint64_t e) {
    if (b > at) each(at, b);
    at = e;
  });
  if (at < end) each(at, end);
}

SimMemory::Allocation::~Allocation() {
  if (materialized != nullptr) {
    materialized->fetch_sub(written.bytes(), std::memory_order_relaxed);
  }
}

SimMemory::SimMemory(std::vector<std::string> device_names,
                     uint64_t capacity_bytes)
    : id_(next_memory_id.fetch_add(1, std::memory_order_relaxed)),
      names_(std::move(device_names)),
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
  frees_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<SimMemory::Resolved> SimMemory::Resolve(DevicePtr ptr,
                                                       uint64_t bytes,
                                                       Need need) const {
  absl::MutexLock lock(&mu_);
  return ResolveLocked(ptr, bytes, need);
}

absl::Status SimMemory::CheckRange(DevicePtr ptr, uint64_t bytes) const {
  const uint64_t frees = frees_.load(std::memory_order_acquire);
  CheckedAllocations& checked = tls_checked;
  for (const CheckedAllocations::Entry& e : checked.entries) {
    if (e.memory == id_ && e.frees == frees && e.device == ptr.device &&
        ptr.address >= e.begin && ptr.address <= e.end &&
        bytes <= e.end - ptr.address) {
      return absl::OkStatus();
    }
  }
  uint64_t begin = 0;
  uint64_t end = 0;
  {
    absl::MutexLock lock(&mu_);
    WEFT_ASSIGN_OR_RETURN(const Resolved r,
                          ResolveLocked(ptr, bytes, Need::kAddress));
    begin = r.allocation->address;
    end = begin + r.allocation->size;
  }
  CheckedAllocations::Entry& e = checked.entries[checked.next];
  checked.next = (checked.next + 1) % CheckedAllocations::kEntries;
  e = CheckedAllocations::Entry{id_, frees, ptr.device, begin, end};
  return absl::OkStatus();
}

absl::Status SimMemory::CheckArgs(absl::Span<const KernelArg> args) const {
  for (const KernelArg& arg : args) {
    if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
      WEFT_RETURN_IF_ERROR(CheckRange(b->ptr, b->size_bytes));
    }
  }
  return absl::OkStatus();
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
        WEFT_RETURN_IF_ERROR(
            MakeContents(ptr.device, a, offset, offset + bytes));
      }
      Resolved resolved;
      resolved.owner = it->second;
      resolved.data = a.data == nullptr ? nullptr : a.data.get() + offset;
      resolved.allocation = &a;
      resolved.offset = offset;
      return resolved;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device ", ptr.device, ": [", Hex(ptr.address), ", +", bytes,
                   ") is not inside an allocation"));
}

absl::Status SimMemory::Materialize(int device, Allocation& allocation) const {
  if (allocation.data != nullptr) return absl::OkStatus();
  // Zeroed pages the OS hands out lazily, so even a large buffer costs no
  // host time to zero here. A zero-byte allocation gets a byte, so that
  // its address is never null.
  allocation.data = AllocateZeroed(allocation.size);
  if (allocation.data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device, ": host memory for the contents of a ",
        allocation.size, "-byte simulated allocation is exhausted"));
  }
  return absl::OkStatus();
}

absl::Status SimMemory::MakeContents(int device, Allocation& allocation,
                                     uint64_t begin, uint64_t end) const {
  WEFT_RETURN_IF_ERROR(Materialize(device, allocation));
  if (begin >= end) return absl::OkStatus();
  // Bytes written once and cleared since are zeroed now; bytes never
  // written are still the zeros AllocateZeroed gave.
  char* const data = allocation.data.get();
  const SimRanges& written = allocation.written;
  allocation.valid.ForEachGap(begin, end, [&](uint64_t b, uint64_t e) {
    written.ForEach(b, e, [&](uint64_t wb, uint64_t we) {
      std::memset(data + wb, 0, we - wb);
    });
  });
  MarkData(allocation, begin, end);
  return absl::OkStatus();
}

void SimMemory::MarkData(Allocation& allocation, uint64_t begin,
                         uint64_t end) const {
  allocation.valid.Add(begin, end);
  const uint64_t added = allocation.written.Add(begin, end);
  allocation.materialized->fetch_add(added, std::memory_order_relaxed);
}

absl::StatusOr<SimMemory::Resolved> SimMemory::ResolveData(
    DevicePtr src, uint64_t bytes,
    std::vector<std::pair<uint64_t, uint64_t>>* parts) const {
  absl::MutexLock lock(&mu_);
  WEFT_ASSIGN_OR_RETURN(Resolved from,
                        ResolveLocked(src, bytes, Need::kAddress));
  const uint64_t offset = from.offset;
  from.allocation->valid.ForEach(offset, offset + bytes,
                                 [&](uint64_t b, uint64_t e) {
                                   parts->emplace_back(b - offset, e - offset);
                                 });
  return from;
}

absl::Status SimMemory::Read(DevicePtr src, uint64_t bytes, void* out) const {
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  WEFT_ASSIGN_OR_RETURN(const Resolved from, ResolveData(src, bytes, &parts));
  char* const to = static_cast<char*>(out);
  uint64_t at = 0;
  for (const auto& [b, e] : parts) {
    std::memset(to + at, 0, b - at);
    std::memcpy(to + b, from.data + b, e - b);
    at = e;
  }
  if (bytes > at) std::memset(to + at, 0, bytes - at);
  return absl::OkStatus();
}

absl::Status SimMemory::ReadInto(DevicePtr src, uint64_t bytes,
                                 HostBuffer* out) const {
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  WEFT_ASSIGN_OR_RETURN(const Resolved from, ResolveData(src, bytes, &parts));
  const uint64_t stored = parts.empty() ? 0 : parts.back().second;
  char* const to = out->Reset(stored, bytes);  // zeros up to `stored`
  for (const auto& [b, e] : parts) std::memcpy(to + b, from.data + b, e - b);
  return absl::OkStatus();
}

absl::Status SimMemory::Write(DevicePtr dst, const void* src,
                              uint64_t src_bytes, uint64_t bytes) const {
  if (src_bytes > bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a write of ", src_bytes, " bytes of data into ", bytes, " bytes"));
  }
  const uint64_t data_bytes =
      DataBytes(static_cast<const char*>(src), src_bytes);
  Resolved to;
  {
    absl::MutexLock lock(&mu_);
    WEFT_ASSIGN_OR_RETURN(to, ResolveLocked(dst, bytes, Need::kAddress));
    Allocation& a = *to.allocation;
    a.valid.Remove(to.offset, to.offset + bytes);
    if (data_bytes > 0) {
      WEFT_RETURN_IF_ERROR(Materialize(dst.device, a));
      MarkData(a, to.offset, to.offset + data_bytes);
      to.data = a.data.get() + to.offset;
    }
  }
  if (data_bytes > 0) std::memcpy(to.data, src, data_bytes);
  return absl::OkStatus();
}

absl::Status SimMemory::Copy(DevicePtr dst, DevicePtr src,
                             uint64_t bytes) const {
  // The source's data ranges, from the range's start.
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  Resolved from;
  Resolved to;
  {
    absl::MutexLock lock(&mu_);
    WEFT_ASSIGN_OR_RETURN(from, ResolveLocked(src, bytes, Need::kAddress));
    WEFT_ASSIGN_OR_RETURN(to, ResolveLocked(dst, bytes, Need::kAddress));
    Allocation& s = *from.allocation;
    Allocation& d = *to.allocation;
    s.valid.ForEach(from.offset, from.offset + bytes,
                    [&](uint64_t b, uint64_t e) {
                      parts.emplace_back(b - from.offset, e - from.offset);
                    });
    const bool overlap = &s == &d && from.offset < to.offset + bytes &&
                         to.offset < from.offset + bytes;
    if (overlap && !parts.empty()) {
      // Moved as one block, as memmove would: its stale bytes zeroed
      // first.
      WEFT_RETURN_IF_ERROR(
          MakeContents(src.device, s, from.offset, from.offset + bytes));
      parts.assign(1, {0, bytes});
    }
    d.valid.Remove(to.offset, to.offset + bytes);
    if (!parts.empty()) {
      WEFT_RETURN_IF_ERROR(Materialize(dst.device, d));
      for (const auto& [b, e] : parts) {
        MarkData(d, to.offset + b, to.offset + e);
      }
      from.data = s.data.get() + from.offset;
      to.data = d.data.get() + to.offset;
    }
  }
  for (const auto& [b, e] : parts) {
    std::memmove(to.data + b, from.data + b, e - b);
  }
  return absl::OkStatus();
}

void SimMemory::Clear(const Resolved& resolved, uint64_t bytes) const {
  if (resolved.allocation == nullptr) return;
  absl::MutexLock lock(&mu_);
  resolved.allocation->valid.Remove(resolved.offset, resolved.offset + bytes);
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
