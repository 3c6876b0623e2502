// The progress bar of `weftctl watch` and `weftctl submit --watch` on a
// terminal: one line, redrawn in place, with the nodes done out of the
// total, the elapsed time, the state (format.h's ProgressLine, fitted to the
// terminal's width) and a note beside it; other lines print above it. A
// thread redraws it a few times a second so that the elapsed time moves
// between the job's messages.
#ifndef WEFT_CLIENT_WEFTCTL_PROGRESS_H_
#define WEFT_CLIENT_WEFTCTL_PROGRESS_H_

#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

// A progress bar redrawn in place on a terminal: on every update and, for
// the elapsed time, a few times a second in between. Thread-safe.
class ProgressBar {
 public:
  ProgressBar() : ticker_([this] { Tick(); }) {}
  ~ProgressBar() { Finish(); }

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(const weft::v1::Job& job) ABSL_LOCKS_EXCLUDED(mu_);

  // Shows `note` after the bar (the latest loop iteration).
  void Note(std::string note) ABSL_LOCKS_EXCLUDED(mu_);

  // Prints `line` above the bar.
  void Print(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_);

  // Leaves the last state of the bar on its own line.
  void Finish() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::optional<weft::v1::Job> job_ ABSL_GUARDED_BY(mu_);
  std::string note_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;  // last: starts once the members above exist
};

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_PROGRESS_H_
