#include "server/metrics.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Exponential buckets: start, start*factor, ... (count of them).
Histogram::BucketBoundaries Exponential(double start, double factor,
                                        int count) {
  Histogram::BucketBoundaries b;
  double v = start;
  for (int i = 0; i < count; ++i) {
    b.push_back(v);
    v *= factor;
  }
  return b;
}

prometheus::Labels DeviceLabels(const DeviceSample& d) {
  return {{"device", absl::StrCat(d.index)}, {"UUID", d.uuid}};
}

constexpr const char* kOutcomes[] = {"succeeded", "failed", "cancelled"};

// Brings a counter fed from a sampled running total up to `total`.
void CatchUp(prometheus::Counter& counter, uint64_t total) {
  const double value = static_cast<double>(total);
  if (value > counter.Value()) counter.Increment(value - counter.Value());
}

}  // namespace

absl::string_view CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice:
      return "host_to_device";
    case CopyDirection::kDeviceToHost:
      return "device_to_host";
    case CopyDirection::kDeviceToDevice:
      return "device_to_device";
  }
  return "unknown";
}

Metrics::Metrics(prometheus::Registry* registry, Options options)
    : device_uuids_(std::move(options.device_uuids)),
      max_tenant_labels_(options.max_tenant_labels),
      duration_buckets_(Exponential(1e-3, 4, 12)),
      jobs_submitted_(BuildCounter()
                          .Name("weft_jobs_submitted_total")
                          .Help("Jobs accepted by SubmitGraph, by tenant.")
                          .Register(*registry)),
      jobs_rejected_(
          BuildCounter()
              .Name("weft_jobs_rejected_total")
              .Help("Submissions rejected at admission, by status code and "
                    "tenant.")
              .Register(*registry)),
      jobs_total_(BuildCounter()
                      .Name("weft_jobs_total")
                      .Help("Jobs that reached a terminal state, by outcome "
                            "and tenant.")
                      .Register(*registry)),
      queue_depth_(BuildGauge()
                       .Name("weft_queue_depth")
                       .Help("Jobs waiting in the admission queue.")
                       .Register(*registry)
                       .Add({})),
      jobs_running_(BuildGauge()
                        .Name("weft_jobs_running")
                        .Help("Jobs dispatched to the devices and not "
                              "finished.")
                        .Register(*registry)
                        .Add({})),
      retained_output_bytes_(BuildGauge()
                                 .Name("weft_retained_output_bytes")
                                 .Help("Bytes of output buffers held by "
                                       "finished jobs.")
                                 .Register(*registry)
                                 .Add({})),
      retained_trace_bytes_(BuildGauge()
                                .Name("weft_retained_trace_bytes")
                                .Help("Bytes of traces held by finished jobs "
                                      "(about).")
                                .Register(*registry)
                                .Add({})),
      node_executions_(BuildCounter()
                           .Name("weft_node_executions_total")
                           .Help("Nodes that finished, by op and device.")
                           .Register(*registry)),
      loop_iterations_(BuildCounter()
                           .Name("weft_loop_iterations_total")
                           .Help("Iterations begun by loops (while_loop "
                                 "nodes), nested loops included.")
                           .Register(*registry)
                           .Add({})),
      case_branches_(BuildCounter()
                         .Name("weft_case_branches_total")
                         .Help("Selectors read by case..of nodes (case_of), "
                               "whether or not they picked a branch.")
                         .Register(*registry)
                         .Add({})),
      copy_bytes_(BuildCounter()
                      .Name("weft_copy_bytes_total")
                      .Help("Bytes of copies issued to the devices, by "
                            "direction.")
                      .Register(*registry)),
      copy_host_to_device_(copy_bytes_.Add(
          {{"direction",
            std::string(CopyDirectionName(CopyDirection::kHostToDevice))}})),
      copy_device_to_host_(copy_bytes_.Add(
          {{"direction",
            std::string(CopyDirectionName(CopyDirection::kDeviceToHost))}})),
      copy_device_to_device_(copy_bytes_.Add(
          {{"direction",
            std::string(CopyDirectionName(CopyDirection::kDeviceToDevice))}})),
      device_busy_streams_(BuildGauge()
                               .Name("weft_device_busy_streams")
                               .Help("Streams with work in flight.")
                               .Register(*registry)),
      device_streams_(BuildGauge()
                          .Name("weft_device_streams")
                          .Help("Streams created on the device.")
                          .Register(*registry)),
      device_memory_used_(BuildGauge()
                              .Name("weft_device_memory_used_bytes")
                              .Help("Device memory held by jobs (memory "
                                    "pool blocks in use).")
                              .Register(*registry)),
      device_arena_(BuildGauge()
                        .Name("weft_device_arena_bytes")
                        .Help("Device memory of the arenas running jobs hold "
                              "(sized by their memory plans; within the "
                              "memory used).")
                        .Register(*registry)),
      device_reserved_(BuildGauge()
                           .Name("weft_device_memory_reserved_bytes")
                           .Help("Device memory running jobs were started "
                                 "against (their plans' arenas, or their "
                                 "buffers without a memory plan); a queued "
                                 "job starts once its own fits beside it.")
                           .Register(*registry)),
      device_memory_cached_(BuildGauge()
                                .Name("weft_device_memory_cached_bytes")
                                .Help("Freed device memory the memory pool "
                                      "keeps for reuse.")
                                .Register(*registry)),
      device_memory_allocations_(
          BuildCounter()
              .Name("weft_device_memory_allocations_total")
              .Help("Allocations from the device (memory pool misses).")
              .Register(*registry)),
      device_memory_pool_hits_(
          BuildCounter()
              .Name("weft_device_memory_pool_hits_total")
              .Help("Buffer allocations served from the memory pool's "
                    "cache.")
              .Register(*registry)),
      device_memory_capacity_(BuildGauge()
                                  .Name("weft_device_memory_capacity_bytes")
                                  .Help("Device memory capacity.")
                                  .Register(*registry)),
      planning_seconds_(BuildHistogram()
                            .Name("weft_planning_seconds")
                            .Help("Time to plan one job.")
                            .Register(*registry)
                            .Add({}, Exponential(1e-5, 4, 12))),
      plan_cache_lookups_(BuildCounter()
                              .Name("weft_plan_cache_lookups_total")
                              .Help("Submissions looked up in the plan cache, "
                                    "by result (hit: not planned again).")
                              .Register(*registry)),
      plan_cache_hits_(plan_cache_lookups_.Add({{"result", "hit"}})),
      plan_cache_misses_(plan_cache_lookups_.Add({{"result", "miss"}})),
      queue_wait_seconds_(BuildHistogram()
                              .Name("weft_queue_wait_seconds")
                              .Help("Time jobs spent queued before starting.")
                              .Register(*registry)
                              .Add({}, Exponential(1e-4, 4, 12))),
      job_duration_seconds_(BuildHistogram()
                                .Name("weft_job_duration_seconds")
                                .Help("Time from job start to job end, by "
                                      "outcome.")
                                .Register(*registry)) {
  // The untenanted series exist from the start so that rates work from the
  // first scrape.
  for (const char* outcome : kOutcomes) {
    jobs_total_.Add({{"outcome", outcome}, {"tenant", ""}});
    job_duration_seconds_.Add({{"outcome", outcome}}, duration_buckets_);
  }
  jobs_submitted_.Add({{"tenant", ""}});
}

