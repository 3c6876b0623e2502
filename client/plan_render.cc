#include "client/plan_render.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/plan_memory.h"
#include "client/plan_svg.h"
#include "common/json_string.h"

namespace weft::client {
namespace {

// How far inside a slice a flow arrow starts or ends, so that it binds to
// that slice and not to a neighbour touching it (microseconds).
constexpr double kFlowInsetUs = 1.0;

// Where each node runs and how it relates to the others, resolved once.
struct NodePlacement {
  int device = 0;  // trace pid, dot cluster
  int stream = 0;  // trace tid
  double start_us = 0;
  double end_us = 0;
};

double Finite(double us) { return std::isfinite(us) && us > 0 ? us : 0; }

class PlanIndex {
 public:
  explicit PlanIndex(const weft::v1::Plan& plan) : plan_(plan) {
    placements_.reserve(plan.nodes_size());
    for (int i = 0; i < plan.nodes_size(); ++i) {
      const weft::v1::PlannedNode& node = plan.nodes(i);
      NodePlacement p;
      p.device = node.device();
      p.stream = node.stream();
      if (node.stream() >= 0 && node.stream() < plan.streams_size()) {
        p.device = plan.streams(node.stream()).device();
        p.stream = plan.streams(node.stream()).id();
      }
      p.start_us = Finite(node.estimated_start_us());
      p.end_us = std::max(p.start_us, Finite(node.estimated_end_us()));
      placements_.push_back(p);
      by_name_[node.name()] = i;
    }
  }

  const NodePlacement& placement(int node) const { return placements_[node]; }

  // The index of the node called `name`, or -1.
  int Find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? -1 : it->second;
  }

  bool CrossStream(int from, int to) const {
    return placements_[from].device != placements_[to].device ||
           placements_[from].stream != placements_[to].stream;
  }

  // The event through which `to` waits for `from`, or -1 when it has none
  // (the order is then implied by stream order or by another wait).
  int EventBetween(int from, int to) const {
    const int event = plan_.nodes(from).signal_event();
    if (event < 0) return -1;
    const auto& waits = plan_.nodes(to).wait_events();
    return std::find(waits.begin(), waits.end(), event) != waits.end() ? event
                                                                       : -1;
  }

  // Every device a node or stream is on, and those the plan counts.
  std::set<int> Devices() const {
    std::set<int> devices;
    for (int d = 0; d < plan_.num_devices(); ++d) devices.insert(d);
    for (const weft::v1::PlannedStream& s : plan_.streams()) {
      devices.insert(s.device());
    }
    for (const NodePlacement& p : placements_) devices.insert(p.device);
    return devices;
  }

 private:
  const weft::v1::Plan& plan_;
  std::vector<NodePlacement> placements_;
  absl::flat_hash_map<std::string, int> by_name_;
};

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string IntList(const google::protobuf::RepeatedField<int32_t>& values) {
  if (values.empty()) return "-";
  return absl::StrJoin(values, ",");
}

std::string Us(double us) { return absl::StrFormat("%.1f", us); }

// A JSON number with microsecond precision to the nanosecond.
std::string JsonUs(double us) { return absl::StrFormat("%.3f", Finite(us)); }

std::string StreamName(const weft::v1::PlannedStream& s) {
  std::string name = absl::StrCat("stream ", s.id());
  if (!s.label().empty()) absl::StrAppend(&name, " ", s.label());
  absl::StrAppend(&name, " ", weft::v1::Engine_Name(s.engine()));
  return name;
}

// A metadata event naming or ordering a process or thread.
std::string Metadata(absl::string_view name, int pid, int tid,
                     absl::string_view args) {
  return absl::StrCat("{\"ph\":\"M\",\"name\":\"", name, "\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":", args, "}");
}

// `s` inside a double-quoted Graphviz string: quotes and backslashes
// escaped, newlines as Graphviz's centred line break.
std::string DotString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        break;
      default:
        out.push_back(c);
    }
  }
  out += "\"";
  return out;
}

}  // namespace

absl::StatusOr<PlanFormat> ParsePlanFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "table") return PlanFormat::kTable;
  if (lower == "json") return PlanFormat::kJson;
  if (lower == "trace") return PlanFormat::kTrace;
  if (lower == "dot") return PlanFormat::kDot;
  if (lower == "svg") return PlanFormat::kSvg;
  return absl::InvalidArgumentError(absl::StrCat(
      "--format: '", name, "' is not table, json, trace, dot or svg"));
}

