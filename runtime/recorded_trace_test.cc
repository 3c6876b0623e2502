#include "runtime/recorded_trace.h"

#include <memory>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;

// A stamp whose time the test sets.
class FixedStamp final : public DeviceStamp {
 public:
  explicit FixedStamp(std::optional<double> us) : us_(us) {}
  std::optional<double> TimeUs() const override { return us_; }

 private:
  std::optional<double> us_;
};

TracePoint At(double us) { return TracePoint{nullptr, us}; }
TracePoint Stamped(std::optional<double> us) {
  return TracePoint{std::make_shared<FixedStamp>(us)};
}

// A span of `trace` named `name` (added to its strings).
RecordedSpan Span(RecordedTrace& trace, const char* name, int track,
                  TracePoint start, TracePoint end) {
  RecordedSpan span;
  span.name = static_cast<int32_t>(trace.strings.size());
  trace.strings.push_back(name);
  span.track = track;
  span.start = std::move(start);
  span.end = std::move(end);
  return span;
}

TEST(TracePointTest, KnowsItsTimeFromAStampOrANumber) {
  EXPECT_EQ(At(3).TimeUs(), 3);
  EXPECT_EQ(TracePoint{}.TimeUs(), std::nullopt);
  EXPECT_EQ(Stamped(5).TimeUs(), 5);
  EXPECT_EQ(Stamped(std::nullopt).TimeUs(), std::nullopt);
}

TEST(RecordedTraceTest, BuildKeepsSpansWithBothEndsFromTheEarliestStart) {
  RecordedTrace recorded;
  recorded.name = "g";
  recorded.device_clock = true;
  recorded.tracks = {{TraceTrackKind::kStream, 0, 7},
                     {TraceTrackKind::kHostToDevice, 0, 0},
                     {TraceTrackKind::kDeviceToHost, 1, 0},
                     {TraceTrackKind::kPeer, 1, 0},
                     {TraceTrackKind::kStream, -1, 0}};
  recorded.spans = {
      Span(recorded, "upload", 1, Stamped(100), Stamped(110)),
      Span(recorded, "never ran", 0, Stamped(110), Stamped(std::nullopt)),
      Span(recorded, "k", 0, Stamped(110), At(125)),
      Span(recorded, "backwards", 0, At(130), At(120))};
  recorded.flows = {{0, 2}, {1, 2}};
  const JobTrace trace = recorded.Build();
  EXPECT_EQ(trace.name, "g");
  EXPECT_TRUE(trace.device_clock);
  EXPECT_THAT(trace.tracks,
              ElementsAre(AllOf(Field(&TraceTrack::name, "stream 7"),
                                Field(&TraceTrack::device, 0)),
                          Field(&TraceTrack::name, "H2D"),
                          AllOf(Field(&TraceTrack::name, "D2H"),
                                Field(&TraceTrack::device, 1)),
                          Field(&TraceTrack::name, "D2D"),
                          AllOf(Field(&TraceTrack::name, "host"),
                                Field(&TraceTrack::device, -1))));
  ASSERT_EQ(trace.spans.size(), 3u);
  EXPECT_EQ(trace.spans[0].name, "upload");
  EXPECT_DOUBLE_EQ(trace.spans[0].start_us, 0);
  EXPECT_DOUBLE_EQ(trace.spans[0].end_us, 10);
  EXPECT_EQ(trace.spans[1].name, "k");
  EXPECT_DOUBLE_EQ(trace.spans[1].start_us, 10);
  EXPECT_DOUBLE_EQ(trace.spans[1].end_us, 25);
  EXPECT_EQ(trace.spans[2].name, "backwards");  // ends where it starts
  EXPECT_DOUBLE_EQ(trace.spans[2].end_us, trace.spans[2].start_us);
  // The flow from the span that never ran is dropped; the other follows
  // the spans' new indices.
  EXPECT_THAT(trace.flows, ElementsAre(AllOf(Field(&TraceFlow::from_span, 0),
                                             Field(&TraceFlow::to_span, 1))));
  // Built again, the same.
  EXPECT_EQ(recorded.Build().spans.size(), 3u);
}

TEST(RecordedTraceTest, StringsOutOfRangeAreEmpty) {
  RecordedTrace recorded;
  recorded.strings = {"a"};
  EXPECT_EQ(recorded.String(0), "a");
  EXPECT_EQ(recorded.String(-1), "");
  EXPECT_EQ(recorded.String(1), "");
}

TEST(RecordedTraceTest, NothingRecordedBuildsAnEmptyTrace) {
  RecordedTrace recorded;
  recorded.name = "empty";
  const JobTrace trace = recorded.Build();
  EXPECT_EQ(trace.name, "empty");
  EXPECT_TRUE(trace.spans.empty());
  EXPECT_TRUE(trace.tracks.empty());
}

}  // namespace
}  // namespace weft::runtime
