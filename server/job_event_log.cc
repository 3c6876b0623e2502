#include "server/job_event_log.h"

#include <algorithm>
#include <utility>

namespace weft::server {

JobEventLog::JobEventLog(int64_t capacity)
    : capacity_(std::max<int64_t>(capacity, 1)) {}

void JobEventLog::Add(NodeEventInfo event) {
  if (capacity_ == 0) {
    ++end_;
    return;
  }
  if (static_cast<int64_t>(events_.size()) >= capacity_) events_.pop_front();
  events_.push_back(std::move(event));
  ++end_;
}

void JobEventLog::Trim(int64_t keep) {
  capacity_ = std::min(capacity_, std::max<int64_t>(keep, 0));
  while (static_cast<int64_t>(events_.size()) > capacity_) events_.pop_front();
  if (events_.empty()) events_ = std::deque<NodeEventInfo>();  // frees blocks
}

}  // namespace weft::server
