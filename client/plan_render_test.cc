#include "client/plan_render.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::client {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::weft::testing::StatusIs;

// Two devices, three streams. a fans out to b (same stream), c (another
// stream of device 0, through event 0) and d (device 1, event 0); e joins
// them; f follows e on device 1 with no event of its own. f's name and
// reason need escaping.
weft::v1::Plan SamplePlan() {
  weft::v1::Plan plan;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        nodes {
          name: "a"
          device: 0
          stream: 0
          signal_event: 0
          estimated_start_us: 0
          estimated_end_us: 10
          reason: "round robin; stream 0 new"
        }
        nodes {
          name: "b"
          device: 0
          stream: 0
          deps: "a"
          signal_event: -1
          estimated_start_us: 10
          estimated_end_us: 21
          reason: "round robin; stream 0 continues after 'a'"
        }
        nodes {
          name: "c"
          device: 0
          stream: 1
          deps: "a"
          wait_events: 0
          signal_event: 1
          estimated_start_us: 10
          estimated_end_us: 15
          reason: "label 'side'; COPY stream 1"
        }
        nodes {
          name: "d"
          device: 1
          stream: 2
          deps: "a"
          wait_events: 0
          signal_event: 2
          estimated_start_us: 12
          estimated_end_us: 29
          reason: "round robin; stream 2 new"
        }
        nodes {
          name: "e"
          device: 0
          stream: 0
          deps: "b"
          deps: "c"
          deps: "d"
          wait_events: 1
          wait_events: 2
          signal_event: -1
          estimated_start_us: 30
          estimated_end_us: 35
          reason: "round robin; stream 0 continues after 'b'"
        }
        nodes {
          name: "f \"quoted\" \\ back"
          device: 1
          stream: 2
          deps: "e"
          signal_event: -1
          estimated_start_us: 35
          estimated_end_us: 40
          reason: "says \"why\"\nin two lines"
        }
        streams { id: 0 device: 0 }
        streams { id: 1 device: 0 label: "side" engine: COPY }
        streams { id: 2 device: 1 }
        num_events: 3
        num_devices: 2
        estimated_makespan_us: 40
        critical_path_us: 35
        lower_bound_us: 35
      )pb",
      &plan));
  return plan;
}

Struct ParseJson(const std::string& text) {
  Struct value;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &value);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return value;
}

const Value& Field(const Struct& s, const std::string& name) {
  static const Value* const kNull = new Value();
  auto it = s.fields().find(name);
  return it == s.fields().end() ? *kNull : it->second;
}

std::string Str(const Struct& s, const std::string& name) {
  return Field(s, name).string_value();
}

double Num(const Struct& s, const std::string& name) {
  return Field(s, name).number_value();
}

std::vector<Struct> EventsWithPhase(const Struct& trace,
                                    const std::string& phase) {
  std::vector<Struct> out;
  for (const Value& v : Field(trace, "traceEvents").list_value().values()) {
    if (Str(v.struct_value(), "ph") == phase) out.push_back(v.struct_value());
  }
  return out;
}

TEST(ParsePlanFormatTest, AcceptsTheFiveFormats) {
  EXPECT_EQ(*ParsePlanFormat("table"), PlanFormat::kTable);
  EXPECT_EQ(*ParsePlanFormat("json"), PlanFormat::kJson);
  EXPECT_EQ(*ParsePlanFormat("Trace"), PlanFormat::kTrace);
  EXPECT_EQ(*ParsePlanFormat("DOT"), PlanFormat::kDot);
  EXPECT_EQ(*ParsePlanFormat("svg"), PlanFormat::kSvg);
}

TEST(ParsePlanFormatTest, RejectsOthersNamingTheChoices) {
  absl::StatusOr<PlanFormat> format = ParsePlanFormat("png");
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(
      format.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("--format: 'png' is not table, json, trace, dot or svg")));
}

