#include "scheduler/graph_builder.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/field_errors.h"
#include "scheduler/kernel_builder.h"
#include "scheduler/op_signatures.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

absl::StatusOr<DType> ConvertDType(int value, absl::string_view field) {
  switch (value) {
    case weft::v1::BYTES:
      return DType::kBytes;
    case weft::v1::FLOAT32:
      return DType::kFloat32;
    case weft::v1::FLOAT64:
      return DType::kFloat64;
    case weft::v1::INT32:
      return DType::kInt32;
    case weft::v1::INT64:
      return DType::kInt64;
  }
  return Invalid(field, absl::StrCat("unknown dtype ", value));
}

absl::StatusOr<Access> ConvertAccess(int value, absl::string_view field) {
  switch (value) {
    case weft::v1::READ:
      return Access::kRead;
    case weft::v1::WRITE:
      return Access::kWrite;
    case weft::v1::READ_WRITE:
      return Access::kReadWrite;
    case weft::v1::ACCESS_UNSPECIFIED:
      return Invalid(field, "missing access mode (READ, WRITE or READ_WRITE)");
  }
  return Invalid(field, absl::StrCat("unknown access mode ", value));
}

absl::StatusOr<Engine> ConvertEngine(int value, absl::string_view field) {
  switch (value) {
    case weft::v1::COMPUTE:
      return Engine::kCompute;
    case weft::v1::COPY:
      return Engine::kCopy;
    case weft::v1::COLLECTIVE:
      return Engine::kCollective;
    case weft::v1::HOST:
      return Engine::kHost;
  }
  return Invalid(field, absl::StrCat("unknown engine ", value));
}

absl::StatusOr<std::vector<BufferSpec>> BuildBuffers(
    const weft::v1::Graph& proto, const GraphLimits& limits,
    absl::flat_hash_map<absl::string_view, BufferId>& ids) {
  std::vector<BufferSpec> buffers;
  buffers.reserve(proto.buffers_size());
  ids.reserve(proto.buffers_size());
  uint64_t total_bytes = 0;
  for (int i = 0; i < proto.buffers_size(); ++i) {
    const weft::v1::Buffer& b = proto.buffers(i);
    const std::string field = absl::StrCat("graph.buffers[", i, "]");
    if (b.name().empty()) return Invalid(field + ".name", "empty buffer name");
    WEFT_RETURN_IF_ERROR(CheckNameLength(field + ".name", b.name(), limits));
    auto [it, inserted] = ids.emplace(b.name(), i);
    if (!inserted) {
      return Invalid(
          field + ".name",
          absl::StrCat("duplicate buffer name '", b.name(),
                       "' (first used by graph.buffers[", it->second, "])"));
    }
    BufferSpec spec;
    spec.name = b.name();
    WEFT_ASSIGN_OR_RETURN(spec.dtype,
                          ConvertDType(b.dtype(), field + ".dtype"));
    spec.size_bytes = b.size_bytes();
    if (spec.size_bytes == 0) {
      return Invalid(field + ".size_bytes", "size must be positive");
    }
    if (spec.size_bytes > limits.max_buffer_bytes) {
      return Invalid(field + ".size_bytes",
                     absl::StrCat(spec.size_bytes,
                                  " bytes exceed the per-buffer limit of ",
                                  limits.max_buffer_bytes, " bytes"));
    }
    const int element = DTypeSize(spec.dtype);
    if (spec.size_bytes % element != 0) {
      return Invalid(field + ".size_bytes",
                     absl::StrCat(spec.size_bytes, " is not a multiple of the ",
                                  DTypeName(spec.dtype), " element size (",
                                  element, " bytes)"));
    }
    total_bytes += spec.size_bytes;  // no overflow: each is bounded above
    if (total_bytes > limits.max_total_bytes) {
      return Invalid(field + ".size_bytes",
                     absl::StrCat("buffers up to this one total ", total_bytes,
                                  " bytes, over the per-graph limit of ",
                                  limits.max_total_bytes, " bytes"));
    }
    switch (b.init_case()) {
      case weft::v1::Buffer::kData:
        if (b.data().size() > spec.size_bytes) {
          return Invalid(
              field + ".data",
              absl::StrCat(b.data().size(),
                           " bytes of initial data do not fit in ",
                           "the buffer's ", spec.size_bytes, " bytes"));
        }
        spec.init = BufferSpec::Init::kData;
        spec.data = b.data();
        break;
      case weft::v1::Buffer::kFill:
        if (!std::isfinite(b.fill()) && spec.dtype != DType::kFloat32 &&
            spec.dtype != DType::kFloat64) {
          return Invalid(field + ".fill",
                         absl::StrCat("non-finite fill value for a ",
                                      DTypeName(spec.dtype), " buffer"));
        }
        spec.init = BufferSpec::Init::kFill;
        spec.fill = b.fill();
        break;
      case weft::v1::Buffer::INIT_NOT_SET:
        spec.init = BufferSpec::Init::kZero;
        break;
    }
    spec.output = b.output();
    buffers.push_back(std::move(spec));
  }
  return buffers;
}

