#include "client/format.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::weft::testing::StatusIs;

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

weft::v1::Job FailedJob() {
  weft::v1::Job job;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        id: "j-00000000000000ab"
        graph_name: "pipe"
        state: FAILED
        nodes_done: 2
        nodes_total: 5
        priority: 3
        error { code: 8 message: "out of memory" node: "axpy" }
        create_time { seconds: 1700000000 nanos: 250000000 }
        start_time { seconds: 1700000001 }
        end_time { seconds: 1700000001 nanos: 500000000 }
        output_buffers: "y"
        output_buffers: "z"
        device_memory_bytes: 0
        device_memory_bytes: 3145728
      )pb",
      &job));
  return job;
}

TEST(FormatTest, TableAlignsColumns) {
  EXPECT_EQ(Table({{"A", "BBB", "C"}, {"long", "x", ""}}),
            "A     BBB  C\n"
            "long  x\n");
}

TEST(FormatTest, JobLineAndDetails) {
  weft::v1::Job job = FailedJob();
  EXPECT_EQ(JobLine(job), "job j-00000000000000ab FAILED");
  std::string details = JobDetails(job);
  EXPECT_THAT(details, StartsWith("job j-00000000000000ab FAILED\n"));
  EXPECT_THAT(details, HasSubstr("progress:  2/5 nodes"));
  EXPECT_THAT(details, HasSubstr("graph:     pipe"));
  EXPECT_THAT(details, HasSubstr("created:   2023-11-14T22:13:20.250Z"));
  EXPECT_THAT(details, HasSubstr("duration:  500ms"));
  EXPECT_THAT(details, HasSubstr("outputs:   y, z"));
  EXPECT_THAT(details, HasSubstr("memory:    GPU 1 3.0 MiB\n"));
  EXPECT_THAT(
      details,
      HasSubstr("error:     RESOURCE_EXHAUSTED: out of memory (node axpy)"));
}

TEST(FormatTest, AQueuedJobSaysWhatItWaitsFor) {
  weft::v1::Job job;
  job.set_id("j-2");
  job.set_state(weft::v1::QUEUED);
  job.set_queue_reason("waiting for a running slot: 64 of 64 jobs run");
  EXPECT_THAT(JobDetails(job),
              HasSubstr("waiting:   waiting for a running slot: 64 of 64"));
  EXPECT_THAT(JobDetails(FailedJob()), Not(HasSubstr("waiting:")));
}

TEST(FormatTest, JobsTable) {
  weft::v1::Job queued;
  queued.set_id("j-1");
  queued.set_state(weft::v1::QUEUED);
  queued.set_nodes_total(4);
  queued.set_tenant("team-a");
  std::string table = JobsTable({FailedJob(), queued});
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], StartsWith("JOB "));
  EXPECT_THAT(lines[0], HasSubstr("PRIORITY  TENANT  PROGRESS"));
  EXPECT_THAT(lines[2], HasSubstr("team-a"));
  // Columns line up: the tenant of each row starts under TENANT.
  EXPECT_EQ(lines[2].find("team-a"), lines[0].find("TENANT"));
  EXPECT_EQ(lines[1][lines[0].find("TENANT")], '-');
  EXPECT_THAT(lines[1], StartsWith("j-00000000000000ab  FAILED"));
  EXPECT_THAT(lines[2], HasSubstr("QUEUED"));
  EXPECT_THAT(lines[2], HasSubstr("0/4"));
  EXPECT_THAT(lines[2], ::testing::EndsWith("-"));
}

TEST(FormatTest, NodeEventLine) {
  weft::v1::NodeEvent e;
  e.set_node("axpy");
  e.set_kind(weft::v1::NODE_FAILED);
  e.set_device(1);
  e.set_stream(3);
  e.set_message("boom");
  EXPECT_EQ(NodeEventLine(e), "node axpy FAILED device 1 stream 3: boom");
}