std::string PlanTable(const weft::v1::Plan& plan,
                      const PlanRenderOptions& options) {
  std::vector<std::vector<std::string>> nodes;
  std::vector<std::string> header = {"NODE",  "DEVICE", "STREAM",   "DEPS",
                                     "WAITS", "SIGNAL", "START_US", "END_US"};
  if (options.simulate) header.push_back("DUR_US");
  header.push_back("REASON");
  nodes.push_back(std::move(header));
  std::vector<double> busy_us(plan.streams_size(), 0);
  std::vector<int> count(plan.streams_size(), 0);
  for (const weft::v1::PlannedNode& n : plan.nodes()) {
    const double start = Finite(n.estimated_start_us());
    const double end = std::max(start, Finite(n.estimated_end_us()));
    for (int s : {n.stream(), n.has_peer_stream() ? n.peer_stream() : -1}) {
      if (s >= 0 && s < plan.streams_size()) {
        busy_us[s] += end - start;
        ++count[s];
      }
    }
    std::vector<std::string> row = {
        n.name(),
        absl::StrCat(n.device()),
        n.has_peer_stream() ? absl::StrCat(n.stream(), "+", n.peer_stream())
                            : absl::StrCat(n.stream()),
        n.deps().empty() ? "-" : absl::StrJoin(n.deps(), ","),
        IntList(n.wait_events()),
        n.signal_event() < 0 ? "-" : absl::StrCat(n.signal_event()),
        Us(n.estimated_start_us()),
        Us(n.estimated_end_us())};
    if (options.simulate) row.push_back(Us(end - start));
    row.push_back(Dash(n.reason()));
    nodes.push_back(std::move(row));
  }

  std::vector<std::vector<std::string>> streams;
  std::vector<std::string> stream_header = {"STREAM", "DEVICE", "ENGINE",
                                            "LABEL", "NODES"};
  if (options.simulate) {
    stream_header.push_back("BUSY_US");
    stream_header.push_back("UTIL");
  }
  streams.push_back(std::move(stream_header));
  const double makespan = Finite(plan.estimated_makespan_us());
  for (int i = 0; i < plan.streams_size(); ++i) {
    const weft::v1::PlannedStream& s = plan.streams(i);
    std::vector<std::string> row = {absl::StrCat(s.id()),
                                    absl::StrCat(s.device()),
                                    weft::v1::Engine_Name(s.engine()),
                                    Dash(s.label()), absl::StrCat(count[i])};
    if (options.simulate) {
      row.push_back(Us(busy_us[i]));
      row.push_back(makespan > 0
                        ? absl::StrFormat("%.0f%%", 100 * busy_us[i] / makespan)
                        : "-");
    }
    streams.push_back(std::move(row));
  }
  const std::string totals = absl::StrFormat(
      "devices %d  streams %d  events %d  makespan %.1f us  critical path "
      "%.1f us  lower bound %.1f us\n",
      plan.num_devices(), plan.streams_size(), plan.num_events(),
      plan.estimated_makespan_us(), plan.critical_path_us(),
      plan.lower_bound_us());
  std::string out =
      absl::StrCat(Table(nodes), "\n", Table(streams), "\n", totals);
  const std::string copies = CopyTable(plan);
  if (!copies.empty()) absl::StrAppend(&out, "\n", copies);
  const std::string memory = MemoryTable(plan);
  if (!memory.empty()) absl::StrAppend(&out, "\n", memory);
  return out;
}

std::string CopyTable(const weft::v1::Plan& plan) {
  if (plan.copies().empty()) return "";
  std::vector<std::vector<std::string>> rows = {
      {"COPY", "FROM", "FOR", "DEVICE", "STREAM", "WAITS"}};
  for (const weft::v1::PlannedCopy& c : plan.copies()) {
    rows.push_back({c.buffer(), c.writer(), c.reader(),
                    absl::StrCat(c.device()), absl::StrCat(c.stream()),
                    absl::StrCat(c.event())});
  }
  return Table(rows);
}

