#include "runtime/device_graph.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"

namespace weft::runtime {
namespace {

int Append(DeviceGraph& graph, DeviceGraphNode node) {
  graph.nodes.push_back(std::move(node));
  return static_cast<int>(graph.nodes.size()) - 1;
}

// Fixed-width little-endian fields keep the encoding unambiguous.
void PutU64(std::string& out, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, sizeof(bytes));
}
void PutI32(std::string& out, int32_t v) {
  PutU64(out, static_cast<uint64_t>(static_cast<int64_t>(v)));
}

const char* KindName(DeviceGraphNodeKind kind) {
  switch (kind) {
    case DeviceGraphNodeKind::kKernel:
      return "kernel";
    case DeviceGraphNodeKind::kCopy:
      return "copy";
    case DeviceGraphNodeKind::kEventRecord:
      return "event record";
    case DeviceGraphNodeKind::kEventWait:
      return "event wait";
    case DeviceGraphNodeKind::kControl:
      return "control";
  }
  return "node";
}

}  // namespace

int DeviceGraph::AddKernel(KernelLaunch launch, std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kKernel;
  node.launch = std::move(launch);
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddDeviceCopy(DevicePtr dst, DevicePtr src, uint64_t bytes,
                               std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kCopy;
  node.direction = CopyDirection::kDeviceToDevice;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                 std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kCopy;
  node.direction = CopyDirection::kHostToDevice;
  node.dst = dst;
  node.host_src = src;
  node.bytes = bytes;
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                 std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kCopy;
  node.direction = CopyDirection::kDeviceToHost;
  node.host_dst = dst;
  node.src = src;
  node.bytes = bytes;
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddEventRecord(EventHandle event, std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kEventRecord;
  node.event = event;
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddEventWait(EventHandle event, std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kEventWait;
  node.event = event;
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

int DeviceGraph::AddControl(std::shared_ptr<const DeviceGraphControl> control,
                            std::vector<int> deps) {
  DeviceGraphNode node;
  node.kind = DeviceGraphNodeKind::kControl;
  node.control = std::move(control);
  node.deps = std::move(deps);
  return Append(*this, std::move(node));
}

bool DeviceGraph::HasControl() const {
  for (const DeviceGraphNode& node : nodes) {
    if (node.kind == DeviceGraphNodeKind::kControl) return true;
  }
  return false;
}

namespace {

absl::Status ValidateControl(const DeviceGraphControl& control, int device,
                             const std::string& where) {
  if (control.value.device != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", control.name, "' reads its ",
                     control.loop ? "condition" : "selector", " on device ",
                     control.value.device));
  }
  if (control.loop &&
      (control.bodies.size() != 1 || control.max_iterations == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": loop '", control.name,
                     "' needs one body and max_iterations > 0"));
  }
  if (!control.loop && control.dtype != scheduler::DType::kInt32 &&
      control.dtype != scheduler::DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": case..of '", control.name,
                     "' needs an INT32 or INT64 selector"));
  }
  if (control.result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", control.name, "' has no result"));
  }
  for (const DeviceGraph& body : control.bodies) {
    if (body.nodes.empty()) continue;
    if (body.device != device) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a body of '", control.name, "' is on device ",
                       body.device));
    }
    absl::Status s = ValidateDeviceGraph(body);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": in a body of '", control.name, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDeviceGraph(const DeviceGraph& graph) {
  const int device = graph.device;
  for (int i = 0; i < static_cast<int>(graph.nodes.size()); ++i) {
    const DeviceGraphNode& node = graph.nodes[i];
    auto where = [&] {
      return absl::StrCat("device graph of device ", device, ", node ", i, " (",
                          KindName(node.kind), ")");
    };
    for (int dep : node.deps) {
      if (dep < 0 || dep >= i) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": dependency ", dep, " is not an earlier node"));
      }
    }
    switch (node.kind) {
      case DeviceGraphNodeKind::kKernel:
        if (node.launch.user_kernel != nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(),
                           ": user kernels cannot go into a device "
                           "graph yet"));
        }
        for (const KernelArg& arg : node.launch.args) {
          const auto* buffer = std::get_if<DeviceBufferArg>(&arg);
          if (buffer != nullptr && buffer->ptr.device != device) {
            return absl::InvalidArgumentError(absl::StrCat(
                where(), ": op '", node.launch.op,
                "' has a buffer argument on device ", buffer->ptr.device));
          }
        }
        break;
      case DeviceGraphNodeKind::kCopy:
        switch (node.direction) {
          case CopyDirection::kHostToDevice:
            if (node.host_src == nullptr || node.dst.device != device) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where(),
                  ": a host-to-device copy needs a host source and a "
                  "destination on this device"));
            }
            break;
          case CopyDirection::kDeviceToHost:
            if (node.host_dst == nullptr || node.src.device != device) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where(),
                  ": a device-to-host copy needs a host destination "
                  "and a source on this device"));
            }
            break;
          case CopyDirection::kDeviceToDevice:
            if (node.dst.device != device) {
              return absl::InvalidArgumentError(
                  absl::StrCat(where(),
                               ": a device copy writes this device's memory "
                               "(destination on device ",
                               node.dst.device, ")"));
            }
            if (node.src.device < 0) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where(),
                  ": a device copy reads a device's memory (source "
                  "on device ",
                  node.src.device, ")"));
            }
            break;
        }
        break;
      case DeviceGraphNodeKind::kEventRecord:
      case DeviceGraphNodeKind::kEventWait:
        if (node.event.value == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": no event"));
        }
        break;
      case DeviceGraphNodeKind::kControl:
        if (node.control == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": no control"));
        }
        if (absl::Status s = ValidateControl(*node.control, device, where());
            !s.ok()) {
          return s;
        }
        break;
    }
  }
  return absl::OkStatus();
}

