// Control nodes the simulated device decides by itself
// (Backend::LaunchDeviceLoop and LaunchDeviceCase): the device, not the
// host, reads each loop's condition and each case's selector, as a CUDA
// graph's WHILE and SWITCH conditional nodes do.
//
// A launch holds the caller's stream behind a host gate and hands the
// control node to its body stream, which first waits for the caller's
// earlier work. A check runs on a device worker whenever the body stream
// has drained: it reads the condition or selector from device memory and
// either launches a body's device graph (StreamGraphRunner, so the body's
// kernels and copies keep the simulator's timing, occupancy and faults)
// followed by the next check, or ends: it records the iteration count or
// the branch taken and opens the gate, with the body's error, the bound's
// error or OK, and (unpaced) with the control node's device time as the
// gate's busy time, so the caller's stream resumes where it ended on the
// device clock. Nothing runs on the host per iteration.
//
// Thread-safe. A running control node is owned by its checks until it
// ends.
#ifndef WEFT_RUNTIME_SIM_SIM_DEVICE_CONTROL_H_
#define WEFT_RUNTIME_SIM_SIM_DEVICE_CONTROL_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "runtime/stream_graph_runner.h"

namespace weft::runtime {

class SimDeviceControl {
 public:
  // Reads `bytes` at `ptr` of device memory into `out`.
  using Reader =
      std::function<absl::Status(DevicePtr ptr, uint64_t bytes, char* out)>;

  // Not owned; outlive this and every control node launched.
  SimDeviceControl(Backend* backend, StreamGraphRunner* graphs, Reader read)
      : backend_(backend), graphs_(graphs), read_(std::move(read)) {}

  // Backend::LaunchDeviceLoop and LaunchDeviceCase for `stream` and
  // `body_stream`, streams of `device`, in error scope `scope`.
  absl::Status Launch(const DeviceLoop& loop, StreamHandle stream,
                      StreamHandle body_stream, int device, uint64_t scope);
  absl::Status Launch(const DeviceCase& choice, StreamHandle stream,
                      StreamHandle body_stream, int device, uint64_t scope);
  // A control node inside a device graph (StreamGraphRunner's
  // ControlLauncher): its bodies' instances are prepared already.
  absl::Status Launch(const DeviceGraphControl& control, StreamHandle stream,
                      StreamHandle body_stream, int device, uint64_t scope);

 private:
  Backend* const backend_;
  StreamGraphRunner* const graphs_;
  const Reader read_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_DEVICE_CONTROL_H_
