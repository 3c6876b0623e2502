#include "common/peak_resident.h"

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace weft {

uint64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmHWM:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    uint64_t kib = 0;
    if (absl::ConsumeSuffix(&rest, " kB") && absl::SimpleAtoi(rest, &kib)) {
      return kib << 10;
    }
  }
  return 0;
}

void ResetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

}  // namespace weft
