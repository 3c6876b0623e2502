// Job's host-engine nodes (job.h): the op's arguments in host memory, a
// host callback that hands it to the host pool once its inputs are there,
// and the host gate that holds its stream until it has run.
#include <algorithm>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/job.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/ops/scalars.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

absl::Status Job::EnqueueHostOp(int index, StreamHandle stream,
                                absl::Span<const BufferUse> uses) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  HostOp host_op;
  host_op.kernel = env_->host_kernels->Find(node.op);
  if (host_op.kernel == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("op '", node.op, "' has no host implementation"));
  }
  host_op.args.reserve(node.args.size());
  for (const scheduler::Arg& arg : node.args) {
    if (const auto* use = std::get_if<BufferUse>(&arg)) {
      const BufferSpec& spec = graph_->buffer(use->buffer);
      host_op.args.push_back(HostBufferArg{buffers_->HostData(use->buffer),
                                           spec.size_bytes, spec.dtype,
                                           use->access});
    } else {
      host_op.args.push_back(ConvertScalar<HostArg>(arg));
    }
  }
  // The callback fires once the inputs are in host memory; the gate holds
  // the stream (and the signal event after it) until the op has run.
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
  WEFT_RETURN_IF_ERROR(
      backend->AddHostCallback(stream, [post, id, index](absl::Status status) {
        (*post)(id, [index, status = std::move(status)](Job& job) {
          job.OnHostInputsReady(index, status);
        });
      }));
  ++in_flight_;
  absl::StatusOr<GateHandle> gate = backend->EnqueueHostGate(stream);
  if (gate.ok()) {
    host_op.gate = *gate;
  } else {
    host_op.issue_error = gate.status();
    Fail(gate.status(), pn.node);
  }
  host_ops_.emplace(index, std::move(host_op));
  buffers_->MarkWritten(uses, buffers_->host(), stream);
  return absl::OkStatus();
}

void Job::OnHostInputsReady(int index, absl::Status status) {
  auto it = host_ops_.find(index);
  if (it == host_ops_.end()) return;
  HostOp& host_op = it->second;
  if (!status.ok()) {
    FinishHostOp(index, std::move(status));
    return;
  }
  if (host_op.gate.value == 0) {
    FinishHostOp(index, host_op.issue_error);
    return;
  }
  if (!status_.ok()) {
    FinishHostOp(
        index, absl::CancelledError(absl::StrCat(
                   "not run: the job had stopped (", status_.message(), ")")));
    return;
  }
  const NodeId node = plan_->nodes[index].node;
  tracer_->NodeStarted(index);
  const uint64_t id = id_;
  auto post = env_->post_completion;
  env_->host_pool->Submit([post = std::move(post), id, index,
                           kernel = host_op.kernel, args = host_op.args,
                           op = graph_->node(node).op]() {
    absl::Status status = (*kernel)(args);
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat(op, " on the host: ", status.message()));
    }
    post(id, [index, status = std::move(status)](Job& job) {
      job.FinishHostOp(index, status);
    });
  });
}

void Job::FinishHostOp(int index, absl::Status status) {
  auto it = host_ops_.find(index);
  if (it == host_ops_.end()) return;
  const GateHandle gate = it->second.gate;
  host_ops_.erase(it);
  if (gate.value != 0) {
    const double busy_us = graph_->node(plan_->nodes[index].node).cost_us;
    absl::Status opened =
        env_->backend->OpenHostGate(gate, status, std::max(0.0, busy_us));
    if (!opened.ok()) Fail(std::move(opened), plan_->nodes[index].node);
  }
  OnNodeDone(index, std::move(status));
}

}  // namespace weft::runtime
