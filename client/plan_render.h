// Renderings of a weft.v1.Plan for `weftctl plan`: an explained table, a
// Chrome/Perfetto trace-event timeline, a Graphviz graph and an SVG
// picture (plan_svg.h). Where the plan carries memory (Plan.memory), the
// table ends with a memory table and the trace and SVG show each device's
// live bytes over time (plan_memory.h; this needs the submitted graph).
//
// The daemon simulates every plan it returns, so the estimated start and end
// of each node are always present; the renderings only read the Plan and
// never compute a schedule of their own. A device is the stream's device
// when the node's stream is in the plan, else the node's own `device`.
//
// Pure functions of their inputs (no I/O), so that they are testable and the
// command stays thin.
#ifndef WEFT_CLIENT_PLAN_RENDER_H_
#define WEFT_CLIENT_PLAN_RENDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

enum class PlanFormat { kTable, kJson, kTrace, kDot, kSvg };

// "table", "json", "trace", "dot" or "svg" (any case). INVALID_ARGUMENT naming
// the choices otherwise.
absl::StatusOr<PlanFormat> ParsePlanFormat(absl::string_view name);

struct PlanRenderOptions {
  // Table only: add each node's estimated duration and each stream's busy
  // time and utilisation over the makespan.
  bool simulate = false;
  // The graph the plan is of, when the caller has it: trace counters and
  // SVG charts of live bytes, SVG colours by op. Not owned.
  const weft::v1::Graph* graph = nullptr;
};

// One row per node in issue order (NODE DEVICE STREAM DEPS WAITS SIGNAL
// START_US END_US [DUR_US] REASON, "-" for empty cells and the reason as
// the daemon wrote it), then one row per stream, then a line of totals. A
// copy between devices shows its stream and peer stream as "S+P", and
// counts on both. When the plan has eager copies, then one row per copy
// (CopyTable); when it has memory, one row per device (MemoryTable).
std::string PlanTable(const weft::v1::Plan& plan,
                      const PlanRenderOptions& options = {});

// COPY FROM FOR DEVICE STREAM WAITS, one row per eager copy between
// devices (Plan.copies): the buffer, the node that wrote it, the node it
// is copied for, the device and stream it is copied on and the event it
// waits on; empty when the plan has none.
std::string CopyTable(const weft::v1::Plan& plan);

// DEVICE ARENA PEAK_LIVE LOWER_BOUND BUDGET SPILLED ORDERINGS_ADDED, one row
// per Plan.memory entry, bytes as FormatBytes does and a budget of 0 as
// "none"; empty when the plan has no memory.
std::string MemoryTable(const weft::v1::Plan& plan);

// A Chrome trace-event JSON object, {"traceEvents":[...],
// "displayTimeUnit":"ms", "otherData":{...}}:
//   - a process per device: "pid" = device index, named "GPU <n>";
//   - a thread per stream: "tid" = stream id, named
//     "stream <id> [<label> ]<ENGINE>";
//   - a complete event ("ph":"X", "ts"/"dur" in microseconds) per node, with
//     args {deps, wait_events, signal_event, reason}; a copy between
//     devices has a second one ("cat":"peer", args {stream}) on its peer
//     stream's thread;
//   - a flow ("ph":"s" then "ph":"f" with "bp":"e", one id per edge) for
//     every dependency on a node of another stream, from inside the end of
//     the dependency's slice to inside the start of the node's slice.
//   - with `graph`, a counter per device in Plan.memory ("ph":"C",
//     "name":"live bytes", args {"bytes"}) with a sample at every change
//     of its live bytes (plan_memory.h).
// Timestamps that are negative or not finite are written as 0.
std::string PlanTraceJson(const weft::v1::Plan& plan,
                          const weft::v1::Graph* graph = nullptr);

// A Graphviz digraph: one cluster per device ("GPU <n>"), a box per node
// labelled with its name and stream (and "+ peer P" for a copy between
// devices), an edge per dependency. Edges between
// streams are dashed and labelled "event <id>" when the node waits on an
// event its dependency signals.
std::string PlanDot(const weft::v1::Plan& plan);

// Dispatches on `format`; kJson is proto3 JSON on one line, kSvg PlanSvg. Every
// rendering ends with a newline.
std::string RenderPlan(const weft::v1::Plan& plan, PlanFormat format,
                       const PlanRenderOptions& options = {});

}  // namespace weft::client

#endif  // WEFT_CLIENT_PLAN_RENDER_H_
