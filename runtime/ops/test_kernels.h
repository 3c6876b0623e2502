// Kernels for tests that need device work to stall or fail on cue: the
// built-in ops plus "block", which signals `started` and then waits until
// the test notifies `release`, and "boom", which fails with the status the
// test chose.
#ifndef WEFT_RUNTIME_OPS_TEST_KERNELS_H_
#define WEFT_RUNTIME_OPS_TEST_KERNELS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime/ops/cpu_kernels.h"

namespace weft::runtime {

struct BlockAndBoomKernels {
  explicit BlockAndBoomKernels(
      absl::Status boom = absl::InternalError("boom went off"))
      : table(CpuKernelTable::WithBuiltins()) {
    EXPECT_TRUE(table
                    .Register("block",
                              [this](absl::Span<const HostArg>) {
                                if (!started.HasBeenNotified()) {
                                  started.Notify();
                                }
                                release.WaitForNotification();
                                return absl::OkStatus();
                              })
                    .ok());
    EXPECT_TRUE(
        table
            .Register("boom", [boom = std::move(boom)](
                                  absl::Span<const HostArg>) { return boom; })
            .ok());
  }

  absl::Notification started;
  absl::Notification release;
  CpuKernelTable table;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_OPS_TEST_KERNELS_H_