TEST(PlanTableTest, OneExplainedLinePerNodeThenStreamsAndTotals) {
  const std::string text = PlanTable(SamplePlan());
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ASSERT_GE(lines.size(), 8u);
  EXPECT_THAT(lines[0], StartsWith("NODE"));
  EXPECT_THAT(absl::StrSplit(lines[0], ' ', absl::SkipEmpty()),
              ElementsAre("NODE", "DEVICE", "STREAM", "DEPS", "WAITS", "SIGNAL",
                          "START_US", "END_US", "REASON"));
  EXPECT_THAT(absl::StrSplit(lines[1], ' ', absl::SkipEmpty()),
              ElementsAre("a", "0", "0", "-", "-", "0", "0.0", "10.0", "round",
                          "robin;", "stream", "0", "new"));
  EXPECT_THAT(lines[5], StartsWith("e "));
  EXPECT_THAT(lines[5], HasSubstr(" b,c,d "));
  EXPECT_THAT(lines[5], HasSubstr(" 1,2 "));
  EXPECT_THAT(lines[5],
              HasSubstr("30.0      35.0    round robin; stream 0 continues "
                        "after 'b'"));
  EXPECT_THAT(lines[3], HasSubstr("label 'side'; COPY stream 1"));
  EXPECT_THAT(text, HasSubstr("STREAM  DEVICE  ENGINE   LABEL  NODES\n"));
  EXPECT_THAT(text, HasSubstr("\n1       0       COPY     side   1\n"));
  EXPECT_THAT(text, HasSubstr("devices 2  streams 3  events 3  makespan "
                              "40.0 us  critical path 35.0 us  lower bound "
                              "35.0 us\n"));
  EXPECT_THAT(text, Not(HasSubstr("DUR_US")));
  EXPECT_THAT(text, Not(HasSubstr("UTIL")));
  // No memory in the plan: nothing about it.
  EXPECT_THAT(text, Not(HasSubstr("ARENA")));
  EXPECT_EQ(MemoryTable(SamplePlan()), "");
}

// SamplePlan with memory on both devices and the graph it is of: a writes
// buffer x (4 KiB) on device 0, which b, c and e read there; d reads it on
// device 1 (a transfer) and writes y (1 KiB), which f reads.
weft::v1::Plan SamplePlanWithMemory() {
  weft::v1::Plan plan = SamplePlan();
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(
      R"pb(
        memory {
          device: 0
          arena_bytes: 4096
          peak_live_bytes: 4096
          lower_bound_bytes: 4096
        }
        memory {
          device: 1
          arena_bytes: 5120
          peak_live_bytes: 5120
          lower_bound_bytes: 5120
          budget_bytes: 1073741824
          spilled_bytes: 512
          orderings_added: 2
        }
        buffers { name: "x" device: 0 offset: 0 size_bytes: 4096 }
        buffers { name: "x" device: 1 offset: 0 size_bytes: 4096 }
        buffers { name: "y" device: 1 offset: 4096 size_bytes: 1024 }
      )pb",
      &plan));
  return plan;
}

weft::v1::Graph SampleGraph() {
  weft::v1::Graph graph;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 4096 fill: 1 }
        buffers { name: "y" size_bytes: 1000 }
        nodes {
          name: "a"
          op: "fill"
          args { buffer { name: "x" access: WRITE } }
        }
        nodes {
          name: "b"
          op: "spin"
          args { buffer { name: "x" access: READ } }
        }
        nodes {
          name: "c"
          op: "spin"
          args { buffer { name: "x" access: READ } }
        }
        nodes {
          name: "d"
          op: "copy"
          args { buffer { name: "x" access: READ } }
          args { buffer { name: "y" access: WRITE } }
        }
        nodes {
          name: "e"
          op: "spin"
          args { buffer { name: "x" access: READ } }
        }
        nodes {
          name: "f \"quoted\" \\ back"
          op: "spin"
          args { buffer { name: "y" access: READ } }
        }
      )pb",
      &graph));
  return graph;
}

