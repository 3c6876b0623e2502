#include "client/plan_memory.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace weft::client {
namespace {

constexpr int kNowhere = -2;  // no version of the buffer yet
constexpr int kHost = -1;

struct Use {
  int buffer = 0;
  bool writes = false;
};

using BufferIds = absl::flat_hash_map<std::string, int>;

void CollectUses(const weft::v1::Node& node, const BufferIds& ids,
                 std::vector<Use>* uses) {
  auto add = [&](const std::string& name, bool writes) {
    auto it = ids.find(name);
    if (it != ids.end()) uses->push_back({it->second, writes});
  };
  for (const weft::v1::Arg& arg : node.args()) {
    if (!arg.has_buffer()) continue;
    const weft::v1::Access access = arg.buffer().access();
    add(arg.buffer().name(),
        access == weft::v1::WRITE || access == weft::v1::READ_WRITE);
  }
  if (node.has_while_loop()) {
    add(node.while_loop().condition(), false);
    for (const weft::v1::Node& n : node.while_loop().body()) {
      CollectUses(n, ids, uses);
    }
  }
  if (node.has_case_of()) {
    add(node.case_of().selector(), false);
    for (const weft::v1::Branch& branch : node.case_of().branches()) {
      for (const weft::v1::Node& n : branch.nodes()) CollectUses(n, ids, uses);
    }
  }
}

// Each buffer once, in order of first appearance, writing if any use does.
std::vector<Use> Merge(std::vector<Use> uses) {
  std::vector<Use> merged;
  for (const Use& u : uses) {
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const Use& m) { return m.buffer == u.buffer; });
    if (it == merged.end()) {
      merged.push_back(u);
    } else {
      it->writes = it->writes || u.writes;
    }
  }
  return merged;
}

double Time(double us) { return std::isfinite(us) && us > 0 ? us : 0; }

bool IsControl(const weft::v1::Node& node) {
  return node.has_while_loop() || node.has_case_of();
}

// Where a planned node of `plan` runs: its stream's device, kHost for a
// HOST stream or a HOST node (`spec`, if known).
int WhereOf(const weft::v1::Plan& plan, const weft::v1::PlannedNode& pn,
            const weft::v1::Node* spec) {
  int where = pn.device();
  bool host = false;
  if (pn.stream() >= 0 && pn.stream() < plan.streams_size()) {
    where = plan.streams(pn.stream()).device();
    host = plan.streams(pn.stream()).engine() == weft::v1::HOST;
  }
  if (spec != nullptr && spec->engine() == weft::v1::HOST) host = true;
  return host ? kHost : where;
}

// Calls use(buffer, device) for what the bodies of control node `control`
// (named `name` in `plan`, whose Plan.bodies hold its bodies' plans) make
// current on devices, at any depth, as the planner counts them
// (scheduler/memory/body_uses.h): each body node on a device uses its
// buffers there, and where every body node runs on one device, so do the
// control node's own buffers.
void ForEachBodyUse(const weft::v1::Node& control, const std::string& name,
                    const weft::v1::Plan& plan, const BufferIds& ids,
                    const std::function<void(int, int)>& use) {
  struct Body {
    const google::protobuf::RepeatedPtrField<weft::v1::Node>* nodes;
    const weft::v1::Plan* plan;
  };
  std::vector<Body> bodies;
  int one_device = kNowhere;
  bool spread = false;
  for (const weft::v1::BodyPlan& body : plan.bodies()) {
    if (body.node() != name) continue;
    const google::protobuf::RepeatedPtrField<weft::v1::Node>* nodes = nullptr;
    if (control.has_while_loop()) {
      nodes = &control.while_loop().body();
    } else if (body.branch() >= 0 &&
               body.branch() < control.case_of().branches_size()) {
      nodes = &control.case_of().branches(body.branch()).nodes();
    }
    if (nodes == nullptr) continue;
    bodies.push_back({nodes, &body.plan()});
    for (const weft::v1::PlannedNode& pn : body.plan().nodes()) {
      spread = spread || (one_device != kNowhere && pn.device() != one_device);
      one_device = pn.device();
    }
  }
  if (!spread && one_device >= 0) {
    std::vector<Use> own;
    CollectUses(control, ids, &own);
    for (const Use& u : own) use(u.buffer, one_device);
  }
  for (const Body& body : bodies) {
    absl::flat_hash_map<std::string, const weft::v1::Node*> specs;
    for (const weft::v1::Node& n : *body.nodes) specs[n.name()] = &n;
    for (const weft::v1::PlannedNode& pn : body.plan->nodes()) {
      auto found = specs.find(pn.name());
      if (found == specs.end()) continue;
      const weft::v1::Node* spec = found->second;
      const int where = WhereOf(*body.plan, pn, spec);
      if (where != kHost) {
        std::vector<Use> uses;
        CollectUses(*spec, ids, &uses);
        for (const Use& u : uses) use(u.buffer, where);
      }
      if (IsControl(*spec)) {
        ForEachBodyUse(*spec, pn.name(), *body.plan, ids, use);
      }
    }
  }
}

struct BufferState {
  int latest = kNowhere;
  std::vector<int> current;  // locations holding the latest version
  bool written = false;

  bool Has(int where) const {
    return std::find(current.begin(), current.end(), where) != current.end();
  }
};

struct Interval {
  double start = 0;
  double end = 0;
};

}  // namespace

