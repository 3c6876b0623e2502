#include "server/metrics.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
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

TEST(MetricsTest, SeriesExistFromTheStart) {
  prometheus::Registry registry;
  Metrics metrics(&registry);
  std::string text = Scrape(registry);
  for (const char* outcome : {"succeeded", "failed", "cancelled"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("weft_jobs_total{outcome=\"",
                                             outcome, "\",tenant=\"\"} 0")));
    EXPECT_THAT(text, HasSubstr(absl::StrCat(
                          "weft_job_duration_seconds_count{outcome=\"", outcome,
                          "\"} 0")));
  }
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_queue_depth 0"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_running 0"));
  for (const char* direction :
       {"host_to_device", "device_to_host", "device_to_device"}) {
    EXPECT_THAT(text,
                HasSubstr(absl::StrCat("weft_copy_bytes_total{direction=\"",
                                       direction, "\"} 0")));
  }
  EXPECT_THAT(text, HasSubstr("# TYPE weft_planning_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("# TYPE weft_queue_wait_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("# TYPE weft_job_duration_seconds histogram"));
}

TEST(MetricsTest, CountsJobsByOutcomeAndTenant) {
  prometheus::Registry registry;
  Metrics metrics(&registry);
  metrics.JobSubmitted("alice");
  metrics.JobSubmitted("alice");
  metrics.JobSubmitted("");
  metrics.JobRejected("RESOURCE_EXHAUSTED", "bob");
  metrics.JobFinished("succeeded", "alice", absl::Milliseconds(20));
  metrics.JobFinished("failed", "alice", absl::Milliseconds(5));
  metrics.JobFinished("succeeded", "", absl::Milliseconds(30));
  metrics.JobFinished("cancelled", "bob", absl::ZeroDuration());
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"alice\"} 2"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_rejected_total{code=\"RESOURCE_"
                              "EXHAUSTED\",tenant=\"bob\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant=\"alice\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_jobs_total{outcome=\"failed\",tenant=\"alice\"} 1"));
  EXPECT_THAT(
      text, HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant=\"\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_jobs_total{outcome=\"cancelled\",tenant=\"bob\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_job_duration_seconds_count{outcome=\"succeeded\"} 2"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_job_duration_seconds_sum{outcome=\"succeeded\"} 0.05"));
  EXPECT_THAT(
      text, HasSubstr("weft_job_duration_seconds_count{outcome=\"failed\"} 1"));
}

TEST(MetricsTest, TenantLabelsAreCapped) {
  prometheus::Registry registry;
  Metrics::Options options;
  options.max_tenant_labels = 2;
  Metrics metrics(&registry, options);
  for (const char* tenant : {"t1", "t2", "t3", "t4", "t1"}) {
    metrics.JobSubmitted(tenant);
  }
  metrics.JobFinished("succeeded", "t1", absl::Seconds(1));
  metrics.JobFinished("succeeded", "t1", absl::Seconds(1));
  metrics.JobFinished("failed", "t1", absl::Seconds(1));
  metrics.JobFinished("succeeded", "t4", absl::Seconds(1));
  metrics.JobRejected("RESOURCE_EXHAUSTED", "t3");
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant="
                              "\"t1\"} 2"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"failed\",tenant="
                              "\"t1\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_total{outcome=\"succeeded\",tenant="
                              "\"_other\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_rejected_total{code=\"RESOURCE_"
                              "EXHAUSTED\",tenant=\"_other\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_job_duration_seconds_count{outcome="
                              "\"succeeded\"} 3"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"t1\"} 2"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_submitted_total{tenant=\"t2\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("weft_jobs_submitted_total{tenant=\"_other\"} 2"));
  EXPECT_THAT(text, Not(HasSubstr("tenant=\"t3\"")));
}

