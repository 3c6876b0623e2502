#include "scheduler/plan_reasons.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::scheduler {

namespace {

std::string Us(double us) { return absl::StrFormat("%.4g us", us); }

}  // namespace

void AppendDeviceReason(const Graph& graph, const PlannedNode& pn,
                        const DeviceChoice& choice,
                        const PlannerOptions& options, std::string* out) {
  absl::StrAppend(out, "device ", pn.device, " (");
  switch (choice.why) {
    case DeviceChoice::Why::kPinned:
      out->append("pinned");
      break;
    case DeviceChoice::Why::kLabel:
      absl::StrAppend(out, "label '", graph.node(pn.node).stream_label,
                      "' is on the device of '",
                      graph.node(choice.related).name, "'");
      break;
    case DeviceChoice::Why::kRoundRobin:
      if (choice.fallback) {
        absl::StrAppend(out, "round robin: no device holds more than ",
                        options.data_threshold * 100, "% of its data");
      } else {
        out->append("round robin");
      }
      break;
    case DeviceChoice::Why::kFewestBusyStreams:
      absl::StrAppend(
          out, "fewest busy streams: ", static_cast<int64_t>(choice.value));
      break;
    case DeviceChoice::Why::kMostDataPresent:
      absl::StrAppend(out, "most of its data already there: ",
                      static_cast<uint64_t>(choice.value), " of ",
                      static_cast<uint64_t>(choice.total), " bytes");
      break;
    case DeviceChoice::Why::kMinTransferTime:
      absl::StrAppend(
          out, "least transfer time over the ",
          options.device_policy == DevicePolicyKind::kMinMaxTransferTime
              ? "slowest"
              : "fastest",
          " links: ",
          std::isinf(choice.value) ? std::string("unbounded")
                                   : Us(choice.value));
      break;
    case DeviceChoice::Why::kMinFinishTime:
      absl::StrAppend(out, "earliest estimated finish: ", Us(choice.value));
      break;
    case DeviceChoice::Why::kLookaheadFinishTime:
      absl::StrAppend(out, "earliest estimated finish with what follows: ",
                      Us(choice.value), " + at least ", Us(choice.total));
      break;
  }
  if (choice.parents_only) out->append(", a predecessor's device");
  out->push_back(')');
}

void AppendStreamReason(const Graph& graph, const PlannedNode& pn,
                        const LogicalStream& stream, const StreamChoice& choice,
                        const PlannerOptions& options, std::string* out) {
  const absl::string_view engine =
      stream.engine == Engine::kCompute ? "" : EngineName(stream.engine);
  const absl::string_view space = engine.empty() ? "" : " ";
  auto name = [&](NodeId v) -> absl::string_view { return graph.node(v).name; };
  switch (choice.why) {
    case StreamChoice::Why::kSingle:
      absl::StrAppend(out, "stream ", pn.stream,
                      " (single-stream mode: one stream per device)");
      break;
    case StreamChoice::Why::kLabel:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " (stream label '", stream.label, "')");
      break;
    case StreamChoice::Why::kIndependent:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " (collectives get one stream per device)");
      break;
    case StreamChoice::Why::kChain:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " continues after '", name(choice.related),
                      "' (its highest-ranked successor)");
      break;
    case StreamChoice::Why::kRecycled:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " recycled (its last node '", name(choice.related),
                      "' is an ancestor)");
      break;
    case StreamChoice::Why::kNew:
      absl::StrAppend(out, "new ", engine, space, "stream ", pn.stream,
                      " (no recyclable stream on device ", pn.device, ")");
      break;
    case StreamChoice::Why::kSoftCap:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " shared at the cap of ", options.max_streams_per_device,
                      " streams per device (");
      if (choice.related < 0) {
        out->append("idle until then)");
      } else {
        absl::StrAppend(out, "runs after '", name(choice.related),
                        "', the stream that delays it least)");
      }
      break;
    case StreamChoice::Why::kMerged:
      absl::StrAppend(out, engine, space, "stream ", pn.stream,
                      " (merged into the stream of '", name(choice.related),
                      "': the two could never run at the same time)");
      break;
  }
  if (stream.split_from >= 0) {
    absl::StrAppend(out, ", split from stream ", stream.split_from, " at ",
                    options.max_nodes_per_stream, " tasks");
  }
}

}  // namespace weft::scheduler
