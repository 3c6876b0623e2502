// JobWatch: one watcher's cursor over one job (JobManager::Watch).
//
// It yields the job, then its node events from the first and its state
// changes, until the job is terminal: the first Next returns the job at
// once with no events; later calls return the events the job's log still
// holds that this watch has not returned (JobEventLog: what it dropped is
// counted instead), then what happens from then on, at most `max_events`
// events each (the rest come with the next calls, which then do not
// block). A watch of a job that is over returns what its log kept. A watcher is
// either woken by a listener (SetListener: the service's callback API,
// nothing blocks) or blocks in Next with a deadline; one that only waits
// for the job's end sets a terminal listener (SetTerminalListener) instead.
// A watch keeps its job's event log alive, and may outlive the job's
// retention. Not thread-safe (one watcher uses it), except as SetListener,
// SetTerminalListener and Job say.
#ifndef WEFT_SERVER_JOB_WATCH_H_
#define WEFT_SERVER_JOB_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "server/job_info.h"

namespace weft::server {

struct JobRecord;  // job_record.h

// One step of a watch.
struct WatchUpdate {
  JobInfo job;                        // the job now
  std::vector<NodeEventInfo> events;  // node events since the last step
  // Events before `events` that the job's log dropped before this watch
  // read them.
  int64_t events_dropped = 0;
  bool changed = false;  // false: the deadline passed with nothing new
  bool done = false;     // the job is terminal and every event was returned
};

class JobWatch {
 public:
  explicit JobWatch(std::shared_ptr<JobRecord> job);
  ~JobWatch();
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

  // See the header comment; blocks until there is something new or
  // `deadline` (then `changed` is false).
  WatchUpdate Next(absl::Time deadline, int max_events = 4096);

  // Calls `on_change` after every change Next would report (node events, a
  // state change), until ClearListener or destruction; replaces an earlier
  // listener. It runs on the thread making the change while the job's lock
  // is held: it must be quick and must not call into any JobWatch or the
  // JobManager (hand the work to another thread). Changes before the call
  // are not announced; Next reports them. Set/ClearListener may run while
  // another thread is in Next.
  void SetListener(std::function<void()> on_change);
  // A one-shot listener of the job's end: calls `on_terminal` once, with the
  // job as it ended, when the job reaches a terminal state (unless
  // ClearListener or destruction come first). It runs as SetListener's
  // listener does (on the thread ending the job, under the job's lock: it
  // must be quick and must not call into any JobWatch or the JobManager),
  // and replaces an earlier listener. When the job is terminal already,
  // sets nothing and returns the job instead; `on_terminal` never runs.
  std::optional<JobInfo> SetTerminalListener(
      std::function<void(const JobInfo&)> on_terminal);
  // After it returns, the listener is not running and will not run again.
  void ClearListener();

  // The job now. May run while another thread uses the watch.
  JobInfo Job() const;

 private:
  const std::shared_ptr<JobRecord> job_;
  // Read by other threads under the job's lock (JobRecord::listeners).
  std::function<void()> listener_;
  bool first_ = true;
  int64_t seen_version_ = -1;
  int64_t next_event_ = 0;  // the number of the next event to return
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_WATCH_H_
