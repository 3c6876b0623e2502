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
  return {{"device", absl::StrCat(d.index)}, {"uuid", d.uuid}};
}

}  // namespace

Metrics::Metrics(prometheus::Registry* registry)
    : jobs_submitted_(BuildCounter()
                          .Name("weft_jobs_submitted_total")
                          .Help("Jobs accepted by SubmitGraph.")
                          .Register(*registry)
                          .Add({})),
      jobs_rejected_(BuildCounter()
                         .Name("weft_jobs_rejected_total")
                         .Help("Submissions rejected, by status code.")
                         .Register(*registry)),
      jobs_total_(BuildCounter()
                      .Name("weft_jobs_total")
                      .Help("Jobs that reached a terminal state, by outcome.")
                      .Register(*registry)),
      queue_depth_(BuildGauge()
                       .Name("weft_queue_depth")
                       .Help("Jobs waiting in the admission queue.")
                       .Register(*registry)
                       .Add({})),
      jobs_running_(BuildGauge()
                        .Name("weft_jobs_running")
                        .Help("Jobs being planned or running on devices.")
                        .Register(*registry)
                        .Add({})),
      node_executions_(BuildCounter()
                           .Name("weft_node_executions_total")
                           .Help("Nodes that finished, by op and device.")
                           .Register(*registry)),
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
                              .Help("Device memory allocated by weftd.")
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
      queue_wait_seconds_(BuildHistogram()
                              .Name("weft_queue_wait_seconds")
                              .Help("Time jobs spent queued before starting.")
                              .Register(*registry)
                              .Add({}, Exponential(1e-4, 4, 12))),
      job_duration_seconds_(BuildHistogram()
                                .Name("weft_job_duration_seconds")
                                .Help("Time from job start to job end.")
                                .Register(*registry)
                                .Add({}, Exponential(1e-3, 4, 12))) {
  // Outcomes exist from the start so that rates work from the first scrape.
  for (const char* outcome : {"succeeded", "failed", "cancelled"}) {
    jobs_total_.Add({{"outcome", outcome}});
  }
}

void Metrics::JobSubmitted() { jobs_submitted_.Increment(); }

void Metrics::JobRejected(absl::string_view code) {
  jobs_rejected_.Add({{"code", std::string(code)}}).Increment();
}

void Metrics::JobFinished(absl::string_view outcome,
                          absl::Duration run_time) {
  jobs_total_.Add({{"outcome", std::string(outcome)}}).Increment();
  job_duration_seconds_.Observe(absl::ToDoubleSeconds(run_time));
}

void Metrics::SetQueueDepth(int64_t depth) {
  queue_depth_.Set(static_cast<double>(depth));
}

void Metrics::SetJobsRunning(int64_t running) {
  jobs_running_.Set(static_cast<double>(running));
}

void Metrics::NodeExecuted(const std::string& op, int device) {
  node_executions_.Add({{"op", op}, {"device", absl::StrCat(device)}})
      .Increment();
}

void Metrics::ObservePlanning(absl::Duration d) {
  planning_seconds_.Observe(absl::ToDoubleSeconds(d));
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