absl::StatusOr<Arg> BuildArg(
    const weft::v1::Arg& arg, const std::string& field,
    const absl::flat_hash_map<absl::string_view, BufferId>& buffer_ids) {
  switch (arg.value_case()) {
    case weft::v1::Arg::kBuffer: {
      const weft::v1::BufferArg& b = arg.buffer();
      if (b.name().empty()) {
        return Invalid(field + ".buffer.name", "empty buffer name");
      }
      auto it = buffer_ids.find(b.name());
      if (it == buffer_ids.end()) {
        return Invalid(field + ".buffer.name",
                       absl::StrCat("unknown buffer ", Quote(b.name())));
      }
      BufferUse use;
      use.buffer = it->second;
      WEFT_ASSIGN_OR_RETURN(
          use.access, ConvertAccess(b.access(), field + ".buffer.access"));
      return Arg(use);
    }
    case weft::v1::Arg::kF32:
      return Arg(arg.f32());
    case weft::v1::Arg::kF64:
      return Arg(arg.f64());
    case weft::v1::Arg::kI32:
      return Arg(arg.i32());
    case weft::v1::Arg::kI64:
      return Arg(arg.i64());
    case weft::v1::Arg::VALUE_NOT_SET:
      break;
  }
  return Invalid(field, "no value set (expected buffer, f32, f64, i32 or i64)");
}

// What building a graph's node lists shares, from the outermost list
// down into the bodies of control nodes.
struct BuildContext {
  const GraphLimits* limits = nullptr;
  const std::vector<BufferSpec>* buffers = nullptr;
  const absl::flat_hash_map<absl::string_view, BufferId>* buffer_ids = nullptr;
  const std::vector<ModuleSpec>* modules = nullptr;
  const absl::flat_hash_map<absl::string_view, ModuleId>* module_ids = nullptr;
  // Every node name of the graph, bodies included -> where it is defined.
  absl::flat_hash_map<absl::string_view, std::string> names;
  // Nodes of all lists so far.
  int64_t total_nodes = 0;
  // The buffers as bodies see them (no initial data), made on first use.
  std::vector<BufferSpec> body_buffers;
  bool body_buffers_made = false;
};

absl::StatusOr<std::vector<NodeSpec>> BuildNodeList(
    const google::protobuf::RepeatedPtrField<weft::v1::Node>& list,
    const std::string& list_field, int depth, BuildContext& ctx);

// The access that covers both `a` and `b`.
Access Union(Access a, Access b) {
  if (a == b) return a;
  return Access::kReadWrite;
}

