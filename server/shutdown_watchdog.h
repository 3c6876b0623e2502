// ShutdownWatchdog: bounds how long a shutdown may take.
//
// Armed when weftd starts to shut down, it ends the process through
// `exit_now` when either comes first:
//   - the deadline (the drain timeout plus a short grace) passes while the
//     shutdown is still going, whatever is still running; or
//   - a second SIGTERM or SIGINT arrives (the operator insists).
// Disarm (or destruction) before then ends the watch without a word. The
// signals must be blocked in every thread (Daemon::BlockTerminationSignals),
// so that the watchdog's thread receives them.
#ifndef WEFT_SERVER_SHUTDOWN_WATCHDOG_H_
#define WEFT_SERVER_SHUTDOWN_WATCHDOG_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace weft::server {

class ShutdownWatchdog {
 public:
  // Why the process is ended: a human-readable line for the log.
  using ExitFn = std::function<void(const std::string& why)>;

  ShutdownWatchdog(absl::Time deadline, ExitFn exit_now);
  ~ShutdownWatchdog();  // disarms
  ShutdownWatchdog(const ShutdownWatchdog&) = delete;
  ShutdownWatchdog& operator=(const ShutdownWatchdog&) = delete;

  void Disarm();

 private:
  void Run(absl::Time deadline);

  const ExitFn exit_now_;
  absl::Notification disarmed_;
  std::thread thread_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_SHUTDOWN_WATCHDOG_H_