TEST(FormatTest, NodeEventLineOfControlNodes) {
  weft::v1::NodeEvent e;
  e.set_node("cg");
  e.set_kind(weft::v1::NODE_ITERATION);
  e.set_iteration(37);
  EXPECT_EQ(NodeEventLine(e), "cg: iteration 37");
  e.set_node("pick");
  e.set_kind(weft::v1::NODE_BRANCH);
  e.set_branch(2);
  EXPECT_EQ(NodeEventLine(e), "pick: branch 2");
  e.set_branch(-1);
  e.set_message("selector 9 picks none of 3 branches");
  EXPECT_EQ(NodeEventLine(e),
            "pick: no branch (selector 9 picks none of 3 branches)");
}

TEST(FormatTest, JsonHasAllFieldsOnOneLine) {
  weft::v1::Job job;
  job.set_id("j-1");
  job.set_state(weft::v1::QUEUED);
  std::string json = ToJson(job);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_THAT(json, HasSubstr("\"id\":\"j-1\""));
  EXPECT_THAT(json, HasSubstr("\"state\":\"QUEUED\""));
  EXPECT_THAT(json, HasSubstr("\"nodesDone\":\"0\""));
  EXPECT_THAT(json, HasSubstr("\"priority\":0"));
}

TEST(FormatTest, DevicesTable) {
  weft::v1::Device d;
  d.set_index(0);
  d.set_name("Sim GPU");
  d.set_uuid("GPU-1");
  d.set_simulated(true);
  d.set_memory_total_bytes(uint64_t{16} << 30);
  d.set_memory_used_bytes(4096);
  d.set_memory_cached_bytes(3 << 20);
  d.set_memory_arena_bytes(2048);
  d.set_memory_reserved_bytes(5 << 20);
  d.set_streams_busy(1);
  d.set_streams_total(4);
  std::string table = DevicesTable({d});
  EXPECT_THAT(table, HasSubstr("MEMORY_USED  ARENA_PLANNED  RESERVED"));
  EXPECT_THAT(table, HasSubstr("5.0 MiB"));
  EXPECT_THAT(
      table,
      HasSubstr("0      Sim GPU  GPU-1  simulated  4.0 KiB      2.0 KiB"));
  EXPECT_THAT(table, HasSubstr("MEMORY_CACHED"));
  EXPECT_THAT(table, HasSubstr("3.0 MiB"));
  EXPECT_THAT(table, HasSubstr("16.0 GiB"));
}

TEST(FormatTest, BytesAndCodes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(CodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(CodeName(1), "CANCELLED");
}

TEST(FormatElementsTest, EachDtype) {
  EXPECT_THAT(*FormatElements(Bytes<float>({7, 4.5f, 0.1f}), weft::v1::FLOAT32),
              ElementsAre("7", "4.5", "0.100000001"));
  EXPECT_THAT(*FormatElements(Bytes<double>({1.0 / 3}), weft::v1::FLOAT64),
              ElementsAre("0.333333333"));
  EXPECT_THAT(
      *FormatElements(Bytes<int32_t>({-5, 2147483647}), weft::v1::INT32),
      ElementsAre("-5", "2147483647"));
  EXPECT_THAT(
      *FormatElements(Bytes<int64_t>({int64_t{1} << 40}), weft::v1::INT64),
      ElementsAre("1099511627776"));
  EXPECT_THAT(*FormatElements(std::string("\x00\xff\x10", 3), weft::v1::BYTES),
              ElementsAre("00", "ff", "10"));
}

TEST(FormatElementsTest, RejectsPartialElements) {
  absl::StatusOr<std::vector<std::string>> out =
      FormatElements("abcdef", weft::v1::FLOAT32);
  EXPECT_THAT(out.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("6 bytes")));
}

TEST(FormatElementsTest, Json) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(*ElementsJson("j-1", "y", Bytes<float>({1.5f, inf, std::nanf("")}),
                          weft::v1::FLOAT32),
            "{\"jobId\":\"j-1\",\"buffer\":\"y\",\"dtype\":\"FLOAT32\","
            "\"totalBytes\":12,\"values\":[1.5,\"Infinity\",\"NaN\"]}");
  EXPECT_EQ(*ElementsJson("j-1", "b", std::string("\x01", 1), weft::v1::BYTES),
            "{\"jobId\":\"j-1\",\"buffer\":\"b\",\"dtype\":\"BYTES\","
            "\"totalBytes\":1,\"values\":[\"01\"]}");
}

