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
//   weft_jobs_submitted_total{tenant}                  counter
//   weft_jobs_rejected_total{code,tenant}              counter
//   weft_jobs_total{outcome,tenant}                    counter
//       outcome: succeeded|failed|cancelled (jobs that reached that state)
//   weft_queue_depth                                   gauge
//   weft_jobs_running                                  gauge
//   weft_retained_output_bytes                         gauge
//       bytes of output buffers held by finished jobs
//   weft_retained_trace_bytes                          gauge
//       bytes of traces held by finished jobs (about)
//   weft_node_executions_total{op,device,UUID}         counter
//   weft_copy_bytes_total{direction}                   counter
//       direction: host_to_device|device_to_host|device_to_device; bytes of
//       the copies issued to the backend (uploads, read-backs, coherence
//       copies between devices)
//   weft_device_busy_streams{device,UUID}              gauge
//   weft_device_streams{device,UUID}                   gauge
//   weft_device_memory_used_bytes{device,UUID}         gauge
//       device memory held by jobs (blocks of the memory pool in use)
//   weft_device_arena_bytes{device,UUID}               gauge
//   weft_device_memory_reserved_bytes{device,UUID}     gauge
//       planned arenas of running jobs (within memory used)
//   weft_device_memory_cached_bytes{device,UUID}       gauge
//       freed device memory the pool keeps for reuse
//   weft_device_memory_allocations_total{device,UUID}  counter
//       allocations from the device (memory pool misses)
//   weft_device_memory_pool_hits_total{device,UUID}    counter
//       buffer allocations served from the pool's cache
//   weft_device_memory_capacity_bytes{device,UUID}     gauge
//   weft_planning_seconds                              histogram
//   weft_plan_cache_lookups_total{result}              counter
//       result: hit|miss; submissions whose plan was kept from an earlier
//       submission of the graph (plan_cache.h), and those looked up and
//       planned
//   weft_queue_wait_seconds                            histogram
//   weft_job_duration_seconds{outcome}                 histogram (start to end)
//
// `UUID` is the GPU UUID ("GPU-..."), spelled as dcgm-exporter spells its
// label so that `* on(UUID) group_left ...` joins the two exporters; `device`
// is weftd's device index. Tenant ids come from clients, so at most
// `max_tenant_labels` distinct tenants get series of their own; later ones
// are counted under tenant="_other".
#ifndef WEFT_SERVER_METRICS_H_
#define WEFT_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
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
  // Planned arenas of running jobs (within memory_used_bytes).
  uint64_t memory_arena_bytes = 0;
  // What running jobs were started against (Device.memory_reserved_bytes).
  uint64_t memory_reserved_bytes = 0;
  // The device's memory pool; the two counts only ever grow.
  uint64_t memory_cached_bytes = 0;
  uint64_t memory_allocations = 0;
  uint64_t memory_pool_hits = 0;
};

enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice };

// The label value of a direction, e.g. "host_to_device".
absl::string_view CopyDirectionName(CopyDirection direction);

// Thread-safe (prometheus-cpp metrics are; families lock internally).
class Metrics {
 public:
  struct Options {
    // UUIDs by device index, for the UUID label of per-device series.
    std::vector<std::string> device_uuids;
    int max_tenant_labels = 64;
  };

  // The tenant label value beyond max_tenant_labels.
  static constexpr char kOtherTenant[] = "_other";

  // `registry` is not owned and must outlive this object.
  explicit Metrics(prometheus::Registry* registry)
      : Metrics(registry, Options()) {}
  Metrics(prometheus::Registry* registry, Options options);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void JobSubmitted(absl::string_view tenant) ABSL_LOCKS_EXCLUDED(mu_);
  // `code` is the canonical code name, e.g. "RESOURCE_EXHAUSTED".
  void JobRejected(absl::string_view code, absl::string_view tenant)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `outcome` is "succeeded", "failed" or "cancelled". `run_time` is the
  // time from start to end (zero for jobs that never started).
  void JobFinished(absl::string_view outcome, absl::string_view tenant,
                   absl::Duration run_time) ABSL_LOCKS_EXCLUDED(mu_);
  void SetQueueDepth(int64_t depth);
  void SetJobsRunning(int64_t running);
  void SetRetainedOutputBytes(int64_t bytes);
  void SetRetainedTraceBytes(int64_t bytes);
  void NodeExecuted(const std::string& op, int device);
  // A loop began an iteration; a case..of read its selector.
  void LoopIterations(int64_t n);
  void CaseBranch();
  void BytesCopied(CopyDirection direction, uint64_t bytes);
  void ObservePlanning(absl::Duration d);
  void PlanCacheLookup(bool hit);
  void ObserveQueueWait(absl::Duration d);
  void SetDevices(const std::vector<DeviceSample>& devices);