std::string Metrics::TenantLabel(absl::string_view tenant) {
  absl::MutexLock lock(&mu_);
  return SeriesOf(tenant).label;
}

std::string Metrics::UuidOf(int device) const {
  if (device >= 0 && device < static_cast<int>(device_uuids_.size())) {
    return device_uuids_[device];
  }
  return "";
}

Metrics::TenantSeries& Metrics::SeriesOf(absl::string_view tenant) {
  const bool own = tenant.empty() || tenants_.contains(tenant) ||
                   static_cast<int>(tenants_.size()) < max_tenant_labels_;
  const absl::string_view label = own ? tenant : kOtherTenant;
  auto it = tenant_series_.find(label);
  if (it != tenant_series_.end()) return it->second;
  if (!tenant.empty() && own) tenants_.insert(std::string(tenant));
  TenantSeries& series = tenant_series_[label];
  series.label = std::string(label);
  return series;
}

void Metrics::JobSubmitted(absl::string_view tenant) {
  prometheus::Counter* counter;
  {
    absl::MutexLock lock(&mu_);
    TenantSeries& series = SeriesOf(tenant);
    if (series.submitted == nullptr) {
      series.submitted = &jobs_submitted_.Add({{"tenant", series.label}});
    }
    counter = series.submitted;
  }
  counter->Increment();
}

void Metrics::JobRejected(absl::string_view code, absl::string_view tenant) {
  jobs_rejected_
      .Add({{"code", std::string(code)}, {"tenant", TenantLabel(tenant)}})
      .Increment();
}

