#include "client/weftctl_daemon.h"

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/format.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

int RunDevices(const CommandContext& context) {
  absl::StatusOr<std::vector<weft::v1::Device>> devices =
      context.client->Devices();
  if (!devices.ok()) return ReportError(devices.status());
  if (context.json) {
    weft::v1::ListDevicesResponse response;
    for (const weft::v1::Device& d : *devices) *response.add_devices() = d;
    std::cout << ToJson(response) << std::endl;
  } else {
    std::cout << DevicesTable(*devices) << std::flush;
  }
  return 0;
}

int RunHealth(const CommandContext& context) {
  const std::string service = context.args.String("service").value_or("");
  absl::StatusOr<std::string> status = context.client->Health(service);
  if (!status.ok()) return ReportError(status.status());
  if (context.json) {
    std::cout << "{\"status\":\"" << *status << "\"}" << std::endl;
  } else {
    std::cout << *status << std::endl;
  }
  return *status == "SERVING" ? 0 : 1;
}

}  // namespace weft::client
