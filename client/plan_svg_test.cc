#include "client/plan_svg.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace weft::client {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message))
      << text;
  return message;
}

// Checks that `xml` is well formed as far as this renderer can break it:
// after the declaration, tags nest and balance with one root <svg>, attribute
// values are quoted, and every '&' starts one of the five entities. Returns
// the problems found.
std::vector<std::string> XmlProblems(const std::string& xml) {
  std::vector<std::string> problems;
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  if (absl::StartsWith(xml, "<?xml")) i = xml.find("?>") + 2;
  while (i < xml.size()) {
    const char c = xml[i];
    if (c == '&') {
      bool known = false;
      for (const char* entity : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
        known =
            known || xml.compare(i, std::string(entity).size(), entity) == 0;
      }
      if (!known) problems.push_back(absl::StrCat("bare & at ", i));
      ++i;
      continue;
    }
    if (c == '>') {
      problems.push_back(absl::StrCat("bare > at ", i));
      ++i;
      continue;
    }
    if (c != '<') {
      if (open.empty() && c != '\n') {
        problems.push_back(absl::StrCat("text outside the root at ", i));
      }
      ++i;
      continue;
    }
    // A tag: scan to its '>' outside quoted attribute values.
    size_t j = i + 1;
    char quote = 0;
    while (j < xml.size() && (quote != 0 || xml[j] != '>')) {
      if (quote == 0 && xml[j] == '<') {
        problems.push_back(absl::StrCat("< inside the tag at ", i));
      }
      if (quote == 0 && (xml[j] == '"' || xml[j] == '\'')) {
        quote = xml[j];
      } else if (quote != 0 && xml[j] == quote) {
        quote = 0;
      } else if (quote != 0 && xml[j] == '<') {
        problems.push_back(absl::StrCat("< in an attribute at ", j));
      }
      ++j;
    }
    if (j >= xml.size()) {
      problems.push_back(absl::StrCat("unterminated tag at ", i));
      break;
    }
    const std::string tag = xml.substr(i + 1, j - i - 1);
    i = j + 1;
    if (absl::StartsWith(tag, "/")) {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        problems.push_back(absl::StrCat(
            "</", name, "> closes ", open.empty() ? "nothing" : open.back()));
      } else {
        open.pop_back();
      }
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (open.empty()) ++roots;
    if (!absl::EndsWith(tag, "/")) open.push_back(name);
  }
  if (!open.empty())
    problems.push_back(absl::StrCat("<", open.back(), "> open"));
  if (roots != 1) problems.push_back(absl::StrCat(roots, " root elements"));
  return problems;
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Three nodes on two devices, one of them a copy between the devices, a
// node whose name needs escaping, and memory on both devices (a budget on
// device 1 only).
constexpr char kPlan[] = R"pb(
  nodes { name: "load" stream: 0 estimated_start_us: 0 estimated_end_us: 400 }
  nodes {
    name: "a<b & \"c\""
    stream: 0
    estimated_start_us: 400
    estimated_end_us: 1500
  }
  nodes {
    name: "move"
    stream: 2
    peer_stream: 1
    estimated_start_us: 1500
    estimated_end_us: 2500
  }
  streams { id: 0 device: 0 label: "main<1>" }
  streams { id: 1 device: 0 engine: COPY }
  streams { id: 2 device: 1 engine: COPY }
  estimated_makespan_us: 2500
  num_devices: 2
  memory { device: 0 arena_bytes: 4096 peak_live_bytes: 4096 }
  memory {
    device: 1
    arena_bytes: 2048
    peak_live_bytes: 2048
    budget_bytes: 8192
  }
  buffers { name: "x" device: 0 size_bytes: 2048 }
  buffers { name: "y" device: 0 offset: 2048 size_bytes: 2048 }
  buffers { name: "y" device: 1 size_bytes: 2048 }
)pb";

constexpr char kGraph[] = R"pb(
  buffers { name: "x" size_bytes: 2000 data: "abc" }
  buffers { name: "y" size_bytes: 2000 }
  nodes {
    name: "load"
    op: "scale"
    args { buffer { name: "x" access: READ_WRITE } }
  }
  nodes {
    name: "a<b & \"c\""
    op: "copy"
    args { buffer { name: "x" access: READ } }
    args { buffer { name: "y" access: WRITE } }
  }
  nodes {
    name: "move"
    op: "copy"
    engine: COPY
    args { buffer { name: "y" access: READ_WRITE } }
  }
)pb";

TEST(PlanSvgTest, IsWellFormedWithOneRectPerNodeAndEscapedNames) {
  const auto plan = Parse<weft::v1::Plan>(kPlan);
  const auto graph = Parse<weft::v1::Graph>(kGraph);
  PlanSvgOptions options;
  options.graph = &graph;
  const std::string svg = PlanSvg(plan, options);
  EXPECT_THAT(XmlProblems(svg), IsEmpty()) << svg;
  EXPECT_TRUE(absl::StartsWith(svg, "<?xml")) << svg;
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(Count(svg, "<rect class=\"n "), plan.nodes_size()) << svg;
  // The copy between devices also shows on its peer stream.
  EXPECT_EQ(Count(svg, "<rect class=\"p "), 1) << svg;
  EXPECT_THAT(svg, HasSubstr("<title>a&lt;b &amp; &quot;c&quot; (copy)"));
  EXPECT_THAT(svg, Not(HasSubstr("a<b")));
  EXPECT_THAT(svg, HasSubstr("s0 COMPUTE main&lt;1&gt;"));
  EXPECT_THAT(svg, HasSubstr(">GPU 0</text>"));
  EXPECT_THAT(svg, HasSubstr(">GPU 1</text>"));
  // Ticks every 500 us over 2.5 ms.
  EXPECT_THAT(svg, HasSubstr(">500 us</text>"));
  EXPECT_THAT(svg, HasSubstr(">2500 us</text>"));
  // A legend entry per op.
  EXPECT_THAT(svg, HasSubstr(">scale</text>"));
  EXPECT_THAT(svg, HasSubstr(">copy</text>"));
}