namespace {

// Writes a signature through a cursor into `out`, making room once per node:
// each field then costs a few stores instead of a library call. Numbers are
// varints (signed ones zigzagged) and strings carry their length, so the
// encoding stays prefix-free and exact.
class SignatureWriter {
 public:
  explicit SignatureWriter(std::string& out) : out_(out), at_(out.size()) {}
  ~SignatureWriter() { out_.resize(at_); }
  SignatureWriter(const SignatureWriter&) = delete;
  SignatureWriter& operator=(const SignatureWriter&) = delete;

  // Makes room for `bytes` more: at least doubling, and at once up to the
  // capacity the string has (a reused key grows only once).
  void Room(size_t bytes) {
    if (out_.size() < at_ + bytes) {
      out_.resize(std::max({at_ + bytes, 2 * out_.size(), out_.capacity()}));
    }
  }
  void Byte(int v) { out_[at_++] = static_cast<char>(v); }
  void Unsigned(uint64_t v) {
    while (v >= 0x80) {
      out_[at_++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    out_[at_++] = static_cast<char>(v);
  }
  void Signed(int64_t v) {
    Unsigned((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void String(const std::string& s) {
    Unsigned(s.size());
    std::memcpy(&out_[at_], s.data(), s.size());
    at_ += s.size();
  }

  // The most bytes a varint takes.
  static constexpr size_t kVarint = 10;

 private:
  std::string& out_;
  size_t at_;
};

void WriteSignature(const DeviceGraph& graph, SignatureWriter& w) {
  w.Room(2 * SignatureWriter::kVarint);
  w.Signed(graph.device);
  w.Unsigned(graph.nodes.size());
  constexpr size_t kV = SignatureWriter::kVarint;
  for (const DeviceGraphNode& node : graph.nodes) {
    // kind, op (length and bytes), argument count, each argument (kind,
    // size, dtype, access), copy fields, control fields, dependencies.
    w.Room(1 + kV + node.launch.op.size() + kV +
           node.launch.args.size() * (3 + kV) + 1 + 3 * kV + 2 + 2 * kV + kV +
           node.deps.size() * kV);
    w.Byte(static_cast<int>(node.kind));
    switch (node.kind) {
      case DeviceGraphNodeKind::kKernel:
        w.String(node.launch.op);
        w.Unsigned(node.launch.args.size());
        for (const KernelArg& arg : node.launch.args) {
          w.Byte(static_cast<int>(arg.index()));
          if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
            w.Unsigned(b->size_bytes);
            w.Byte(static_cast<int>(b->dtype));
            w.Byte(static_cast<int>(b->access));
          }
        }
        break;
      case DeviceGraphNodeKind::kCopy:
        w.Byte(static_cast<int>(node.direction));
        w.Unsigned(node.bytes);
        w.Signed(node.src.device);
        w.Signed(node.dst.device);
        break;
      case DeviceGraphNodeKind::kEventRecord:
      case DeviceGraphNodeKind::kEventWait:
        break;
      case DeviceGraphNodeKind::kControl:
        w.Byte(node.control->loop ? 'w' : 's');
        w.Byte(static_cast<int>(node.control->dtype));
        w.Unsigned(node.control->max_iterations);
        w.Unsigned(node.control->bodies.size());
        for (const DeviceGraph& body : node.control->bodies) {
          WriteSignature(body, w);
        }
        // The bodies may have used up the room made for this node.
        w.Room(kV + node.deps.size() * kV);
        break;
    }
    w.Unsigned(node.deps.size());
    for (int dep : node.deps) w.Signed(dep);
  }
}

}  // namespace

std::string DeviceGraphSignature(const DeviceGraph& graph) {
  std::string out;
  AppendDeviceGraphSignature(graph, out);
  return out;
}

void AppendDeviceGraphSignature(const DeviceGraph& graph, std::string& out) {
  SignatureWriter writer(out);
  WriteSignature(graph, writer);
}

std::string DeviceGraphParameters(const DeviceGraph& graph) {
  std::string out;
  out.reserve(graph.nodes.size() * 32);
  for (const DeviceGraphNode& node : graph.nodes) {
    switch (node.kind) {
      case DeviceGraphNodeKind::kKernel: {
        uint64_t cost_bits = 0;
        static_assert(sizeof(cost_bits) == sizeof(node.launch.cost_us));
        std::memcpy(&cost_bits, &node.launch.cost_us, sizeof(cost_bits));
        PutU64(out, cost_bits);
        // How a simulated device books the kernel: its share of the device
        // and its engine (a COPY node runs on a copy engine).
        PutI32(out, node.launch.occupancy_units);
        out.push_back(static_cast<char>(node.launch.engine));
        for (const KernelArg& arg : node.launch.args) {
          std::visit(
              [&out](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, DeviceBufferArg>) {
                  PutI32(out, v.ptr.device);
                  PutU64(out, v.ptr.address);
                } else {
                  char bytes[sizeof(T)];
                  std::memcpy(bytes, &v, sizeof(T));
                  out.append(bytes, sizeof(T));
                }
              },
              arg);
        }
        break;
      }
      case DeviceGraphNodeKind::kCopy:
        PutU64(out, node.dst.address);
        PutU64(out, node.src.address);
        PutU64(out, reinterpret_cast<uintptr_t>(node.host_dst));
        PutU64(out, reinterpret_cast<uintptr_t>(node.host_src));
        break;
      case DeviceGraphNodeKind::kEventRecord:
      case DeviceGraphNodeKind::kEventWait:
        PutU64(out, node.event.value);
        break;
      case DeviceGraphNodeKind::kControl:
        PutI32(out, node.control->value.device);
        PutU64(out, node.control->value.address);
        for (const DeviceGraph& body : node.control->bodies) {
          out.append(DeviceGraphParameters(body));
        }
        break;
    }
  }
  return out;
}

std::vector<int> AssignLanes(const DeviceGraph& graph, int max_lanes,
                             int& lanes) {
  const int n = static_cast<int>(graph.nodes.size());
  std::vector<int> lane_of(n, 0);
  std::vector<int> tail;        // by lane: its last node
  std::vector<int> last_given;  // by lane: when it last got a node
  for (int i = 0; i < n; ++i) {
    int lane = -1;
    for (int dep : graph.nodes[i].deps) {
      if (tail[lane_of[dep]] == dep) {
        lane = lane_of[dep];
        break;
      }
    }
    if (lane < 0) {
      if (static_cast<int>(tail.size()) < std::max(1, max_lanes)) {
        lane = static_cast<int>(tail.size());
        tail.push_back(-1);
        last_given.push_back(-1);
      } else {
        lane = static_cast<int>(
            std::min_element(last_given.begin(), last_given.end()) -
            last_given.begin());
      }
    }
    lane_of[i] = lane;
    tail[lane] = i;
    last_given[lane] = i;
  }
  lanes = std::max<int>(1, static_cast<int>(tail.size()));
  return lane_of;
}

}  // namespace weft::runtime
