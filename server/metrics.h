// Prometheus metrics of the daemon.
//
// Metrics owns the metric families it creates in an injected
// prometheus::Registry (created by Daemon, or by a test that serializes it).
// Components report through the small methods below; nothing here reads
// global state. Device gauges are refreshed on each scrape through
// RefreshingCollectable, so they are never stale and no thread polls the
// devices.
//
// Catalogue (all names prefixed weft_):
//   weft_jobs_submitted_total                   counter
//   weft_jobs_rejected_total{code}              counter
//   weft_jobs_total{outcome}                    counter (succeeded|failed|cancelled)
//   weft_queue_depth                            gauge
//   weft_jobs_running                           gauge
//   weft_node_executions_total{op,device}       counter
//   weft_device_busy_streams{device,uuid}       gauge
//   weft_device_streams{device,uuid}            gauge
//   weft_device_memory_used_bytes{device,uuid}  gauge
//   weft_device_memory_capacity_bytes{device,uuid} gauge
//   weft_planning_seconds                       histogram
//   weft_queue_wait_seconds                     histogram
//   weft_job_duration_seconds                   histogram (start to end)
#ifndef WEFT_SERVER_METRICS_H_
#define WEFT_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace weft::server {

// One device's state as the gauges show it.
struct DeviceSample {
  int index = 0;
  std::string uuid;
  int streams_busy = 0;
  int streams_total = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
};

// Thread-safe (prometheus-cpp metrics are; families lock internally).
class Metrics {
 public:
  // `registry` is not owned and must outlive this object.
  explicit Metrics(prometheus::Registry* registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void JobSubmitted();
  // `code` is the canonical code name, e.g. "RESOURCE_EXHAUSTED".
  void JobRejected(absl::string_view code);
  // `outcome` is "succeeded", "failed" or "cancelled". `run_time` is the
  // time from start to end (zero for jobs that never started).
  void JobFinished(absl::string_view outcome, absl::Duration run_time);
  void SetQueueDepth(int64_t depth);
  void SetJobsRunning(int64_t running);
  void NodeExecuted(const std::string& op, int device);
  void ObservePlanning(absl::Duration d);
  void ObserveQueueWait(absl::Duration d);
  void SetDevices(const std::vector<DeviceSample>& devices);

 private:
  prometheus::Counter& jobs_submitted_;
  prometheus::Family<prometheus::Counter>& jobs_rejected_;
  prometheus::Family<prometheus::Counter>& jobs_total_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& jobs_running_;
  prometheus::Family<prometheus::Counter>& node_executions_;
  prometheus::Family<prometheus::Gauge>& device_busy_streams_;
  prometheus::Family<prometheus::Gauge>& device_streams_;
  prometheus::Family<prometheus::Gauge>& device_memory_used_;
  prometheus::Family<prometheus::Gauge>& device_memory_capacity_;
  prometheus::Histogram& planning_seconds_;
  prometheus::Histogram& queue_wait_seconds_;
  prometheus::Histogram& job_duration_seconds_;
};

// A Collectable that runs `refresh` before collecting `registry`, so that
// sampled gauges are current at scrape time. Register it with the exposer
// instead of the registry itself. Thread-safe if `refresh` is.
class RefreshingCollectable : public prometheus::Collectable {
 public:
  RefreshingCollectable(std::shared_ptr<prometheus::Registry> registry,
                        std::function<void()> refresh);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::function<void()> refresh_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_METRICS_H_
