#include "scheduler/plan_digest.h"

#include <cstddef>
#include <string>

namespace weft::scheduler {
namespace {

// FNV-1a.
class Digest {
 public:
  void Add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash_ = (hash_ ^ bytes[i]) * 1099511628211ull;
    }
  }
  template <typename T>
  void Add(const T& value) {
    Add(&value, sizeof(value));
  }
  void Add(const std::string& text) {
    Add(text.size());
    Add(text.data(), text.size());
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace

uint64_t PlanDigest(const Plan& plan) {
  Digest digest;
  digest.Add(plan.num_events);
  digest.Add(plan.num_devices);
  digest.Add(plan.estimated_makespan_us);
  digest.Add(plan.critical_path_us);
  digest.Add(plan.lower_bound_us);
  for (const PlannedStream& ps : plan.streams) {
    digest.Add(ps.id);
    digest.Add(ps.device);
    digest.Add(ps.label);
    digest.Add(static_cast<int>(ps.engine));
  }
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const PlannedNode& pn = plan.nodes[i];
    digest.Add(pn.node);
    digest.Add(pn.device);
    digest.Add(pn.stream);
    digest.Add(pn.peer_stream);
    digest.Add(pn.signal_event);
    const int row = static_cast<int>(i);
    digest.Add(plan.Deps(row).size());
    for (NodeId d : plan.Deps(row)) digest.Add(d);
    digest.Add(plan.Waits(row).size());
    for (int e : plan.Waits(row)) digest.Add(e);
    const NodeEstimate estimate = plan.Estimate(row);
    digest.Add(estimate.start_us);
    digest.Add(estimate.end_us);
    digest.Add(estimate.transfer_us);
    digest.Add(i < plan.reasons.size() ? plan.reasons[i] : std::string());
  }
  return digest.value();
}

uint64_t MemoryDigest(const Plan& plan) {
  Digest digest;
  digest.Add(plan.copies.size());
  for (const PlannedCopy& c : plan.copies) {
    digest.Add(c.after);
    digest.Add(c.before);
    digest.Add(c.buffer);
    digest.Add(c.device);
    digest.Add(c.stream);
    digest.Add(c.event);
  }
  digest.Add(plan.memory.size());
  for (const DeviceMemory& m : plan.memory) {
    digest.Add(m.device);
    digest.Add(m.arena_bytes);
    digest.Add(m.peak_live_bytes);
    digest.Add(m.lower_bound_bytes);
    digest.Add(m.budget_bytes);
    digest.Add(m.spilled_bytes);
    digest.Add(m.orderings_added);
    digest.Add(m.budget_clamped);
  }
  digest.Add(plan.buffers.size());
  for (const PlannedBuffer& b : plan.buffers) {
    digest.Add(b.buffer);
    digest.Add(b.device);
    digest.Add(b.offset);
    digest.Add(b.size_bytes);
  }
  digest.Add(plan.graph != nullptr);
  if (plan.graph != nullptr) {
    for (const NodeSpec& node : plan.graph->nodes()) {
      digest.Add(node.name);
      digest.Add(node.device.value_or(-1));
      digest.Add(node.after.size());
      for (NodeId a : node.after) digest.Add(a);
    }
  }
  return digest.value();
}

}  // namespace weft::scheduler
