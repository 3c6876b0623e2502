#include "client/graph_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::client {
namespace {

using ::weft::testing::StatusIs;

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kJson[] = R"({
  "name": "tiny",
  "buffers": [
    {"name": "x", "sizeBytes": "16", "dtype": "FLOAT32", "fill": 1.5},
    {"name": "y", "size_bytes": 16, "dtype": "FLOAT32", "output": true}
  ],
  "nodes": [
    {"name": "copy", "op": "copy", "engine": "COPY",
     "args": [{"buffer": {"name": "x", "access": "READ"}},
              {"buffer": {"name": "y", "access": "WRITE"}}],
     "cost": {"estimatedUs": 5}, "device": 1}
  ]
})";

constexpr char kText[] = R"pb(
  # a comment
  name: "tiny"
  buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1.5 }
  nodes {
    name: "scale"
    op: "scale"
    args { f32: 2 }
    args { buffer { name: "x" access: READ_WRITE } }
    after: "nothing"
  }
)pb";

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream(path) << contents;
  return path;
}

TEST(GraphFormatTest, ByExtension) {
  EXPECT_EQ(*GraphFormatForPath("a/b.json"), GraphFormat::kJson);
  EXPECT_EQ(*GraphFormatForPath("B.JSON"), GraphFormat::kJson);
  EXPECT_EQ(*GraphFormatForPath("g.textproto"), GraphFormat::kText);
  EXPECT_EQ(*GraphFormatForPath("g.txtpb"), GraphFormat::kText);
  EXPECT_EQ(*GraphFormatForPath("g.pbtxt"), GraphFormat::kText);
  absl::StatusOr<GraphFormat> yaml = GraphFormatForPath("g.yaml");
  EXPECT_THAT(yaml.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(yaml.status().message()),
              StartsWith("g.yaml: unknown graph"));
}

TEST(ParseGraphTest, JsonAcceptsBothFieldNameStyles) {
  absl::StatusOr<weft::v1::Graph> g =
      ParseGraph(kJson, GraphFormat::kJson, "tiny.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->name(), "tiny");
  ASSERT_EQ(g->buffers_size(), 2);
  EXPECT_EQ(g->buffers(0).size_bytes(), 16u);
  EXPECT_EQ(g->buffers(0).fill(), 1.5);
  EXPECT_EQ(g->buffers(1).size_bytes(), 16u);
  EXPECT_TRUE(g->buffers(1).output());
  ASSERT_EQ(g->nodes_size(), 1);
  EXPECT_EQ(g->nodes(0).engine(), weft::v1::COPY);
  EXPECT_EQ(g->nodes(0).args(1).buffer().access(), weft::v1::WRITE);
  EXPECT_EQ(g->nodes(0).cost().estimated_us(), 5);
  ASSERT_TRUE(g->nodes(0).has_device());
  EXPECT_EQ(g->nodes(0).device(), 1);
}

TEST(ParseGraphTest, Text) {
  absl::StatusOr<weft::v1::Graph> g =
      ParseGraph(kText, GraphFormat::kText, "tiny.textproto");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->nodes(0).args(0).f32(), 2.0f);
  EXPECT_EQ(g->nodes(0).after(0), "nothing");
}

TEST(ParseGraphTest, JsonSyntaxErrorHasLineAndColumn) {
  absl::StatusOr<weft::v1::Graph> g = ParseGraph(
      "{\n  \"name\": \"x\"\n  \"nodes\": []\n}", GraphFormat::kJson, "g.json");
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(g.status().message()), StartsWith("g.json:3:3: "));
  EXPECT_THAT(g.status().message(), HasSubstr("expected ',' or '}'"));

  g = ParseGraph("{\"buffers\": [1, 2,]}", GraphFormat::kJson, "g.json");
  EXPECT_THAT(std::string(g.status().message()),
              StartsWith("g.json:1:19: trailing ','"));
  g = ParseGraph("{\"name\": \"x", GraphFormat::kJson, "g.json");
  EXPECT_THAT(g.status().message(), HasSubstr("unterminated string"));
  g = ParseGraph("", GraphFormat::kJson, "g.json");
  EXPECT_THAT(g.status().message(), HasSubstr("1:1: unexpected end of file"));
}

