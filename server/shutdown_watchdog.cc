#include "server/shutdown_watchdog.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace weft::server {

ShutdownWatchdog::ShutdownWatchdog(absl::Time deadline, ExitFn exit_now)
    : exit_now_(std::move(exit_now)),
      thread_([this, deadline] { Run(deadline); }) {}

ShutdownWatchdog::~ShutdownWatchdog() {
  Disarm();
  if (thread_.joinable()) thread_.join();
}

void ShutdownWatchdog::Disarm() {
  if (!disarmed_.HasBeenNotified()) disarmed_.Notify();
}

void ShutdownWatchdog::Run(absl::Time deadline) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // Waits in short slices so that Disarm is noticed soon; this only runs
  // while the daemon shuts down.
  constexpr absl::Duration kSlice = absl::Milliseconds(20);
  while (!disarmed_.HasBeenNotified()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      exit_now_("the shutdown outlasted the drain timeout and its grace");
      return;
    }
    const timespec wait = absl::ToTimespec(std::min(kSlice, deadline - now));
    const int signal = sigtimedwait(&set, nullptr, &wait);
    if (signal > 0 && !disarmed_.HasBeenNotified()) {
      exit_now_(absl::StrCat("received a second ",
                             signal == SIGINT ? "SIGINT" : "SIGTERM"));
      return;
    }
  }
}

}  // namespace weft::server