TEST(FormatTest, FormatElapsed) {
  EXPECT_EQ(FormatElapsed(absl::ZeroDuration()), "0.0s");
  EXPECT_EQ(FormatElapsed(absl::Milliseconds(3250)), "3.2s");
  EXPECT_EQ(FormatElapsed(absl::Seconds(59.99)), "59.9s");
  EXPECT_EQ(FormatElapsed(absl::Seconds(245)), "4m05s");
  EXPECT_EQ(FormatElapsed(absl::Hours(2) + absl::Minutes(7)), "2h07m");
  EXPECT_EQ(FormatElapsed(absl::Seconds(-5)), "0.0s");
}

TEST(FormatTest, JobElapsedRunsFromStartToEndOrNow) {
  weft::v1::Job job = FailedJob();  // started at ...001, ended at ...001.5
  EXPECT_EQ(JobElapsed(job, absl::FromUnixSeconds(1'800'000'000)),
            absl::Milliseconds(500));
  job.clear_end_time();
  EXPECT_EQ(JobElapsed(job, absl::FromUnixSeconds(1'700'000'004)),
            absl::Seconds(3));
  // Queued: counted from creation.
  job.clear_start_time();
  EXPECT_EQ(JobElapsed(job, absl::FromUnixSeconds(1'700'000'002)),
            absl::Milliseconds(1750));
  EXPECT_EQ(JobElapsed(weft::v1::Job(), absl::Now()), absl::ZeroDuration());
}

TEST(FormatTest, ProgressLineFillsTheBarInProportion) {
  weft::v1::Job job;
  job.set_state(weft::v1::RUNNING);
  job.set_nodes_total(40);
  job.set_nodes_done(10);
  std::string line = ProgressLine(job, absl::Milliseconds(3200), 80);
  EXPECT_EQ(line, absl::StrCat("[", std::string(10, '#'), std::string(30, '.'),
                               "] 10/40 nodes  25% 3.2s RUNNING"));
  job.set_nodes_done(40);
  job.set_state(weft::v1::SUCCEEDED);
  line = ProgressLine(job, absl::Seconds(61), 80);
  EXPECT_THAT(line, StartsWith(absl::StrCat("[", std::string(40, '#'), "]")));
  EXPECT_THAT(line, HasSubstr("40/40 nodes 100% 1m01s SUCCEEDED"));
}

TEST(FormatTest, ProgressLineFitsNarrowTerminals) {
  weft::v1::Job job;
  job.set_state(weft::v1::QUEUED);
  job.set_nodes_total(8);
  std::string line = ProgressLine(job, absl::ZeroDuration(), 50);
  EXPECT_LE(line.size(), 50u);
  EXPECT_THAT(line, HasSubstr("0/8 nodes   0% 0.0s QUEUED"));
  // Too narrow for the minimum bar: cut, never wrapped.
  EXPECT_EQ(ProgressLine(job, absl::ZeroDuration(), 20).size(), 20u);
  // A graph without nodes shows an empty (or, when done, full) bar.
  weft::v1::Job empty;
  empty.set_state(weft::v1::SUCCEEDED);
  EXPECT_THAT(ProgressLine(empty, absl::ZeroDuration(), 80),
              HasSubstr("0/0 nodes 100%"));
}

TEST(FormatTest, StatusTextWithAndWithoutRetryHint) {
  absl::Status full = absl::ResourceExhaustedError("admission queue is full");
  EXPECT_EQ(StatusText(full, std::nullopt),
            "RESOURCE_EXHAUSTED: admission queue is full");
  EXPECT_EQ(StatusText(full, absl::Microseconds(250'400)),
            "RESOURCE_EXHAUSTED: admission queue is full (retry after 250ms)");
}

}  // namespace
}  // namespace weft::client