TEST(PlanTableTest, MemoryTableAfterTheTotals) {
  const std::string text = PlanTable(SamplePlanWithMemory());
  EXPECT_THAT(text, HasSubstr("lower bound 35.0 us\n\n"
                              "DEVICE  ARENA    PEAK_LIVE  LOWER_BOUND  "
                              "BUDGET   SPILLED  ORDERINGS_ADDED\n"
                              "0       4.0 KiB  4.0 KiB    4.0 KiB      "
                              "none     0 B      0\n"
                              "1       5.0 KiB  5.0 KiB    5.0 KiB      "
                              "1.0 GiB  512 B    2\n"));
  EXPECT_EQ(text.back(), '\n');
}

TEST(PlanTableTest, CopyTableListsEagerCopies) {
  EXPECT_EQ(CopyTable(SamplePlan()), "");
  weft::v1::Plan plan = SamplePlan();
  weft::v1::PlannedCopy* copy = plan.add_copies();
  copy->set_buffer("x");
  copy->set_writer("a");
  copy->set_reader("d");
  copy->set_device(1);
  copy->set_stream(3);
  copy->set_event(0);
  EXPECT_EQ(CopyTable(plan),
            "COPY  FROM  FOR  DEVICE  STREAM  WAITS\n"
            "x     a     d    1       3       0\n");
  EXPECT_THAT(PlanTable(plan), HasSubstr("\n\nCOPY  FROM  FOR"));
}

TEST(PlanTableTest, SimulateAddsDurationsAndStreamUtilisation) {
  PlanRenderOptions options;
  options.simulate = true;
  const std::string text = PlanTable(SamplePlan(), options);
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  EXPECT_THAT(absl::StrSplit(lines[0], ' ', absl::SkipEmpty()),
              ElementsAre("NODE", "DEVICE", "STREAM", "DEPS", "WAITS", "SIGNAL",
                          "START_US", "END_US", "DUR_US", "REASON"));
  EXPECT_THAT(absl::StrSplit(lines[4], ' ', absl::SkipEmpty()),
              ElementsAre("d", "1", "2", "a", "0", "2", "12.0", "29.0", "17.0",
                          "round", "robin;", "stream", "2", "new"));
  // Stream 0 runs a, b and e: 10 + 11 + 5 us of 40; stream 2 d and f.
  EXPECT_THAT(text, HasSubstr("STREAM  DEVICE  ENGINE   LABEL  NODES  "
                              "BUSY_US  UTIL\n"));
  EXPECT_THAT(text, HasSubstr("\n0       0       COMPUTE  -      3      26.0"
                              "     65%\n"));
  EXPECT_THAT(text, HasSubstr("\n2       1       COMPUTE  -      2      22.0"
                              "     55%\n"));
}

