#include "client/weftctl_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/format.h"
#include "common/retry_info.h"

namespace weft::client {

int ReportUsage(const std::string& message) {
  std::cerr << "weftctl: " << message << "\n"
            << "Run 'weftctl --help' for usage." << std::endl;
  return 2;
}

int ReportError(const absl::Status& status) {
  std::cerr << "weftctl: " << StatusText(status, RetryDelayOf(status))
            << std::endl;
  return 1;
}

int WriteOutput(const CliArgs& args, const std::string& out) {
  if (std::optional<std::string> path = args.String("out")) {
    std::ofstream file(*path, std::ios::binary | std::ios::trunc);
    if (file) file.write(out.data(), out.size());
    if (!file) {
      return ReportError(absl::PermissionDeniedError(
          absl::StrCat("cannot write ", *path, ": ", std::strerror(errno))));
    }
    return 0;
  }
  std::cout.write(out.data(), out.size());
  std::cout.flush();
  return std::cout ? 0 : 1;
}

}  // namespace weft::client