TEST(ParseGraphTest, JsonFieldErrorsNameTheField) {
  absl::StatusOr<weft::v1::Graph> g =
      ParseGraph(R"({"nodes": [{"name": "a", "engine": "GPU"}]})",
                 GraphFormat::kJson, "g.json");
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(g.status().message()),
              StartsWith("g.json: nodes[0].engine: "));
  EXPECT_THAT(g.status().message(), HasSubstr("GPU"));

  g = ParseGraph(R"({"nodez": []})", GraphFormat::kJson, "g.json");
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(g.status().message(), HasSubstr("nodez"));
}

TEST(ParseGraphTest, TextErrorHasLineAndColumn) {
  absl::StatusOr<weft::v1::Graph> g =
      ParseGraph("name: \"x\"\nbuffers { name: \"b\" size: 3 }\n",
                 GraphFormat::kText, "g.pbtxt");
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(g.status().message()), StartsWith("g.pbtxt:2:"));
  EXPECT_THAT(g.status().message(), HasSubstr("size"));
}

TEST(LoadGraphFileTest, ReadsFilesByExtension) {
  absl::StatusOr<weft::v1::Graph> json =
      LoadGraphFile(WriteTemp("tiny.json", kJson));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->buffers_size(), 2);
  absl::StatusOr<weft::v1::Graph> text =
      LoadGraphFile(WriteTemp("tiny.txtpb", kText));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->nodes(0).op(), "scale");
  // Text in a .json file is a JSON error.
  absl::StatusOr<weft::v1::Graph> wrong =
      LoadGraphFile(WriteTemp("wrong.json", kText));
  EXPECT_THAT(wrong.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(wrong.status().message(), HasSubstr("wrong.json:2:"));
}

TEST(LoadGraphFileTest, MissingFileIsNotFound) {
  absl::StatusOr<weft::v1::Graph> g = LoadGraphFile("/nonexistent/g.json");
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(g.status().message(), HasSubstr("/nonexistent/g.json"));
  EXPECT_THAT(g.status().message(), HasSubstr("No such file"));
}

TEST(LoadGraphFileTest, InlinesModuleFilesRelativeToTheGraph) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/uk");
  std::system(absl::StrCat("mkdir -p ", dir, "/kernels").c_str());
  std::ofstream(dir + "/kernels/k.cu") << "extern \"C\" __global__ void k() {}";
  std::ofstream(dir + "/kernels/k.ptx") << ".version 7.0";
  std::ofstream(dir + "/g.json") << R"({
    "modules": [
      {"name": "src", "source_file": "kernels/k.cu", "nvrtc_options": ["-DX"]},
      {"name": "ptx", "ptxFile": "kernels/k.ptx"},
      {"name": "inline", "ptx": ".version 8.0"}
    ]
  })";
  absl::StatusOr<weft::v1::Graph> g = LoadGraphFile(dir + "/g.json");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->modules_size(), 3);
  EXPECT_EQ(g->modules(0).cuda_source(), "extern \"C\" __global__ void k() {}");
  EXPECT_EQ(g->modules(0).nvrtc_options(0), "-DX");
  EXPECT_EQ(g->modules(1).ptx(), ".version 7.0");
  EXPECT_EQ(g->modules(2).ptx(), ".version 8.0");
}

TEST(LoadGraphFileTest, MissingModuleFileIsNotFoundNamingTheField) {
  const std::string path =
      WriteTemp("missing_module.textproto",
                R"pb(modules { name: "m" ptx_file: "nowhere.ptx" })pb");
  absl::StatusOr<weft::v1::Graph> g = LoadGraphFile(path);
  EXPECT_THAT(g.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(g.status().message(),
              HasSubstr("missing_module.textproto: modules[0].ptx_file: "
                        "cannot read "));
  EXPECT_THAT(g.status().message(), HasSubstr("/nowhere.ptx"));
}

}  // namespace
}  // namespace weft::client