std::string MemoryTable(const weft::v1::Plan& plan) {
  if (plan.memory().empty()) return "";
  auto bytes = [](int64_t b) { return FormatBytes(b > 0 ? b : 0); };
  std::vector<std::vector<std::string>> rows = {{"DEVICE", "ARENA", "PEAK_LIVE",
                                                 "LOWER_BOUND", "BUDGET",
                                                 "SPILLED", "ORDERINGS_ADDED"}};
  for (const weft::v1::DeviceMemory& m : plan.memory()) {
    rows.push_back({absl::StrCat(m.device()), bytes(m.arena_bytes()),
                    bytes(m.peak_live_bytes()), bytes(m.lower_bound_bytes()),
                    m.budget_bytes() > 0 ? bytes(m.budget_bytes()) : "none",
                    bytes(m.spilled_bytes()),
                    absl::StrCat(m.orderings_added())});
  }
  return Table(rows);
}

std::string PlanTraceJson(const weft::v1::Plan& plan,
                          const weft::v1::Graph* graph) {
  const PlanIndex index(plan);
  std::vector<std::string> events;
  for (int device : index.Devices()) {
    events.push_back(Metadata("process_name", device, 0,
                              absl::StrCat("{\"name\":\"GPU ", device, "\"}")));
    events.push_back(Metadata("process_sort_index", device, 0,
                              absl::StrCat("{\"sort_index\":", device, "}")));
  }
  for (const weft::v1::PlannedStream& s : plan.streams()) {
    events.push_back(
        Metadata("thread_name", s.device(), s.id(),
                 absl::StrCat("{\"name\":", JsonString(StreamName(s)), "}")));
    events.push_back(Metadata("thread_sort_index", s.device(), s.id(),
                              absl::StrCat("{\"sort_index\":", s.id(), "}")));
  }

  std::vector<std::string> flows;
  int next_flow = 1;
  for (int i = 0; i < plan.nodes_size(); ++i) {
    const weft::v1::PlannedNode& n = plan.nodes(i);
    const NodePlacement& at = index.placement(i);
    std::vector<std::string> deps;
    deps.reserve(n.deps_size());
    for (const std::string& dep : n.deps()) deps.push_back(JsonString(dep));
    events.push_back(absl::StrCat(
        "{\"name\":", JsonString(n.name()),
        ",\"cat\":\"node\",\"ph\":\"X\",\"pid\":", at.device,
        ",\"tid\":", at.stream, ",\"ts\":", JsonUs(at.start_us),
        ",\"dur\":", JsonUs(at.end_us - at.start_us), ",\"args\":{\"deps\":[",
        absl::StrJoin(deps, ","), "],\"wait_events\":[",
        absl::StrJoin(n.wait_events(), ","), "],\"signal_event\":",
        n.signal_event(), ",\"reason\":", JsonString(n.reason()), "}}"));
    // A copy between devices also occupies its peer stream.
    if (n.has_peer_stream() && n.peer_stream() >= 0 &&
        n.peer_stream() < plan.streams_size()) {
      const weft::v1::PlannedStream& peer = plan.streams(n.peer_stream());
      events.push_back(
          absl::StrCat("{\"name\":", JsonString(n.name()),
                       ",\"cat\":\"peer\",\"ph\":\"X\",\"pid\":", peer.device(),
                       ",\"tid\":", peer.id(), ",\"ts\":", JsonUs(at.start_us),
                       ",\"dur\":", JsonUs(at.end_us - at.start_us),
                       ",\"args\":{\"stream\":", at.stream, "}}"));
    }

    for (const std::string& dep : n.deps()) {
      const int from = index.Find(dep);
      if (from < 0 || !index.CrossStream(from, i)) continue;
      const NodePlacement& src = index.placement(from);
      const double out_ts =
          src.end_us - std::min(kFlowInsetUs, (src.end_us - src.start_us) / 2);
      const double in_ts =
          at.start_us + std::min(kFlowInsetUs, (at.end_us - at.start_us) / 2);
      const std::string name = JsonString(absl::StrCat(dep, " -> ", n.name()));
      const int event = index.EventBetween(from, i);
      const std::string args =
          event >= 0 ? absl::StrCat(",\"args\":{\"event\":", event, "}") : "";
      flows.push_back(absl::StrCat(
          "{\"name\":", name, ",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":",
          next_flow, ",\"pid\":", src.device, ",\"tid\":", src.stream,
          ",\"ts\":", JsonUs(out_ts), args, "}"));
      flows.push_back(absl::StrCat(
          "{\"name\":", name,
          ",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":",
          next_flow, ",\"pid\":", at.device, ",\"tid\":", at.stream,
          ",\"ts\":", JsonUs(in_ts), args, "}"));
      ++next_flow;
    }
  }
  events.insert(events.end(), flows.begin(), flows.end());

  if (graph != nullptr && !plan.memory().empty()) {
    for (const DeviceLiveBytes& live : LiveBytesByDevice(plan, *graph)) {
      for (const LiveSample& s : live.samples) {
        events.push_back(absl::StrCat(
            "{\"name\":\"live bytes\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":",
            live.device, ",\"tid\":0,\"ts\":", JsonUs(s.time_us),
            ",\"args\":{\"bytes\":", s.bytes, "}}"));
      }
    }
  }

  return absl::StrCat(
      "{\"traceEvents\":[\n", absl::StrJoin(events, ",\n"),
      "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"num_devices\":",
      plan.num_devices(), ",\"num_streams\":", plan.streams_size(),
      ",\"num_events\":", plan.num_events(),
      ",\"estimated_makespan_us\":", JsonUs(plan.estimated_makespan_us()),
      ",\"critical_path_us\":", JsonUs(plan.critical_path_us()),
      ",\"lower_bound_us\":", JsonUs(plan.lower_bound_us()), "}}\n");
}