// A control node's body: its own Graph over the enclosing buffers.
absl::StatusOr<std::shared_ptr<const Graph>> BuildBody(
    const google::protobuf::RepeatedPtrField<weft::v1::Node>& list,
    const std::string& list_field, absl::string_view name, int depth,
    BuildContext& ctx) {
  if (list.empty()) {
    return Invalid(list_field, "empty: a body has at least one node");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<NodeSpec> nodes,
                        BuildNodeList(list, list_field, depth, ctx));
  if (!ctx.body_buffers_made) {
    ctx.body_buffers_made = true;
    ctx.body_buffers = *ctx.buffers;
    for (BufferSpec& b : ctx.body_buffers) {
      b.init = BufferSpec::Init::kZero;
      b.output = false;
      b.data.clear();
      b.data.shrink_to_fit();
      b.fill = 0;
    }
  }
  bool kernels = false;
  for (const NodeSpec& node : nodes) kernels |= node.kernel.has_value();
  auto body = std::make_shared<Graph>(
      std::string(name), ctx.body_buffers, std::move(nodes),
      kernels ? *ctx.modules : std::vector<ModuleSpec>());
  WEFT_RETURN_IF_ERROR(CheckAcyclic(*body));
  return std::shared_ptr<const Graph>(std::move(body));
}

// Fills `spec` for a control node (weft.v1.Node.control set).
absl::Status BuildControl(const weft::v1::Node& n, const std::string& field,
                          int depth, BuildContext& ctx, NodeSpec& spec) {
  const GraphLimits& limits = *ctx.limits;
  const bool loop = n.has_while_loop();
  const std::string control_field = field + (loop ? ".while_loop" : ".case_of");
  if (!n.op().empty() || n.has_kernel()) {
    return Invalid(
        n.op().empty() ? field + ".kernel" : field + ".op",
        "a control node (while_loop or case_of) runs its bodies, not an op "
        "or a kernel");
  }
  if (n.args_size() > 0) {
    return Invalid(field + ".args",
                   "a control node has no args: it uses what its bodies use");
  }
  if (n.engine() != weft::v1::COMPUTE) {
    return Invalid(field + ".engine",
                   "a control node has no engine: its bodies' nodes have");
  }
  if (n.has_cost()) {
    return Invalid(field + ".cost",
                   "a control node has no cost: its bodies' nodes have");
  }
  if (n.has_device()) {
    return Invalid(field + ".device",
                   "a control node runs on no device: its bodies' nodes do");
  }
  if (depth > limits.max_control_depth) {
    return Invalid(control_field,
                   absl::StrCat("control nodes nest deeper than the limit of ",
                                limits.max_control_depth));
  }
  auto control = std::make_shared<ControlSpec>();
  const std::string& buffer_name =
      loop ? n.while_loop().condition() : n.case_of().selector();
  const std::string buffer_field =
      control_field + (loop ? ".condition" : ".selector");
  if (buffer_name.empty()) {
    return Invalid(buffer_field, "empty buffer name");
  }
  auto it = ctx.buffer_ids->find(buffer_name);
  if (it == ctx.buffer_ids->end()) {
    return Invalid(buffer_field,
                   absl::StrCat("unknown buffer ", Quote(buffer_name)));
  }
  control->condition = it->second;
  double cost = 0;
  if (loop) {
    control->kind = ControlSpec::Kind::kWhile;
    spec.op = std::string(kWhileOp);
    if (n.while_loop().max_iterations() == 0) {
      return Invalid(control_field + ".max_iterations",
                     "required and > 0: the most iterations the loop may run");
    }
    control->max_iterations = n.while_loop().max_iterations();
    WEFT_ASSIGN_OR_RETURN(
        std::shared_ptr<const Graph> body,
        BuildBody(n.while_loop().body(), control_field + ".body", n.name(),
                  depth + 1, ctx));
    control->bodies.push_back(std::move(body));
  } else {
    control->kind = ControlSpec::Kind::kCase;
    spec.op = std::string(kCaseOp);
    const DType dtype = (*ctx.buffers)[control->condition].dtype;
    if (dtype != DType::kInt32 && dtype != DType::kInt64) {
      return Invalid(
          buffer_field,
          absl::StrCat("selector ", Quote(buffer_name), " is ",
                       DTypeName(dtype), "; a selector is INT32 or INT64"));
    }
    if (n.case_of().branches_size() == 0) {
      return Invalid(control_field + ".branches",
                     "empty: a case..of has at least one branch");
    }
    for (int b = 0; b < n.case_of().branches_size(); ++b) {
      WEFT_ASSIGN_OR_RETURN(
          std::shared_ptr<const Graph> body,
          BuildBody(n.case_of().branches(b).nodes(),
                    absl::StrCat(control_field, ".branches[", b, "].nodes"),
                    absl::StrCat(n.name(), "[", b, "]"), depth + 1, ctx));
      control->bodies.push_back(std::move(body));
    }
  }
  // To the enclosing graph: the union of the bodies' accesses, then the
  // condition, in order of first appearance; one iteration's cost.
  std::vector<int> slot(ctx.buffers->size(), -1);
  std::vector<BufferUse> uses;
  auto add = [&](BufferUse use) {
    int& at = slot[use.buffer];
    if (at < 0) {
      at = static_cast<int>(uses.size());
      uses.push_back(use);
    } else {
      uses[at].access = Union(uses[at].access, use.access);
    }
  };
  for (const std::shared_ptr<const Graph>& body : control->bodies) {
    double body_cost = 0;
    for (NodeId id = 0; id < body->num_nodes(); ++id) {
      for (const BufferUse& use : body->Uses(id)) add(use);
      body_cost += body->cost_us(id);
      control->depth =
          std::max(control->depth, body->node(id).control == nullptr
                                       ? 1
                                       : body->node(id).control->depth + 1);
    }
    cost = std::max(cost, body_cost);
  }
  add(BufferUse{control->condition, Access::kRead});
  spec.args.reserve(uses.size());
  for (const BufferUse& use : uses) spec.args.push_back(Arg(use));
  spec.engine = Engine::kHost;
  spec.cost_us = std::min(cost, limits.max_node_cost_us);
  spec.control = std::move(control);
  return absl::OkStatus();
}

