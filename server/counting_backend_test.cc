#include "server/counting_backend.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "runtime/sim/sim_backend.h"
#include "server/metrics.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

class CountingBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::SimBackend::Options sim;
    sim.num_devices = 2;
    sim.memory_bytes = 1 << 20;
    sim.time_scale = 0;
    auto backend = runtime::SimBackend::Create(sim);
    ASSERT_TRUE(backend.ok()) << backend.status();
    sim_ = *std::move(backend);
    counting_ = std::make_unique<CountingBackend>(sim_.get(), &metrics_);
  }

  std::string Scrape() {
    return prometheus::TextSerializer().Serialize(registry_.Collect());
  }

  prometheus::Registry registry_;
  Metrics metrics_{&registry_};
  std::unique_ptr<runtime::SimBackend> sim_;
  std::unique_ptr<CountingBackend> counting_;
};

TEST_F(CountingBackendTest, CountsCopyBytesByDirection) {
  auto s0 = counting_->CreateStream(0);
  ASSERT_TRUE(s0.ok()) << s0.status();
  auto a = counting_->Allocate(0, 256);
  auto b = counting_->Allocate(1, 256);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string host(256, 'x');
  std::string back(256, '\0');
  ASSERT_TRUE(counting_->CopyHostToDevice(*a, host.data(), 200, *s0).ok());
  ASSERT_TRUE(counting_->CopyHostToDevice(*a, host.data(), 56, *s0).ok());
  // The whole upload counts, zero tail included.
  ASSERT_TRUE(
      counting_->CopyHostToDevicePadded(*b, host.data(), 8, 100, *s0).ok());
  ASSERT_TRUE(counting_->CopyDeviceToDevice(*b, *a, 128, *s0).ok());
  ASSERT_TRUE(counting_->CopyDeviceToHost(back.data(), *a, 64, *s0).ok());
  ASSERT_TRUE(counting_->SynchronizeStream(*s0).ok());
  EXPECT_EQ(back.substr(0, 64), std::string(64, 'x'));

  const std::string text = Scrape();
  EXPECT_THAT(
      text,
      HasSubstr("weft_copy_bytes_total{direction=\"host_to_device\"} 356"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_copy_bytes_total{direction=\"device_to_host\"} 64"));
  EXPECT_THAT(text, HasSubstr("weft_copy_bytes_total{direction=\"device_to_"
                              "device\"} 128"));
  ASSERT_TRUE(counting_->Free(*a).ok());
  ASSERT_TRUE(counting_->Free(*b).ok());
  ASSERT_TRUE(counting_->DestroyStream(*s0).ok());
}

TEST_F(CountingBackendTest, CountsCopiesInsideDeviceGraphs) {
  auto s1 = counting_->CreateStream(1);
  auto a = counting_->Allocate(0, 256);
  auto b = counting_->Allocate(1, 256);
  ASSERT_TRUE(s1.ok() && a.ok() && b.ok());
  runtime::DeviceGraph graph;
  graph.device = 1;
  const int copy = graph.AddDeviceCopy(*b, *a, 192, {});
  graph.AddDeviceCopy(*b, *a, 8, {copy});
  ASSERT_TRUE(counting_->LaunchDeviceGraph(graph, *s1).ok());
  ASSERT_TRUE(counting_->SynchronizeStream(*s1).ok());
  EXPECT_THAT(Scrape(), HasSubstr("weft_copy_bytes_total{direction=\"device_"
                                  "to_device\"} 200"));
  // A graph that is refused counts nothing.
  graph.nodes[1].deps = {5};
  EXPECT_THAT(counting_->LaunchDeviceGraph(graph, *s1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Scrape(), HasSubstr("weft_copy_bytes_total{direction=\"device_"
                                  "to_device\"} 200"));
  ASSERT_TRUE(counting_->Free(*a).ok());
  ASSERT_TRUE(counting_->Free(*b).ok());
}

TEST_F(CountingBackendTest, ForwardsEverythingElse) {
  EXPECT_EQ(counting_->device_count(), 2);
  EXPECT_EQ(counting_->device_info(1).uuid, sim_->device_info(1).uuid);
  EXPECT_EQ(counting_->supports_host_gates(), sim_->supports_host_gates());
  EXPECT_EQ(counting_->has_device_clock(), sim_->has_device_clock());
  auto p = counting_->Allocate(1, 4096);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(counting_->memory_used_bytes(1), sim_->memory_used_bytes(1));
  EXPECT_GE(counting_->memory_used_bytes(1), 4096u);
  // Errors come back unchanged.
  auto too_big = counting_->Allocate(0, uint64_t{1} << 40);
  EXPECT_THAT(too_big.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_TRUE(counting_->Free(*p).ok());
  // A failed copy is not counted.
  auto s = counting_->CreateStream(0);
  ASSERT_TRUE(s.ok());
  runtime::DevicePtr bogus;
  bogus.device = 7;
  std::string host(8, 'x');
  absl::Status bad = counting_->CopyHostToDevice(bogus, host.data(), 8, *s);
  if (!bad.ok()) {
    EXPECT_THAT(
        Scrape(),
        HasSubstr("weft_copy_bytes_total{direction=\"host_to_device\"} 0"));
  }
  counting_->SynchronizeStream(*s).IgnoreError();
  ASSERT_TRUE(counting_->DestroyStream(*s).ok());
}

}  // namespace
}  // namespace weft::server
