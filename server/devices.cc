#include "server/devices.h"

namespace weft::server {

std::vector<weft::v1::Device> DescribeDevices(
    const runtime::Backend& backend, const runtime::Executor& executor,
    const std::vector<int64_t>& reserved_bytes) {
  const std::vector<runtime::DeviceLoad> load = executor.Load();
  std::vector<weft::v1::Device> devices;
  for (int i = 0; i < backend.device_count(); ++i) {
    const runtime::DeviceInfo info = backend.device_info(i);
    weft::v1::Device d;
    d.set_index(info.index);
    d.set_name(info.name);
    d.set_uuid(info.uuid);
    d.set_simulated(info.simulated);
    d.set_memory_total_bytes(info.memory_total_bytes);
    if (i < static_cast<int>(reserved_bytes.size()) && reserved_bytes[i] > 0) {
      d.set_memory_reserved_bytes(static_cast<uint64_t>(reserved_bytes[i]));
    }
    if (i < static_cast<int>(load.size())) {
      d.set_memory_used_bytes(load[i].memory.in_use_bytes);
      d.set_memory_cached_bytes(load[i].memory.cached_bytes);
      d.set_memory_arena_bytes(load[i].memory.arena_bytes);
      d.set_streams_busy(load[i].streams_busy);
      d.set_streams_total(load[i].streams_total);
    }
    devices.push_back(std::move(d));
  }
  return devices;
}

std::vector<DeviceSample> ToDeviceSamples(
    const std::vector<weft::v1::Device>& devices) {
  std::vector<DeviceSample> samples;
  for (const weft::v1::Device& d : devices) {
    DeviceSample s;
    s.index = d.index();
    s.uuid = d.uuid();
    s.streams_busy = d.streams_busy();
    s.streams_total = d.streams_total();
    s.memory_used_bytes = d.memory_used_bytes();
    s.memory_arena_bytes = d.memory_arena_bytes();
    s.memory_reserved_bytes = d.memory_reserved_bytes();
    s.memory_total_bytes = d.memory_total_bytes();
    samples.push_back(std::move(s));
  }
  return samples;
}

std::vector<DeviceSample> SampleDevices(
    const runtime::Backend& backend, const runtime::Executor& executor,
    const std::vector<int64_t>& reserved_bytes) {
  std::vector<DeviceSample> samples =
      ToDeviceSamples(DescribeDevices(backend, executor, reserved_bytes));
  const std::vector<runtime::DeviceLoad> load = executor.Load();
  for (DeviceSample& s : samples) {
    if (s.index < 0 || s.index >= static_cast<int>(load.size())) continue;
    const runtime::MemoryPoolStats& memory = load[s.index].memory;
    s.memory_cached_bytes = memory.cached_bytes;
    s.memory_allocations = memory.backend_allocations;
    s.memory_pool_hits = memory.cache_hits;
  }
  return samples;
}

std::vector<int> BusyStreams(const runtime::Executor& executor,
                             int num_devices) {
  std::vector<int> busy;
  for (const runtime::DeviceLoad& load : executor.Load()) {
    busy.push_back(load.streams_busy);
  }
  if (static_cast<int>(busy.size()) != num_devices) busy.clear();
  return busy;
}

}  // namespace weft::server