TEST(MetricsTest, NodesCopiesHistogramsAndGauges) {
  prometheus::Registry registry;
  Metrics::Options options;
  options.device_uuids = {"GPU-aaaa", "GPU-bbbb"};
  Metrics metrics(&registry, options);
  metrics.SetQueueDepth(7);
  metrics.SetJobsRunning(3);
  metrics.NodeExecuted("axpy", 1);
  metrics.NodeExecuted("axpy", 1);
  metrics.NodeExecuted("spin", 0);
  metrics.BytesCopied(CopyDirection::kHostToDevice, 4096);
  metrics.BytesCopied(CopyDirection::kHostToDevice, 4);
  metrics.BytesCopied(CopyDirection::kDeviceToDevice, 64);
  metrics.ObservePlanning(absl::Microseconds(50));
  metrics.ObserveQueueWait(absl::Milliseconds(3));
  metrics.ObserveQueueWait(absl::Milliseconds(1));
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("weft_queue_depth 7"));
  EXPECT_THAT(text, HasSubstr("weft_jobs_running 3"));
  EXPECT_THAT(text, HasSubstr("weft_node_executions_total{UUID=\"GPU-bbbb\","
                              "device=\"1\",op=\"axpy\"} 2"));
  EXPECT_THAT(text, HasSubstr("weft_node_executions_total{UUID=\"GPU-aaaa\","
                              "device=\"0\",op=\"spin\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_copy_bytes_total{direction=\"host_to_device\"} 4100"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_copy_bytes_total{direction=\"device_to_device\"} 64"));
  EXPECT_THAT(
      text, HasSubstr("weft_copy_bytes_total{direction=\"device_to_host\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_planning_seconds_count 1"));
  // 50 us falls in the bucket bounded by 6.4e-05 (1e-5 * 4^k), not below.
  EXPECT_THAT(text, HasSubstr("weft_planning_seconds_bucket{le=\"4e-05\"} 0"));
  EXPECT_THAT(text,
              HasSubstr("weft_planning_seconds_bucket{le=\"0.00016\"} 1"));
  EXPECT_THAT(text, HasSubstr("weft_queue_wait_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("weft_queue_wait_seconds_sum 0.004"));
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
    d.memory_arena_bytes = 768;
    d.memory_reserved_bytes = 2048;
    d.memory_total_bytes = 4096;
    metrics.SetDevices({d});
  });
  EXPECT_THAT(Scrape(registry.operator*()),
              Not(HasSubstr("weft_device_streams{")));
  busy = 3;
  std::string text = Scrape(collectable);
  EXPECT_THAT(
      text,
      HasSubstr("weft_device_busy_streams{UUID=\"GPU-sim-1\",device=\"1\"} 3"));
  EXPECT_THAT(
      text,
      HasSubstr("weft_device_streams{UUID=\"GPU-sim-1\",device=\"1\"} 4"));
  EXPECT_THAT(text,
              HasSubstr("weft_device_memory_used_bytes{UUID=\"GPU-sim-1\","
                        "device=\"1\"} 1024"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_capacity_bytes{UUID=\"GPU-"
                              "sim-1\",device=\"1\"} 4096"));
  EXPECT_THAT(text, HasSubstr("weft_device_arena_bytes{UUID=\"GPU-sim-1\","
                              "device=\"1\"} 768"));
  EXPECT_THAT(text,
              HasSubstr("weft_device_memory_reserved_bytes{UUID=\"GPU-sim-1\","
                        "device=\"1\"} 2048"));
  busy = 1;
  EXPECT_THAT(Scrape(collectable),
              HasSubstr("weft_device_busy_streams{UUID=\"GPU-sim-1\","
                        "device=\"1\"} 1"));
}

TEST(MetricsTest, MemoryPoolSeriesFollowTheSampledTotals) {
  auto registry = std::make_shared<prometheus::Registry>();
  Metrics metrics(registry.get());
  DeviceSample d;
  d.index = 0;
  d.uuid = "GPU-sim-0";
  d.memory_used_bytes = 0;
  d.memory_cached_bytes = 8192;
  d.memory_allocations = 5;
  d.memory_pool_hits = 40;
  metrics.SetDevices({d});
  std::string text = Scrape(*registry);
  EXPECT_THAT(text, HasSubstr("weft_device_memory_used_bytes{UUID=\"GPU-"
                              "sim-0\",device=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_cached_bytes{UUID=\"GPU-sim-"
                              "0\",device=\"0\"} 8192"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_allocations_total{UUID=\"GPU-"
                              "sim-0\",device=\"0\"} 5"));
  EXPECT_THAT(text, HasSubstr("weft_device_memory_pool_hits_total{UUID=\"GPU-"
                              "sim-0\",device=\"0\"} 40"));
  // Counters advance to each new total; a sample never takes them back.
  d.memory_pool_hits = 55;
  metrics.SetDevices({d});
  EXPECT_THAT(Scrape(*registry),
              HasSubstr("weft_device_memory_pool_hits_total{UUID=\"GPU-sim-0\","
                        "device=\"0\"} 55"));
  d.memory_pool_hits = 50;
  metrics.SetDevices({d});
  EXPECT_THAT(Scrape(*registry),
              HasSubstr("weft_device_memory_pool_hits_total{UUID=\"GPU-sim-0\","
                        "device=\"0\"} 55"));
}

TEST(MetricsTest, CountsPlanCacheLookupsByResult) {
  prometheus::Registry registry;
  Metrics metrics(&registry);
  metrics.PlanCacheLookup(true);
  metrics.PlanCacheLookup(false);
  metrics.PlanCacheLookup(true);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text,
              HasSubstr("weft_plan_cache_lookups_total{result=\"hit\"} 2"));
  EXPECT_THAT(text,
              HasSubstr("weft_plan_cache_lookups_total{result=\"miss\"} 1"));
}

TEST(MetricsOrOwnTest, CountsIntoTheGivenMetricsElseItsOwn) {
  prometheus::Registry registry;
  Metrics given(&registry);
  const MetricsOrOwn shared(&given);
  EXPECT_EQ(shared.get(), &given);
  shared->PlanCacheLookup(true);
  EXPECT_THAT(Scrape(registry),
              HasSubstr("weft_plan_cache_lookups_total{result=\"hit\"} 1"));
  const MetricsOrOwn own(nullptr);
  ASSERT_NE(own.get(), nullptr);
  own->PlanCacheLookup(true);  // counted where nobody scrapes
  EXPECT_THAT(Scrape(registry),
              HasSubstr("weft_plan_cache_lookups_total{result=\"hit\"} 1"));
}

}  // namespace
}  // namespace weft::server