// Builds node `i` of a list whose names are `node_ids`.
absl::Status BuildNode(
    const weft::v1::Node& n, const std::string& field, int i, int depth,
    const absl::flat_hash_map<absl::string_view, NodeId>& node_ids,
    BuildContext& ctx, NodeSpec& spec) {
  const GraphLimits& limits = *ctx.limits;
  spec.name = n.name();
  const bool control = n.control_case() != weft::v1::Node::CONTROL_NOT_SET;
  if (control) {
    WEFT_RETURN_IF_ERROR(BuildControl(n, field, depth, ctx, spec));
  } else {
    if (n.has_kernel()) {
      if (!n.op().empty()) {
        return Invalid(field + ".op",
                       absl::StrCat("op ", Quote(n.op()),
                                    " and kernel are both set; a node runs "
                                    "either a built-in op or a user kernel"));
      }
      WEFT_ASSIGN_OR_RETURN(
          spec.kernel,
          BuildKernel(n.kernel(), field + ".kernel", limits, *ctx.module_ids));
      spec.op = std::string(kUserKernelOp);
    } else if (n.op().empty()) {
      return Invalid(field + ".op",
                     absl::StrCat("empty op (built-in ops: ",
                                  absl::StrJoin(BuiltinOpNames(), ", "),
                                  "; or set kernel to launch a user kernel)"));
    } else if (!IsBuiltinOp(n.op())) {
      return Invalid(
          field + ".op",
          absl::StrCat("unknown op ", Quote(n.op()), " (built-in ops: ",
                       absl::StrJoin(BuiltinOpNames(), ", "), ")"));
    } else {
      spec.op = n.op();
    }
    if (n.args_size() > limits.max_args_per_node) {
      return Invalid(
          field + ".args",
          absl::StrCat(n.args_size(), " arguments exceed the limit of ",
                       limits.max_args_per_node));
    }
    spec.args.reserve(n.args_size());
    for (int j = 0; j < n.args_size(); ++j) {
      WEFT_ASSIGN_OR_RETURN(
          Arg arg, BuildArg(n.args(j), absl::StrCat(field, ".args[", j, "]"),
                            *ctx.buffer_ids));
      spec.args.push_back(std::move(arg));
    }
  }
  // Kept in request order, duplicates included, so that error messages
  // can name after[k] exactly.
  if (n.after_size() > limits.max_after_per_node) {
    return Invalid(field + ".after",
                   absl::StrCat(n.after_size(), " entries exceed the limit of ",
                                limits.max_after_per_node));
  }
  spec.after.reserve(n.after_size());
  for (int k = 0; k < n.after_size(); ++k) {
    const std::string after_field = absl::StrCat(field, ".after[", k, "]");
    const std::string& name = n.after(k);
    if (name.empty()) return Invalid(after_field, "empty node name");
    auto it = node_ids.find(name);
    if (it == node_ids.end()) {
      return Invalid(after_field, absl::StrCat("unknown node ", Quote(name)));
    }
    if (it->second == i) {
      return Invalid(after_field,
                     absl::StrCat("node '", name, "' cannot run after itself"));
    }
    spec.after.push_back(it->second);
  }
  if (control) {
    WEFT_RETURN_IF_ERROR(
        CheckNameLength(field + ".stream_label", n.stream_label(), limits));
    spec.stream_label = n.stream_label();
    return absl::OkStatus();
  }
  WEFT_RETURN_IF_ERROR(
      CheckNameLength(field + ".stream_label", n.stream_label(), limits));
  spec.stream_label = n.stream_label();
  WEFT_ASSIGN_OR_RETURN(spec.engine,
                        ConvertEngine(n.engine(), field + ".engine"));
  if (spec.kernel.has_value() && spec.engine == Engine::kHost) {
    return Invalid(field + ".engine",
                   "a user kernel runs on a GPU, not on the HOST engine");
  }
  const double cost = n.cost().estimated_us();
  if (!std::isfinite(cost)) {
    return Invalid(field + ".cost.estimated_us",
                   absl::StrCat("cost must be finite, got ", cost));
  }
  if (cost < 0) {
    return Invalid(field + ".cost.estimated_us",
                   absl::StrCat("cost must not be negative, got ", cost));
  }
  if (cost > limits.max_node_cost_us) {
    return Invalid(field + ".cost.estimated_us",
                   absl::StrCat("cost ", cost, " us exceeds the limit of ",
                                limits.max_node_cost_us,
                                " us for one node (weftd "
                                "--max_node_cost_seconds)"));
  }
  spec.cost_us = cost;
  const double occupancy = n.cost().occupancy();
  if (!(occupancy >= 0 && occupancy <= 1)) {
    return Invalid(field + ".cost.occupancy",
                   absl::StrCat("occupancy must be in [0, 1] (0: the "
                                "default 1, a kernel that fills the "
                                "device), got ",
                                occupancy));
  }
  if (occupancy > 0 &&
      (spec.engine == Engine::kCopy || spec.engine == Engine::kHost) &&
      occupancy != 1) {
    return Invalid(field + ".cost.occupancy",
                   absl::StrCat("only COMPUTE and COLLECTIVE nodes share a "
                                "device by occupancy; this node runs on the ",
                                EngineName(spec.engine), " engine"));
  }
  spec.occupancy = occupancy > 0 ? occupancy : 1.0;
  if (n.has_device()) {
    if (n.device() < 0 || n.device() >= limits.num_devices) {
      return Invalid(field + ".device",
                     absl::StrCat("device ", n.device(), " is outside [0, ",
                                  limits.num_devices, ") (", limits.num_devices,
                                  " devices)"));
    }
    spec.device = n.device();
  }
  WEFT_RETURN_IF_ERROR(CheckOpSignature(spec, *ctx.buffers, field));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeSpec>> BuildNodeList(
    const google::protobuf::RepeatedPtrField<weft::v1::Node>& list,
    const std::string& list_field, int depth, BuildContext& ctx) {
  const GraphLimits& limits = *ctx.limits;
  ctx.total_nodes += list.size();
  if (ctx.total_nodes > limits.max_nodes) {
    return Invalid(list_field,
                   absl::StrCat(ctx.total_nodes, " nodes",
                                depth > 1 ? " (bodies included)" : "",
                                " exceed the limit of ", limits.max_nodes));
  }
  // Names first: `after` may refer to a later node of the same list.
  absl::flat_hash_map<absl::string_view, NodeId> node_ids;
  node_ids.reserve(list.size());
  for (int i = 0; i < list.size(); ++i) {
    const std::string& name = list.Get(i).name();
    std::string node_field = absl::StrCat(list_field, "[", i, "]");
    const std::string field = node_field + ".name";
    if (name.empty()) return Invalid(field, "empty node name");
    WEFT_RETURN_IF_ERROR(CheckNameLength(field, name, limits));
    auto [it, inserted] = ctx.names.emplace(name, std::move(node_field));
    if (!inserted) {
      return Invalid(field, absl::StrCat("duplicate node name '", name,
                                         "' (first used by ", it->second, ")"));
    }
    node_ids.emplace(name, i);
  }
  std::vector<NodeSpec> nodes;
  nodes.reserve(list.size());
  for (int i = 0; i < list.size(); ++i) {
    NodeSpec spec;
    WEFT_RETURN_IF_ERROR(BuildNode(list.Get(i),
                                   absl::StrCat(list_field, "[", i, "]"), i,
                                   depth, node_ids, ctx, spec));
    nodes.push_back(std::move(spec));
  }
  return nodes;
}

}  // namespace

