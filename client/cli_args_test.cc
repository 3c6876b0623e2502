#include "client/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

const std::vector<FlagSpec> kFlags = {{"addr"},         {"json", false},
                                      {"watch", false}, {"priority"},
                                      {"timeout"},      {"help", false}};

TEST(CliArgsTest, FlagsAnywhere) {
  auto args =
      CliArgs::Parse({"weftctl", "--json", "submit", "g.json", "--priority",
                      "3", "--addr=unix:/tmp/s", "--watch"},
                     kFlags);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->command(), "submit");
  EXPECT_THAT(args->positional(), ElementsAre("g.json"));
  EXPECT_TRUE(args->Bool("json"));
  EXPECT_TRUE(args->Bool("watch"));
  EXPECT_EQ(*args->String("addr"), "unix:/tmp/s");
  EXPECT_EQ(**args->Int("priority"), 3);
  EXPECT_FALSE(args->Has("timeout"));
}

TEST(CliArgsTest, DoubleDashEndsFlags) {
  auto args = CliArgs::Parse({"weftctl", "read", "--", "--odd", "-"}, kFlags);
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(args->positional(), ElementsAre("--odd", "-"));
}

TEST(CliArgsTest, Errors) {
  auto unknown = CliArgs::Parse({"weftctl", "get", "--bogus"}, kFlags);
  EXPECT_THAT(unknown.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("unknown flag '--bogus'")));
  auto missing = CliArgs::Parse({"weftctl", "get", "--addr"}, kFlags);
  EXPECT_THAT(missing.status().message(), HasSubstr("--addr needs a value"));
  auto switch_value = CliArgs::Parse({"weftctl", "--json=yes"}, kFlags);
  EXPECT_THAT(switch_value.status().message(), HasSubstr("--json is a switch"));
  auto not_int = CliArgs::Parse({"weftctl", "--priority=high"}, kFlags);
  ASSERT_TRUE(not_int.ok());
  EXPECT_THAT(not_int->Int("priority").status().message(),
              HasSubstr("--priority: 'high' is not an integer"));
  auto bad_duration = CliArgs::Parse({"weftctl", "--timeout=soon"}, kFlags);
  EXPECT_THAT(bad_duration->Duration("timeout").status().message(),
              HasSubstr("not a positive duration"));
}

TEST(CliArgsTest, Doubles) {
  auto args = CliArgs::Parse({"weftctl", "--priority=0.25"}, kFlags);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(**args->Double("priority"), 0.25);
  EXPECT_FALSE(args->Double("timeout")->has_value());
  for (const char* bad :
       {"--priority=half", "--priority=inf", "--priority=nan"}) {
    auto not_number = CliArgs::Parse({"weftctl", bad}, kFlags);
    ASSERT_TRUE(not_number.ok());
    EXPECT_THAT(not_number->Double("priority").status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a number")))
        << bad;
  }
}

TEST(CliArgsTest, DurationsAndSwitchValues) {
  auto args = CliArgs::Parse(
      {"weftctl", "-h", "--timeout=1.5s", "--json=false"}, kFlags);
  ASSERT_TRUE(args.ok());
  EXPECT_TRUE(args->Bool("help"));
  EXPECT_FALSE(args->Bool("json"));
  EXPECT_EQ(**args->Duration("timeout"), absl::Milliseconds(1500));
}

TEST(CliArgsTest, CheckAllowed) {
  auto args = CliArgs::Parse({"weftctl", "get", "j-1", "--watch"}, kFlags);
  ASSERT_TRUE(args.ok());
  absl::Status s = args->CheckAllowed({"json", "addr"}, "get");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("--watch does not apply to 'get'")));
  EXPECT_TRUE(args->CheckAllowed({"watch"}, "get").ok());
}

}  // namespace
}  // namespace weft::client
