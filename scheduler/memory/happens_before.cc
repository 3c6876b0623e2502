#include "scheduler/memory/happens_before.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weft::scheduler::memory {
namespace {

// The current clock of every stream, as snapshot rows that are copied
// before they change (earlier nodes keep pointing at the old row).
class ClockBuilder {
 public:
  ClockBuilder(int width, std::vector<int32_t>* clocks)
      : width_(width), clocks_(clocks), current_(width, 0) {
    clocks_->assign(width, 0);  // snapshot 0: nothing known
  }

  int32_t current(int stream) const { return current_[stream]; }
  const int32_t* row(int32_t snapshot) const {
    return clocks_->data() + static_cast<size_t>(snapshot) * width_;
  }

  // Raises `stream`'s entries to `values` (an entry per stream; `skip` and
  // `stream` itself are left out) and entry `extra` to `extra_value`.
  void Join(int stream, const int32_t* values, int skip, int extra,
            int32_t extra_value) {
    const int32_t* cur = row(current_[stream]);
    bool raise = extra >= 0 && extra != stream && cur[extra] < extra_value;
    for (int t = 0; t < width_ && !raise && values != nullptr; ++t) {
      raise = t != stream && t != skip && values[t] > cur[t];
    }
    if (!raise) return;
    if (values != nullptr) {
      // `values` may point into clocks_, which CopyRow may move.
      scratch_.assign(values, values + width_);
      values = scratch_.data();
    }
    const int32_t fresh = CopyRow(current_[stream]);
    int32_t* out = clocks_->data() + static_cast<size_t>(fresh) * width_;
    if (values != nullptr) {
      for (int t = 0; t < width_; ++t) {
        if (t != stream && t != skip) out[t] = std::max(out[t], values[t]);
      }
    }
    if (extra >= 0 && extra != stream) {
      out[extra] = std::max(out[extra], extra_value);
    }
    current_[stream] = fresh;
  }

 private:
  int32_t CopyRow(int32_t snapshot) {
    const size_t from = static_cast<size_t>(snapshot) * width_;
    clocks_->resize(clocks_->size() + width_);
    std::copy_n(clocks_->data() + from, width_,
                clocks_->data() + clocks_->size() - width_);
    return static_cast<int32_t>(clocks_->size() / width_) - 1;
  }

  const int width_;
  std::vector<int32_t>* clocks_;
  std::vector<int32_t> current_;  // snapshot id by stream
  std::vector<int32_t> scratch_;
};

}  // namespace

absl::StatusOr<HappensBefore> HappensBefore::Build(
    const Plan& plan, absl::Span<const int32_t> uploads_per_device,
    absl::Span<const UploadWait> upload_waits) {
  HappensBefore hb;
  const int n = plan.num_nodes();
  const int num_streams = static_cast<int>(plan.streams.size());
  const int num_devices = static_cast<int>(uploads_per_device.size());
  hb.num_plan_streams_ = num_streams;
  hb.width_ = num_streams + num_devices;
  hb.stream_.resize(n);
  hb.seq_.resize(n);
  hb.snapshot_.resize(n);
  std::vector<int32_t> count(hb.width_, 0);
  std::vector<int32_t> event_position(plan.num_events, -1);
  ClockBuilder clocks(hb.width_, &hb.clocks_);
  size_t next_upload = 0;
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    const int s = pn.stream;
    if (s < 0 || s >= num_streams) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.nodes[", i, "].stream: ", s, " is not one of the ",
                       num_streams, " streams"));
    }
    const int p = pn.peer_stream;
    if (p >= num_streams || p == s || p < -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan.nodes[", i, "].peer_stream: ", p, " is not another stream"));
    }
    if (i < plan.waits.rows()) {
      for (const int32_t e : plan.Waits(i)) {
        if (e < 0 || e >= plan.num_events || event_position[e] < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("plan.nodes[", i, "].waits: event ", e,
                           " is not recorded by an earlier node"));
        }
        const int32_t j = event_position[e];
        const int32_t sj = hb.stream_[j];
        if (sj == s) continue;  // stream order covers it
        clocks.Join(s, clocks.row(hb.snapshot_[j]), sj, sj, hb.seq_[j]);
      }
    }
    if (p >= 0) {
      clocks.Join(s, clocks.row(clocks.current(p)), p, p, count[p]);
    }
    for (; next_upload < upload_waits.size() &&
           upload_waits[next_upload].position <= i;
         ++next_upload) {
      const UploadWait& w = upload_waits[next_upload];
      if (w.position < i || w.device < 0 || w.device >= num_devices ||
          w.seq < 1 || w.seq > uploads_per_device[w.device]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "upload_waits[", next_upload, "]: no upload ", w.seq, " of device ",
            w.device, " for position ", w.position));
      }
      clocks.Join(s, nullptr, -1, hb.num_plan_streams_ + w.device, w.seq);
    }
    hb.stream_[i] = s;
    hb.seq_[i] = ++count[s];
    hb.snapshot_[i] = clocks.current(s);
    if (pn.signal_event >= 0) {
      if (pn.signal_event >= plan.num_events) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.nodes[", i, "].signal_event: ", pn.signal_event,
                         " is not below num_events ", plan.num_events));
      }
      event_position[pn.signal_event] = i;
    }
    if (p >= 0) {
      clocks.Join(p, clocks.row(clocks.current(s)), s, s, hb.seq_[i]);
    }
  }
  if (next_upload != upload_waits.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload_waits[", next_upload, "]: position ",
        upload_waits[next_upload].position, " is not an issue position"));
  }
  return hb;
}

}  // namespace weft::scheduler::memory