TEST(PlanSvgTest, ChartsPerDeviceWithBudgetLineOnlyWhereSet) {
  const auto plan = Parse<weft::v1::Plan>(kPlan);
  const auto graph = Parse<weft::v1::Graph>(kGraph);
  PlanSvgOptions options;
  options.graph = &graph;
  const std::string svg = PlanSvg(plan, options);
  EXPECT_EQ(Count(svg, "<path class=\"area\""), 2) << svg;
  EXPECT_EQ(Count(svg, "<line class=\"budget\""), 1) << svg;
  EXPECT_EQ(Count(svg, "<line class=\"arena\""), 2) << svg;
  EXPECT_THAT(svg, HasSubstr("GPU 0 memory: arena 4.0 KiB, peak live 4.0 KiB"
                             ", lower bound 0 B, budget none"));
  EXPECT_THAT(svg, HasSubstr("GPU 1 memory: arena 2.0 KiB, peak live 2.0 KiB"
                             ", lower bound 0 B, budget 8.0 KiB"));
  EXPECT_THAT(svg, HasSubstr("budget 8.0 KiB</text>"));

  weft::v1::Plan no_budget = plan;
  no_budget.mutable_memory(1)->set_budget_bytes(0);
  const std::string without = PlanSvg(no_budget, options);
  EXPECT_THAT(XmlProblems(without), IsEmpty());
  EXPECT_EQ(Count(without, "class=\"budget\""), 0) << without;
}

TEST(PlanSvgTest, NoMemoryNoCharts) {
  auto plan = Parse<weft::v1::Plan>(kPlan);
  plan.clear_memory();
  plan.clear_buffers();
  const std::string svg = PlanSvg(plan);
  EXPECT_THAT(XmlProblems(svg), IsEmpty()) << svg;
  EXPECT_THAT(svg, Not(HasSubstr("memory:")));
  EXPECT_THAT(svg, Not(HasSubstr("class=\"area\"")));
  EXPECT_EQ(Count(svg, "<rect class=\"n "), plan.nodes_size());
  // Coloured by engine without the graph.
  EXPECT_THAT(svg, HasSubstr(">COMPUTE</text>"));
  EXPECT_THAT(svg, HasSubstr(">COPY</text>"));
}

TEST(PlanSvgTest, WithoutTheGraphChartsSayWhatIsMissing) {
  const auto plan = Parse<weft::v1::Plan>(kPlan);
  const std::string svg = PlanSvg(plan);
  EXPECT_THAT(XmlProblems(svg), IsEmpty()) << svg;
  EXPECT_THAT(svg, HasSubstr("live bytes need the graph"));
  EXPECT_EQ(Count(svg, "class=\"area\""), 0);
  EXPECT_EQ(Count(svg, "<line class=\"budget\""), 1);
}

TEST(PlanSvgTest, EmptyPlanIsStillAPicture) {
  const std::string svg = PlanSvg(weft::v1::Plan());
  EXPECT_THAT(XmlProblems(svg), IsEmpty()) << svg;
  EXPECT_EQ(Count(svg, "<rect class=\"n "), 0);
}

TEST(PlanSvgTest, ManyOpsShareTheOtherColour) {
  weft::v1::Plan plan;
  weft::v1::Graph graph;
  plan.add_streams();
  for (int i = 0; i < 15; ++i) {
    weft::v1::PlannedNode* n = plan.add_nodes();
    n->set_name(absl::StrCat("n", i));
    n->set_estimated_start_us(i);
    n->set_estimated_end_us(i + 1);
    weft::v1::Node* g = graph.add_nodes();
    g->set_name(n->name());
    g->set_op(absl::StrCat("op", i));
  }
  PlanSvgOptions options;
  options.graph = &graph;
  const std::string svg = PlanSvg(plan, options);
  EXPECT_THAT(XmlProblems(svg), IsEmpty()) << svg;
  EXPECT_EQ(Count(svg, "<rect class=\"n "), 15);
  EXPECT_EQ(Count(svg, "<rect class=\"n c10\""), 5) << svg;
  EXPECT_THAT(svg, HasSubstr(">other</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">op10</text>")));
}

TEST(XmlEscapeTest, EscapesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(XmlEscape("a<b>&\"c\"'d'"),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  EXPECT_EQ(XmlEscape(std::string("x\x01y\tz\n", 6)), "x\xEF\xBF\xBDy\tz\n");
  EXPECT_EQ(XmlEscape("caf\xC3\xA9"), "caf\xC3\xA9");
}

TEST(TickLabelTest, UnitFollowsTheStep) {
  EXPECT_EQ(TickLabel(250, 50), "250 us");
  EXPECT_EQ(TickLabel(1500, 500), "1500 us");
  EXPECT_EQ(TickLabel(1500, 1000), "1.5 ms");
  EXPECT_EQ(TickLabel(2e6, 1e6), "2 s");
}

}  // namespace
}  // namespace weft::client
