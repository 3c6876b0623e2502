#include "runtime/trace.h"

#include <cctype>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;

// A strict little JSON checker: true when `s` is one well-formed value.
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool Valid() {
    Ws();
    if (!Value()) return false;
    Ws();
    return i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) {
      ++i_;
    }
  }
  bool Eat(char c) {
    Ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') ++i_;
      ++i_;
    }
    return i_++ < s_.size();
  }
  bool Number() {
    Ws();
    const size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
            s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    return i_ > start;
  }
  bool Value() {
    Ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      if (Eat('}')) return true;
      do {
        if (!String() || !Eat(':') || !Value()) return false;
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++i_;
      if (Eat(']')) return true;
      do {
        if (!Value()) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') return String();
    for (const char* word : {"true", "false", "null"}) {
      const std::string w(word);
      if (s_.compare(i_, w.size(), w) == 0) {
        i_ += w.size();
        return true;
      }
    }
    return Number();
  }

  const std::string& s_;
  size_t i_ = 0;
};

JobTrace TwoStreamTrace() {
  JobTrace trace;
  trace.name = "job \"7\"";
  trace.device_clock = true;
  trace.tracks = {{0, "stream 3"}, {1, "stream 9"}, {1, "H2D"}, {-1, "host"}};
  trace.spans.push_back({0, SpanKind::kKernel, "a", "spin", 0, 0, 10, 30});
  trace.spans.push_back({2, SpanKind::kCopy, "copy x", "", -1, 4096, 30, 34});
  trace.spans.push_back({1, SpanKind::kKernel, "b\n", "axpy", 1, 0, 34, 50});
  trace.spans.push_back({3, SpanKind::kHost, "h", "add", 2, 0, 50, 51});
  trace.flows.push_back({0, 2});
  return trace;
}

TEST(TraceTest, RendersWellFormedTraceEventJson) {
  const std::string json = ToTraceEventJson(TwoStreamTrace());
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_THAT(json, HasSubstr(R"("traceEvents":[)"));
  EXPECT_THAT(json, HasSubstr(R"("job":"job \"7\"")"));
  EXPECT_THAT(json, HasSubstr(R"("clock":"device")"));
}

TEST(TraceTest, OneThreadPerTrackAndOneProcessPerDevice) {
  const std::string json = ToTraceEventJson(TwoStreamTrace());
  EXPECT_THAT(
      json,
      HasSubstr(R"("name":"process_name","pid":1,"args":{"name":"device 0"})"));
  EXPECT_THAT(
      json,
      HasSubstr(R"("name":"process_name","pid":2,"args":{"name":"device 1"})"));
  EXPECT_THAT(
      json,
      HasSubstr(R"("name":"process_name","pid":0,"args":{"name":"host"})"));
  EXPECT_THAT(json, HasSubstr(R"("pid":2,"tid":2,"args":{"name":"H2D"})"));
  EXPECT_THAT(json, HasSubstr(R"("pid":2,"tid":1,"args":{"name":"stream 9"})"));
}

TEST(TraceTest, SpansAreCompleteEventsWithArgs) {
  const std::string json = ToTraceEventJson(TwoStreamTrace());
  EXPECT_THAT(
      json,
      HasSubstr(
          R"({"ph":"X","name":"a","cat":"kernel","pid":1,"tid":0,"ts":10.000,"dur":20.000,"args":{"node":0,"op":"spin"}})"));
  EXPECT_THAT(
      json,
      HasSubstr(
          R"("cat":"copy","pid":2,"tid":2,"ts":30.000,"dur":4.000,"args":{"node":-1,"bytes":4096})"));
  EXPECT_THAT(json, HasSubstr(R"("name":"b\n")"));
  EXPECT_THAT(json, HasSubstr(R"("cat":"host","pid":0,"tid":3)"));
}

TEST(TraceTest, WaitsAreFlowPairs) {
  const std::string json = ToTraceEventJson(TwoStreamTrace());
  EXPECT_THAT(
      json,
      HasSubstr(
          R"({"ph":"s","name":"event wait","cat":"event","id":0,"pid":1,"tid":0,"ts":29.999})"));
  EXPECT_THAT(
      json,
      HasSubstr(
          R"({"ph":"f","bp":"e","name":"event wait","cat":"event","id":0,"pid":2,"tid":1,"ts":34.000})"));
}

TEST(TraceTest, NodeMakespanIgnoresExecutorWork) {
  JobTrace trace = TwoStreamTrace();
  EXPECT_EQ(trace.NodeMakespanUs(), 41);  // 10 .. 51
  trace.spans[0].node = -1;
  EXPECT_EQ(trace.NodeMakespanUs(), 17);  // 34 .. 51
  EXPECT_EQ(JobTrace().NodeMakespanUs(), 0);
  EXPECT_TRUE(JsonChecker(ToTraceEventJson(JobTrace())).Valid());
}

}  // namespace
}  // namespace weft::runtime
