#include "client/weftctl_progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/format.h"

namespace weft::client {
namespace {

// Columns of the terminal on stdout; 80 when unknown.
int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

}  // namespace

void ProgressBar::Update(const weft::v1::Job& job) {
  absl::MutexLock lock(&mu_);
  job_ = job;
  DrawLocked();
}

void ProgressBar::Note(std::string note) {
  absl::MutexLock lock(&mu_);
  note_ = std::move(note);
  DrawLocked();
}

void ProgressBar::Print(const std::string& line) {
  absl::MutexLock lock(&mu_);
  std::cout << "\r\x1b[K" << line << "\n";
  DrawLocked();
}

void ProgressBar::Finish() {
  {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    done_ = true;
    DrawLocked();
    std::cout << "\n" << std::flush;
  }
  ticker_.join();
}

void ProgressBar::DrawLocked() {
  if (!job_) return;
  const int width = TerminalWidth() - 1;
  std::string line = ProgressLine(*job_, JobElapsed(*job_, absl::Now()),
                                  note_.empty() ? width : width / 2);
  const int room = width - static_cast<int>(line.size()) - 2;
  if (!note_.empty() && room > 0) {
    absl::StrAppend(&line, "  ", note_.substr(0, room));
  }
  std::cout << "\r\x1b[K" << line << std::flush;
}

void ProgressBar::Tick() {
  absl::MutexLock lock(&mu_);
  while (!done_) {
    mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(200));
    if (!done_) DrawLocked();
  }
}

}  // namespace weft::client