void Metrics::JobFinished(absl::string_view outcome, absl::string_view tenant,
                          absl::Duration run_time) {
  prometheus::Counter* counter;
  prometheus::Histogram* duration;
  {
    absl::MutexLock lock(&mu_);
    TenantSeries& series = SeriesOf(tenant);
    auto it = series.finished.find(outcome);
    if (it == series.finished.end()) {
      it = series.finished
               .emplace(std::string(outcome),
                        &jobs_total_.Add({{"outcome", std::string(outcome)},
                                          {"tenant", series.label}}))
               .first;
    }
    counter = it->second;
    auto d = durations_.find(outcome);
    if (d == durations_.end()) {
      d = durations_
              .emplace(
                  std::string(outcome),
                  &job_duration_seconds_.Add(
                      {{"outcome", std::string(outcome)}}, duration_buckets_))
              .first;
    }
    duration = d->second;
  }
  counter->Increment();
  duration->Observe(absl::ToDoubleSeconds(run_time));
}

void Metrics::SetRetainedOutputBytes(int64_t bytes) {
  retained_output_bytes_.Set(static_cast<double>(bytes));
}

void Metrics::SetRetainedTraceBytes(int64_t bytes) {
  retained_trace_bytes_.Set(static_cast<double>(bytes));
}

void Metrics::SetQueueDepth(int64_t depth) {
  queue_depth_.Set(static_cast<double>(depth));
}

void Metrics::SetJobsRunning(int64_t running) {
  jobs_running_.Set(static_cast<double>(running));
}

void Metrics::NodeExecuted(const std::string& op, int device) {
  prometheus::Counter* counter;
  {
    absl::MutexLock lock(&node_mu_);
    prometheus::Counter*& cached = node_counters_[std::make_pair(op, device)];
    if (cached == nullptr) {
      cached = &node_executions_.Add({{"op", op},
                                      {"device", absl::StrCat(device)},
                                      {"UUID", UuidOf(device)}});
    }
    counter = cached;
  }
  counter->Increment();
}

void Metrics::LoopIterations(int64_t n) {
  loop_iterations_.Increment(static_cast<double>(n));
}

void Metrics::CaseBranch() { case_branches_.Increment(); }

void Metrics::BytesCopied(CopyDirection direction, uint64_t bytes) {
  const double v = static_cast<double>(bytes);
  switch (direction) {
    case CopyDirection::kHostToDevice:
      copy_host_to_device_.Increment(v);
      return;
    case CopyDirection::kDeviceToHost:
      copy_device_to_host_.Increment(v);
      return;
    case CopyDirection::kDeviceToDevice:
      copy_device_to_device_.Increment(v);
      return;
  }
}

void Metrics::ObservePlanning(absl::Duration d) {
  planning_seconds_.Observe(absl::ToDoubleSeconds(d));
}

MetricsOrOwn::MetricsOrOwn(Metrics* given)
    : own_registry_(given == nullptr ? std::make_unique<prometheus::Registry>()
                                     : nullptr),
      own_metrics_(given == nullptr
                       ? std::make_unique<Metrics>(own_registry_.get())
                       : nullptr),
      metrics_(given != nullptr ? given : own_metrics_.get()) {}

void Metrics::PlanCacheLookup(bool hit) {
  (hit ? plan_cache_hits_ : plan_cache_misses_).Increment();
}

void Metrics::ObserveQueueWait(absl::Duration d) {
  queue_wait_seconds_.Observe(absl::ToDoubleSeconds(d));
}

void Metrics::SetDevices(const std::vector<DeviceSample>& devices) {
  for (const DeviceSample& d : devices) {
    prometheus::Labels labels = DeviceLabels(d);
    device_busy_streams_.Add(labels).Set(d.streams_busy);
    device_streams_.Add(labels).Set(d.streams_total);
    device_memory_used_.Add(labels).Set(
        static_cast<double>(d.memory_used_bytes));
    device_memory_capacity_.Add(labels).Set(
        static_cast<double>(d.memory_total_bytes));
    device_arena_.Add(labels).Set(static_cast<double>(d.memory_arena_bytes));
    device_reserved_.Add(labels).Set(
        static_cast<double>(d.memory_reserved_bytes));
    device_memory_cached_.Add(labels).Set(
        static_cast<double>(d.memory_cached_bytes));
    CatchUp(device_memory_allocations_.Add(labels), d.memory_allocations);
    CatchUp(device_memory_pool_hits_.Add(labels), d.memory_pool_hits);
  }
}

RefreshingCollectable::RefreshingCollectable(
    std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> refresh)
    : registry_(std::move(registry)), refresh_(std::move(refresh)) {}

std::vector<prometheus::MetricFamily> RefreshingCollectable::Collect() const {
  if (refresh_) refresh_();
  return registry_->Collect();
}

}  // namespace weft::server