TEST(PlanTraceJsonTest, IsValidJsonWithProcessesThreadsAndSlices) {
  const weft::v1::Plan plan = SamplePlan();
  const Struct trace = ParseJson(PlanTraceJson(plan));
  EXPECT_EQ(Str(trace, "displayTimeUnit"), "ms");
  EXPECT_EQ(
      Num(Field(trace, "otherData").struct_value(), "estimated_makespan_us"),
      40);

  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const Struct& m : EventsWithPhase(trace, "M")) {
    const std::string name = Str(Field(m, "args").struct_value(), "name");
    if (Str(m, "name") == "process_name") {
      processes[static_cast<int>(Num(m, "pid"))] = name;
    } else if (Str(m, "name") == "thread_name") {
      threads[{static_cast<int>(Num(m, "pid")),
               static_cast<int>(Num(m, "tid"))}] = name;
    }
  }
  EXPECT_EQ(processes,
            (std::map<int, std::string>{{0, "GPU 0"}, {1, "GPU 1"}}));
  EXPECT_EQ(threads, (std::map<std::pair<int, int>, std::string>{
                         {{0, 0}, "stream 0 COMPUTE"},
                         {{0, 1}, "stream 1 side COPY"},
                         {{1, 2}, "stream 2 COMPUTE"}}));

  const std::vector<Struct> slices = EventsWithPhase(trace, "X");
  ASSERT_EQ(slices.size(), static_cast<size_t>(plan.nodes_size()));
  for (int i = 0; i < plan.nodes_size(); ++i) {
    const weft::v1::PlannedNode& n = plan.nodes(i);
    const Struct& x = slices[i];
    SCOPED_TRACE(n.name());
    EXPECT_EQ(Str(x, "name"), n.name());
    EXPECT_EQ(Num(x, "pid"), n.device());
    EXPECT_EQ(Num(x, "tid"), n.stream());
    EXPECT_EQ(Num(x, "ts"), n.estimated_start_us());
    EXPECT_EQ(Num(x, "dur"), n.estimated_end_us() - n.estimated_start_us());
    const Struct& args = Field(x, "args").struct_value();
    EXPECT_EQ(Str(args, "reason"), n.reason());
    EXPECT_EQ(Num(args, "signal_event"), n.signal_event());
    std::vector<std::string> deps;
    for (const Value& v : Field(args, "deps").list_value().values()) {
      deps.push_back(v.string_value());
    }
    EXPECT_EQ(deps, std::vector<std::string>(n.deps().begin(), n.deps().end()));
    std::vector<int> waits;
    for (const Value& v : Field(args, "wait_events").list_value().values()) {
      waits.push_back(static_cast<int>(v.number_value()));
    }
    EXPECT_EQ(waits,
              std::vector<int>(n.wait_events().begin(), n.wait_events().end()));
  }
}

TEST(PlanTraceJsonTest, FlowsForEveryCrossStreamDependencyOnly) {
  const Struct trace = ParseJson(PlanTraceJson(SamplePlan()));
  std::map<std::string, Struct> slices;
  for (const Struct& x : EventsWithPhase(trace, "X")) {
    slices[Str(x, "name")] = x;
  }
  std::map<int, Struct> starts;
  std::map<int, Struct> finishes;
  for (const Struct& s : EventsWithPhase(trace, "s")) {
    EXPECT_TRUE(starts.emplace(static_cast<int>(Num(s, "id")), s).second);
  }
  for (const Struct& f : EventsWithPhase(trace, "f")) {
    EXPECT_EQ(Str(f, "bp"), "e");
    EXPECT_TRUE(finishes.emplace(static_cast<int>(Num(f, "id")), f).second);
  }
  // a->c, a->d, c->e, d->e, e->f; not a->b nor b->e (same stream).
  std::vector<std::string> names;
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << id;
    const Struct& f = finishes[id];
    EXPECT_EQ(Str(s, "name"), Str(f, "name"));
    EXPECT_EQ(Str(s, "cat"), Str(f, "cat"));
    names.push_back(Str(s, "name"));
    std::vector<std::string> ends = absl::StrSplit(Str(s, "name"), " -> ");
    ASSERT_EQ(ends.size(), 2u);
    // Each end lies inside its slice, on its slice's track.
    for (const auto& [end, node] :
         {std::pair<const Struct*, std::string>{&s, ends[0]},
          std::pair<const Struct*, std::string>{&f, ends[1]}}) {
      ASSERT_TRUE(slices.count(node)) << node;
      const Struct& x = slices[node];
      EXPECT_EQ(Num(*end, "pid"), Num(x, "pid"));
      EXPECT_EQ(Num(*end, "tid"), Num(x, "tid"));
      EXPECT_GT(Num(*end, "ts"), Num(x, "ts"));
      EXPECT_LT(Num(*end, "ts"), Num(x, "ts") + Num(x, "dur"));
    }
  }
  EXPECT_THAT(names, ElementsAre("a -> c", "a -> d", "c -> e", "d -> e",
                                 "e -> f \"quoted\" \\ back"));
  EXPECT_EQ(finishes.size(), starts.size());
  // The event through which the wait happens rides along.
  EXPECT_EQ(Num(Field(starts[1], "args").struct_value(), "event"), 0);
  EXPECT_EQ(Num(Field(finishes[4], "args").struct_value(), "event"), 2);
  EXPECT_FALSE(starts[5].fields().contains("args"));
}