 private:
  // A tenant's series, found once per tenant label rather than by a label
  // set built and matched per job.
  struct TenantSeries {
    std::string label;  // the tenant, or kOtherTenant past the cap
    prometheus::Counter* submitted = nullptr;  // once a job was submitted
    // jobs_total_ by outcome.
    absl::flat_hash_map<std::string, prometheus::Counter*> finished;
  };

  // The label value for `tenant`, capped as described in the header.
  std::string TenantLabel(absl::string_view tenant) ABSL_LOCKS_EXCLUDED(mu_);
  // The series of `tenant`'s label value.
  TenantSeries& SeriesOf(absl::string_view tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string UuidOf(int device) const;

  // Constant after construction.
  const std::vector<std::string> device_uuids_;
  const int max_tenant_labels_;
  const prometheus::Histogram::BucketBoundaries duration_buckets_;
  prometheus::Family<prometheus::Counter>& jobs_submitted_;
  prometheus::Family<prometheus::Counter>& jobs_rejected_;
  prometheus::Family<prometheus::Counter>& jobs_total_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& jobs_running_;
  prometheus::Gauge& retained_output_bytes_;
  prometheus::Gauge& retained_trace_bytes_;
  prometheus::Family<prometheus::Counter>& node_executions_;
  prometheus::Counter& loop_iterations_;
  prometheus::Counter& case_branches_;
  prometheus::Family<prometheus::Counter>& copy_bytes_;
  prometheus::Counter& copy_host_to_device_;
  prometheus::Counter& copy_device_to_host_;
  prometheus::Counter& copy_device_to_device_;
  prometheus::Family<prometheus::Gauge>& device_busy_streams_;
  prometheus::Family<prometheus::Gauge>& device_streams_;
  prometheus::Family<prometheus::Gauge>& device_memory_used_;
  prometheus::Family<prometheus::Gauge>& device_arena_;
  prometheus::Family<prometheus::Gauge>& device_reserved_;
  prometheus::Family<prometheus::Gauge>& device_memory_cached_;
  prometheus::Family<prometheus::Counter>& device_memory_allocations_;
  prometheus::Family<prometheus::Counter>& device_memory_pool_hits_;
  prometheus::Family<prometheus::Gauge>& device_memory_capacity_;
  prometheus::Histogram& planning_seconds_;
  prometheus::Family<prometheus::Counter>& plan_cache_lookups_;
  prometheus::Counter& plan_cache_hits_;
  prometheus::Counter& plan_cache_misses_;
  prometheus::Histogram& queue_wait_seconds_;
  prometheus::Family<prometheus::Histogram>& job_duration_seconds_;

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> tenants_ ABSL_GUARDED_BY(mu_);
  // By tenant label value.
  absl::flat_hash_map<std::string, TenantSeries> tenant_series_
      ABSL_GUARDED_BY(mu_);
  // job_duration_seconds_ by outcome.
  absl::flat_hash_map<std::string, prometheus::Histogram*> durations_
      ABSL_GUARDED_BY(mu_);
  // node_executions_' counters by (op, device): a node's count is one
  // lookup, not a label set built and matched.
  absl::Mutex node_mu_;
  absl::flat_hash_map<std::pair<std::string, int>, prometheus::Counter*>
      node_counters_ ABSL_GUARDED_BY(node_mu_);
};

// The Metrics a component counts into: the one it was given, or, where it
// was given none (tests, embedders that export nothing), one of its own
// over a registry nobody exports, so that counting needs no null checks.
class MetricsOrOwn {
 public:
  explicit MetricsOrOwn(Metrics* given);
  Metrics* get() const { return metrics_; }
  Metrics* operator->() const { return metrics_; }

 private:
  std::unique_ptr<prometheus::Registry> own_registry_;
  std::unique_ptr<Metrics> own_metrics_;
  Metrics* const metrics_;  // never null
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
