// JobEventLog: the node events of one job, numbered from 0 in the order
// they happened, of which only the most recent are kept: at most
// `capacity` while the job runs (so a job of many nodes or a long loop
// holds bounded memory), and fewer once it is over and nobody watches it
// (Trim). A watcher that has not read an event before it is dropped skips
// it, and is told how many it missed (JobWatch). Not thread-safe: the
// job's lock guards it (JobRecord::mu).
#ifndef WEFT_SERVER_JOB_EVENT_LOG_H_
#define WEFT_SERVER_JOB_EVENT_LOG_H_

#include <cstdint>
#include <deque>

#include "server/job_info.h"

namespace weft::server {

class JobEventLog {
 public:
  static constexpr int64_t kDefaultCapacity = 65536;

  // Keeps at most max(1, capacity) events.
  explicit JobEventLog(int64_t capacity = kDefaultCapacity);

  // Appends `event`, dropping the oldest kept one when full.
  void Add(NodeEventInfo event);
  // Keeps at most the last max(0, keep) events, now and from then on.
  void Trim(int64_t keep);

  // The number of the oldest event kept, and one past the newest: events
  // [begin(), end()) are kept, those before begin() were dropped.
  int64_t begin() const { return end_ - static_cast<int64_t>(events_.size()); }
  int64_t end() const { return end_; }
  // REQUIRES: begin() <= number < end().
  const NodeEventInfo& at(int64_t number) const {
    return events_[static_cast<size_t>(number - begin())];
  }
  int64_t capacity() const { return capacity_; }

 private:
  std::deque<NodeEventInfo> events_;
  int64_t end_ = 0;
  int64_t capacity_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_EVENT_LOG_H_