TEST(PlanTraceJsonTest, LiveBytesCounterPerDeviceWithTheGraph) {
  const weft::v1::Plan plan = SamplePlanWithMemory();
  EXPECT_TRUE(EventsWithPhase(ParseJson(PlanTraceJson(plan)), "C").empty());

  const weft::v1::Graph graph = SampleGraph();
  const Struct trace = ParseJson(PlanTraceJson(plan, &graph));
  std::map<int, std::vector<std::pair<double, double>>> counters;
  for (const Struct& c : EventsWithPhase(trace, "C")) {
    EXPECT_EQ(Str(c, "name"), "live bytes");
    counters[static_cast<int>(Num(c, "pid"))].push_back(
        {Num(c, "ts"), Num(Field(c, "args").struct_value(), "bytes")});
  }
  // x on device 0: from a's start to e's end (d's transfer reads it there
  // over [12, 29)). Device 1: x and y from d's start; x dies at d's end, y
  // at f's.
  using Samples = std::vector<std::pair<double, double>>;
  EXPECT_EQ(counters[0], (Samples{{0, 4096}, {35, 0}}));
  EXPECT_EQ(counters[1], (Samples{{0, 0}, {12, 5120}, {29, 1024}, {40, 0}}));
  EXPECT_EQ(RenderPlan(plan, PlanFormat::kTrace, {false, &graph}),
            PlanTraceJson(plan, &graph));
}

TEST(PlanTraceJsonTest, EmptyPlanIsStillValid) {
  const Struct trace = ParseJson(PlanTraceJson(weft::v1::Plan()));
  EXPECT_EQ(Field(trace, "traceEvents").list_value().values_size(), 0);
}