std::string PlanDot(const weft::v1::Plan& plan) {
  const PlanIndex index(plan);
  std::string out = "digraph plan {\n";
  absl::StrAppend(
      &out, "  graph [fontname=\"Helvetica\", labelloc=b, label=",
      DotString(absl::StrFormat(
          "makespan %.1f us, critical path %.1f us, lower bound %.1f us, "
          "%d streams, %d events",
          plan.estimated_makespan_us(), plan.critical_path_us(),
          plan.lower_bound_us(), plan.streams_size(), plan.num_events())),
      "];\n  node [shape=box, fontname=\"Helvetica\"];\n"
      "  edge [fontname=\"Helvetica\", fontsize=10];\n");
  for (int device : index.Devices()) {
    absl::StrAppend(&out, "  subgraph cluster_gpu", device,
                    " {\n    label=", DotString(absl::StrCat("GPU ", device)),
                    ";\n");
    for (int i = 0; i < plan.nodes_size(); ++i) {
      const NodePlacement& at = index.placement(i);
      if (at.device != device) continue;
      const weft::v1::PlannedNode& n = plan.nodes(i);
      absl::StrAppend(
          &out, "    n", i, " [label=",
          DotString(absl::StrCat(n.name(), "\nstream ", at.stream,
                                 n.has_peer_stream()
                                     ? absl::StrCat(" + peer ", n.peer_stream())
                                     : "")));
      if (!n.reason().empty()) {
        absl::StrAppend(&out, ", tooltip=", DotString(n.reason()));
      }
      absl::StrAppend(&out, "];\n");
    }
    absl::StrAppend(&out, "  }\n");
  }
  for (int i = 0; i < plan.nodes_size(); ++i) {
    for (const std::string& dep : plan.nodes(i).deps()) {
      const int from = index.Find(dep);
      if (from < 0) continue;
      absl::StrAppend(&out, "  n", from, " -> n", i);
      if (index.CrossStream(from, i)) {
        const int event = index.EventBetween(from, i);
        absl::StrAppend(&out, " [style=dashed");
        if (event >= 0) {
          absl::StrAppend(&out,
                          ", label=", DotString(absl::StrCat("event ", event)));
        }
        absl::StrAppend(&out, "]");
      }
      absl::StrAppend(&out, ";\n");
    }
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

std::string RenderPlan(const weft::v1::Plan& plan, PlanFormat format,
                       const PlanRenderOptions& options) {
  switch (format) {
    case PlanFormat::kJson:
      return absl::StrCat(ToJson(plan), "\n");
    case PlanFormat::kTrace:
      return PlanTraceJson(plan, options.graph);
    case PlanFormat::kSvg: {
      PlanSvgOptions svg;
      svg.graph = options.graph;
      return PlanSvg(plan, svg);
    }
    case PlanFormat::kDot:
      return PlanDot(plan);
    case PlanFormat::kTable:
      break;
  }
  return PlanTable(plan, options);
}

}  // namespace weft::client
