#include "server/metrics.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(const prometheus::Collectable& c) {
  return prometheus::TextSerializer().Serialize(c.Collect());
}

TEST(MetricsTest, OutcomesExistFromTheStart) {
  prometheus::Registry registry;
  Metrics metrics(&registry);
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"succeeded\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"failed\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"cancelled\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_queue_depth 0"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_running 0"));
}

TEST(MetricsTest, CountsJobsNodesAndGauges) {
  prometheus::Registry registry;
  Metrics metrics(&registry);
  metrics.JobSubmitted();
  metrics.JobSubmitted();
  metrics.JobRejected("RESOURCE_EXHAUSTED");
  metrics.JobFinished("succeeded", absl::Milliseconds(20));
  metrics.JobFinished("failed", absl::Milliseconds(5));
  metrics.JobFinished("succeeded", absl::Milliseconds(30));
  metrics.SetQueueDepth(7);
  metrics.SetJobsRunning(3);
  metrics.NodeExecuted("axpy", 1);
  metrics.NodeExecuted("axpy", 1);
  metrics.NodeExecuted("spin", 0);
  metrics.ObservePlanning(absl::Microseconds(50));
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total 2"));
  EXPECT_THAT(text,
              HasSubstr("weft_jobs_rejected_total{code=\"RESOURCE_EXHAUSTED\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"succeeded\"} 2"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"failed\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_queue_depth 7"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_running 3"));
  EXPECT_THAT(text, HasSubstr(
                        "weft_node_executions_total{device=\"1\",op=\"axpy\"} 2"));
  EXPECT_THAT(text, HasSubstr(
                        "weft_node_executions_total{device=\"0\",op=\"spin\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_planning_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("weft_job_duration_seconds_count 3"));
}

TEST(MetricsTest, RefreshingCollectableSamplesDevicesOnScrape) {
  auto registry = std::make_shared<prometheus::Registry>();
  Metrics metrics(registry.get());
  int busy = 0;
  RefreshingCollectable collectable(registry, [&] {
    DeviceSample d;
    d.index = 1;
    d.uuid = "GPU-sim-1";
    d.streams_busy = busy;
    d.streams_total = 4;
    d.memory_used_bytes = 1024;
    d.memory_total_bytes = 4096;
    metrics.SetDevices({d});
  });
  EXPECT_THAT(Scrape(registry.operator*()),
              Not(HasSubstr("weft_device_streams{")));
  busy = 3;
  std::string text = Scrape(collectable);
  EXPECT_THAT(text, HasSubstr(
      "weft_device_busy_streams{device=\"1\",uuid=\"GPU-sim-1\"} 3"));
  EXPECT_THAT(text,
              HasSubstr("weft_device_streams{device=\"1\",uuid=\"GPU-sim-1\"} 4"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_used_bytes{device=\"1\","
                              "uuid=\"GPU-sim-1\"} 1024"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_capacity_bytes{device=\"1\","
                              "uuid=\"GPU-sim-1\"} 4096"));
  busy = 1;
  EXPECT_THAT(Scrape(collectable),
              HasSubstr("weft_device_busy_streams{device=\"1\","
                        "uuid=\"GPU-sim-1\"} 1"));
}

}  // namespace
}  // namespace weft::server