std::vector<DeviceLiveBytes> LiveBytesByDevice(const weft::v1::Plan& plan,
                                               const weft::v1::Graph& graph) {
  std::set<int> devices;
  for (const weft::v1::DeviceMemory& m : plan.memory()) {
    devices.insert(m.device());
  }
  for (const weft::v1::PlannedBuffer& b : plan.buffers()) {
    devices.insert(b.device());
  }
  std::vector<DeviceLiveBytes> out;
  if (plan.buffers().empty()) {
    for (int d : devices) out.push_back({d, {}, 0});
    return out;
  }

  BufferIds buffer_ids;
  for (int b = 0; b < graph.buffers_size(); ++b) {
    buffer_ids.emplace(graph.buffers(b).name(), b);
  }
  absl::flat_hash_map<std::string, const weft::v1::Node*> graph_nodes;
  for (const weft::v1::Node& n : graph.nodes()) graph_nodes[n.name()] = &n;

  // Where each planned node runs and what it uses.
  struct Step {
    int where = kHost;
    Interval time;
    std::vector<Use> uses;
    // A control node's: (buffer, device) its bodies use on other devices.
    std::vector<std::pair<int, int>> elsewhere;
  };
  std::vector<Step> steps;
  steps.reserve(plan.nodes_size());
  double makespan = Time(plan.estimated_makespan_us());
  for (const weft::v1::PlannedNode& pn : plan.nodes()) {
    Step step;
    step.time.start = Time(pn.estimated_start_us());
    step.time.end = std::max(step.time.start, Time(pn.estimated_end_us()));
    makespan = std::max(makespan, step.time.end);
    auto it = graph_nodes.find(pn.name());
    const weft::v1::Node* spec = it != graph_nodes.end() ? it->second : nullptr;
    step.where = WhereOf(plan, pn, spec);
    if (spec != nullptr) {
      std::vector<Use> uses;
      CollectUses(*spec, buffer_ids, &uses);
      step.uses = Merge(std::move(uses));
      if (IsControl(*spec) && step.where != kHost) {
        ForEachBodyUse(*spec, pn.name(), plan, buffer_ids,
                       [&](int buffer, int device) {
                         if (device != step.where) {
                           step.elsewhere.emplace_back(buffer, device);
                         }
                       });
      }
    }
    steps.push_back(std::move(step));
  }

  // (buffer, device) -> when that copy is live.
  std::map<std::pair<int, int>, Interval> copies;
  auto use = [&](int buffer, int device, const Interval& time) {
    auto [it, inserted] = copies.emplace(std::make_pair(buffer, device), time);
    if (!inserted) {
      it->second.start = std::min(it->second.start, time.start);
      it->second.end = std::max(it->second.end, time.end);
    }
  };
  auto has_data = [&](int b) {
    return graph.buffers(b).init_case() == weft::v1::Buffer::kData;
  };

  std::vector<BufferState> state(graph.buffers_size());
  // Host data is uploaded to the device of its first user, before anything
  // runs.
  {
    std::vector<bool> seen(graph.buffers_size(), false);
    for (const Step& step : steps) {
      for (const Use& u : step.uses) {
        if (seen[u.buffer]) continue;
        seen[u.buffer] = true;
        if (step.where == kHost || !has_data(u.buffer)) continue;
        state[u.buffer].latest = step.where;
        state[u.buffer].current = {step.where};
        use(u.buffer, step.where, {0, 0});
      }
    }
  }
  for (const Step& step : steps) {
    for (const auto& [buffer, device] : step.elsewhere) {
      use(buffer, device, step.time);
    }
    for (const Use& u : step.uses) {
      BufferState& s = state[u.buffer];
      if (step.where != kHost) use(u.buffer, step.where, step.time);
      if (s.latest == kNowhere) {
        s.latest = step.where;
        s.current = {step.where};
      } else if (s.Has(step.where)) {
        // Up to date there already.
      } else if (!s.written && !has_data(u.buffer)) {
        s.current.push_back(step.where);  // made in place
      } else {
        if (s.latest >= 0) use(u.buffer, s.latest, step.time);  // the source
        s.current.push_back(step.where);
      }
    }
    for (const Use& u : step.uses) {
      if (!u.writes) continue;
      BufferState& s = state[u.buffer];
      s.latest = step.where;
      s.current = {step.where};
      s.written = true;
    }
  }
  for (int b = 0; b < graph.buffers_size(); ++b) {
    if (!graph.buffers(b).output() || state[b].latest < 0) continue;
    auto it = copies.find({b, state[b].latest});
    if (it != copies.end()) it->second.end = makespan;
  }

  // Allocations (+) and frees (-) by device and time.
  std::map<int, std::map<double, int64_t>> changes;
  for (const weft::v1::PlannedBuffer& b : plan.buffers()) {
    auto id = buffer_ids.find(b.name());
    if (id == buffer_ids.end()) continue;
    auto it = copies.find({id->second, b.device()});
    if (it == copies.end() || !(it->second.end > it->second.start)) continue;
    std::map<double, int64_t>& device = changes[b.device()];
    device[it->second.start] += b.size_bytes();
    device[it->second.end] -= b.size_bytes();
  }
  for (int d : devices) {
    DeviceLiveBytes live{d, {}, 0};
    auto it = changes.find(d);
    if (it != changes.end()) {
      int64_t bytes = 0;
      for (const auto& [time, delta] : it->second) {
        if (delta == 0 && !live.samples.empty()) continue;
        bytes += delta;
        if (live.samples.empty() && time > 0) live.samples.push_back({0, 0});
        live.samples.push_back({time, bytes});
        live.peak_bytes = std::max(live.peak_bytes, bytes);
      }
    }
    out.push_back(std::move(live));
  }
  return out;
}

}  // namespace weft::client