absl::StatusOr<Graph> BuildGraph(const weft::v1::Graph& proto,
                                 const GraphLimits& limits) {
  WEFT_RETURN_IF_ERROR(CheckNameLength("graph.name", proto.name(), limits));
  if (proto.nodes_size() == 0) {
    return Invalid("graph.nodes", "empty: a graph has at least one node");
  }
  if (proto.nodes_size() > limits.max_nodes) {
    return Invalid("graph.nodes", absl::StrCat(proto.nodes_size(),
                                               " nodes exceed the limit of ",
                                               limits.max_nodes));
  }
  if (proto.buffers_size() > limits.max_buffers) {
    return Invalid(
        "graph.buffers",
        absl::StrCat(proto.buffers_size(), " buffers exceed the limit of ",
                     limits.max_buffers));
  }
  absl::flat_hash_map<absl::string_view, BufferId> buffer_ids;
  WEFT_ASSIGN_OR_RETURN(std::vector<BufferSpec> buffers,
                        BuildBuffers(proto, limits, buffer_ids));
  absl::flat_hash_map<absl::string_view, ModuleId> module_ids;
  WEFT_ASSIGN_OR_RETURN(std::vector<ModuleSpec> modules,
                        BuildModules(proto, limits, module_ids));
  BuildContext ctx;
  ctx.limits = &limits;
  ctx.buffers = &buffers;
  ctx.buffer_ids = &buffer_ids;
  ctx.modules = &modules;
  ctx.module_ids = &module_ids;
  ctx.names.reserve(proto.nodes_size());
  WEFT_ASSIGN_OR_RETURN(std::vector<NodeSpec> nodes,
                        BuildNodeList(proto.nodes(), "graph.nodes", 1, ctx));
  Graph graph(proto.name(), std::move(buffers), std::move(nodes),
              std::move(modules));
  WEFT_RETURN_IF_ERROR(CheckAcyclic(graph));
  return graph;
}

}  // namespace weft::scheduler