TEST(PlanTraceJsonTest, ClampsTimesThatAreNotUsable) {
  weft::v1::Plan plan;
  weft::v1::PlannedNode* n = plan.add_nodes();
  n->set_name("odd");
  n->set_estimated_start_us(-5);
  n->set_estimated_end_us(std::numeric_limits<double>::quiet_NaN());
  const std::vector<Struct> slices =
      EventsWithPhase(ParseJson(PlanTraceJson(plan)), "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(Num(slices[0], "ts"), 0);
  EXPECT_EQ(Num(slices[0], "dur"), 0);
}

TEST(PlanDotTest, ClustersPerDeviceAndDashedCrossStreamEdges) {
  const std::string dot = PlanDot(SamplePlan());
  EXPECT_THAT(dot, StartsWith("digraph plan {\n"));
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_gpu0 {\n    label=\"GPU 0\";"));
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_gpu1 {\n    label=\"GPU 1\";"));
  EXPECT_THAT(dot, HasSubstr("n0 [label=\"a\\nstream 0\", tooltip=\"round "
                             "robin; stream 0 new\"];"));
  EXPECT_THAT(dot, HasSubstr("n5 [label=\"f \\\"quoted\\\" \\\\ back\\n"
                             "stream 2\", tooltip=\"says \\\"why\\\"\\nin two "
                             "lines\"];"));
  // Device 1's cluster holds d and f only.
  const size_t gpu1 = dot.find("cluster_gpu1");
  const size_t close = dot.find("  }\n", gpu1);
  const std::string cluster = dot.substr(gpu1, close - gpu1);
  EXPECT_THAT(cluster, HasSubstr("n3 [label=\"d"));
  EXPECT_THAT(cluster, HasSubstr("n5 [label=\"f"));
  EXPECT_THAT(cluster, Not(HasSubstr("n0 [")));
  EXPECT_THAT(dot, HasSubstr("  n0 -> n1;\n"));
  EXPECT_THAT(dot,
              HasSubstr("  n0 -> n2 [style=dashed, label=\"event 0\"];\n"));
  EXPECT_THAT(dot,
              HasSubstr("  n0 -> n3 [style=dashed, label=\"event 0\"];\n"));
  EXPECT_THAT(dot, HasSubstr("  n1 -> n4;\n"));
  EXPECT_THAT(dot,
              HasSubstr("  n2 -> n4 [style=dashed, label=\"event 1\"];\n"));
  EXPECT_THAT(dot,
              HasSubstr("  n3 -> n4 [style=dashed, label=\"event 2\"];\n"));
  EXPECT_THAT(dot, HasSubstr("  n4 -> n5 [style=dashed];\n"));
  EXPECT_THAT(dot, HasSubstr("makespan 40.0 us"));
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(RenderPlanTest, DispatchesOnFormat) {
  const weft::v1::Plan plan = SamplePlan();
  weft::v1::Plan round_trip;
  const std::string json = RenderPlan(plan, PlanFormat::kJson);
  EXPECT_EQ(json.find('\n'), json.size() - 1);
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json, &round_trip).ok());
  EXPECT_EQ(round_trip.SerializeAsString(), plan.SerializeAsString());
  EXPECT_EQ(RenderPlan(plan, PlanFormat::kTrace), PlanTraceJson(plan));
  EXPECT_EQ(RenderPlan(plan, PlanFormat::kDot), PlanDot(plan));
  const std::string svg = RenderPlan(plan, PlanFormat::kSvg);
  EXPECT_THAT(svg, StartsWith("<?xml"));
  EXPECT_THAT(svg, HasSubstr("<svg "));
  EXPECT_EQ(svg.back(), '\n');
  PlanRenderOptions simulate;
  simulate.simulate = true;
  EXPECT_EQ(RenderPlan(plan, PlanFormat::kTable, simulate),
            PlanTable(plan, simulate));
}

TEST(PlanRenderTest, CopyBetweenDevicesShowsItsPeerStream) {
  weft::v1::Plan plan;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        nodes {
          name: "init"
          device: 0
          stream: 0
          signal_event: -1
          estimated_start_us: 0
          estimated_end_us: 1
        }
        nodes {
          name: "move"
          device: 1
          stream: 1
          peer_stream: 0
          deps: "init"
          signal_event: -1
          estimated_start_us: 1
          estimated_end_us: 5
        }
        streams { id: 0 device: 0 engine: COPY }
        streams { id: 1 device: 1 engine: COPY }
        num_devices: 2
        estimated_makespan_us: 5
      )pb",
      &plan));
  const std::string table = PlanTable(plan);
  EXPECT_THAT(table, HasSubstr("move  1       1+0"));
  const Struct trace = ParseJson(PlanTraceJson(plan));
  std::vector<Struct> peers;
  for (const Struct& x : EventsWithPhase(trace, "X")) {
    if (Str(x, "cat") == "peer") peers.push_back(x);
  }
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(Str(peers[0], "name"), "move");
  EXPECT_EQ(Num(peers[0], "pid"), 0);
  EXPECT_EQ(Num(peers[0], "tid"), 0);
  EXPECT_EQ(Num(peers[0], "ts"), 1);
  EXPECT_EQ(Num(peers[0], "dur"), 4);
  EXPECT_EQ(Num(Field(peers[0], "args").struct_value(), "stream"), 1);
  EXPECT_THAT(PlanDot(plan), HasSubstr("\"move\\nstream 1 + peer 0\""));
}

}  // namespace
}  // namespace weft::client
