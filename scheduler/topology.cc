#include "scheduler/topology.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace weft::scheduler {

Topology Topology::Default(int num_devices) {
  if (num_devices < 1) num_devices = 1;
  const int m = num_devices + 1;
  std::vector<double> gbps(m * m, kDefaultPeerGbps);
  for (int d = 0; d < m; ++d) {
    gbps[d * m + num_devices] = kDefaultHostGbps;
    gbps[num_devices * m + d] = kDefaultHostGbps;
  }
  gbps[num_devices * m + num_devices] = 0;  // host to host: never needed
  return Topology(num_devices, std::move(gbps));
}

absl::Status Topology::Validate(int num_devices,
                                const std::vector<double>& gbps) {
  const int m = num_devices + 1;
  for (int i = 0; i < m * m; ++i) {
    if (!std::isfinite(gbps[i]) || gbps[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology: bandwidth from ", i / m == num_devices ? -1 : i / m,
          " to ", i % m == num_devices ? -1 : i % m, " is ", gbps[i],
          "; bandwidths must be finite and not negative"));
    }
  }
  for (int d = 0; d < num_devices; ++d) {
    if (gbps[d * m + num_devices] <= 0 || gbps[num_devices * m + d] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology: device ", d,
          " has no link to and from the host (-1); every device needs one"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Topology> Topology::FromMatrix(
    std::vector<std::vector<double>> gbps) {
  const int m = static_cast<int>(gbps.size());
  if (m < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: the matrix needs at least 2 rows (a device and the host), "
        "got ",
        m));
  }
  std::vector<double> flat;
  flat.reserve(m * m);
  for (int r = 0; r < m; ++r) {
    if (static_cast<int>(gbps[r].size()) != m) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology: row ", r, " has ", gbps[r].size(),
                       " entries; the matrix must be ", m, " x ", m));
    }
    flat.insert(flat.end(), gbps[r].begin(), gbps[r].end());
  }
  absl::Status status = Validate(m - 1, flat);
  if (!status.ok()) return status;
  return Topology(m - 1, std::move(flat));
}

absl::StatusOr<Topology> Topology::FromCsv(absl::string_view csv,
                                           int num_devices) {
  if (num_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology: need at least one device, got ", num_devices));
  }
  const int m = num_devices + 1;
  std::vector<double> gbps(m * m, 0);
  int line_number = 0;
  bool seen_data = false;
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    int from = 0, to = 0;
    double value = 0;
    const bool numeric =
        fields.size() == 3 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &from) &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[1]), &to) &&
        absl::SimpleAtod(absl::StripAsciiWhitespace(fields[2]), &value);
    if (!numeric) {
      if (!seen_data && line_number == 1) continue;  // the header
      return absl::InvalidArgumentError(
          absl::StrCat("topology line ", line_number,
                       ": expected `From,To,GB/s` with "
                       "integer ids (-1 = host) and a number, got '",
                       line, "'"));
    }
    seen_data = true;
    if (from < -1 || to < -1 || !std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topology line ", line_number, ": '", line,
          "': ids must be -1 (host) or a device, bandwidths finite and not "
          "negative"));
    }
    if (from >= num_devices || to >= num_devices) continue;  // not present
    value = std::floor(value);
    const int f = from == kHost ? num_devices : from;
    const int t = to == kHost ? num_devices : to;
    gbps[f * m + t] = value;
    if (from == kHost || to == kHost) gbps[t * m + f] = value;
  }
  for (int i = 0; i < num_devices; ++i) {
    for (int j = i; j < num_devices; ++j) {
      const double mean = (gbps[i * m + j] + gbps[j * m + i]) / 2;
      gbps[i * m + j] = gbps[j * m + i] = mean;
    }
  }
  absl::Status status = Validate(num_devices, gbps);
  if (!status.ok()) return status;
  return Topology(num_devices, std::move(gbps));
}

absl::StatusOr<Topology> Topology::LoadCsvFile(const std::string& path,
                                               int num_devices) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("topology: cannot read '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Topology> topology = FromCsv(text.str(), num_devices);
  if (!topology.ok()) {
    return absl::Status(topology.status().code(),
                        absl::StrCat(path, ": ", topology.status().message()));
  }
  return topology;
}

std::vector<std::vector<double>> Topology::Matrix() const {
  const int m = num_devices_ + 1;
  std::vector<std::vector<double>> out(m, std::vector<double>(m));
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < m; ++c) out[r][c] = gbps_[r * m + c];
  }
  return out;
}

}  // namespace weft::scheduler
