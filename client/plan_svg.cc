#include "client/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/format.h"
#include "client/plan_memory.h"

namespace weft::client {
namespace {

// Layout, in pixels.
constexpr double kLeft = 170;  // lane labels
constexpr double kRight = 24;  // room for the last tick label
constexpr double kLaneHeight = 16;
constexpr double kSlotHeight = 12;  // a node's rect inside its lane
constexpr double kDeviceHeading = 20;
constexpr double kAxisHeight = 24;
constexpr double kChartHeight = 110;
constexpr double kChartHeading = 22;
constexpr int kMaxLabelBytes = 24;

// Colours of ops by first appearance; later ops share kOtherColour.
constexpr const char* kPalette[] = {
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr const char* kOtherColour = "#bab0ac";

std::string Px(double v) { return absl::StrFormat("%.1f", v); }

double Time(double us) { return std::isfinite(us) && us > 0 ? us : 0; }

// At most kMaxLabelBytes bytes of `s`, not splitting a UTF-8 sequence.
std::string Shorten(const std::string& s) {
  if (s.size() <= kMaxLabelBytes) return s;
  size_t n = kMaxLabelBytes - 1;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "\xE2\x80\xA6";  // an ellipsis
}

// 1, 2 or 5 times a power of ten, giving about `count` ticks over `range`.
double TickStep(double range, int count) {
  const double raw = range / count;
  const double power = std::pow(10, std::floor(std::log10(raw)));
  const double m = raw / power;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * power;
}

std::string OpOf(const weft::v1::Node& node) {
  if (!node.op().empty()) return node.op();
  if (!node.kernel().kernel().empty()) {
    return absl::StrCat("kernel ", node.kernel().kernel());
  }
  if (node.has_while_loop()) return "while loop";
  if (node.has_case_of()) return "case";
  return "node";
}

// One lane: a stream of the plan, or a stream a node names that the plan
// does not list.
struct Lane {
  int device = 0;
  int id = 0;
  std::string label;
};

class SvgWriter {
 public:
  SvgWriter(const weft::v1::Plan& plan, const PlanSvgOptions& options)
      : plan_(plan),
        graph_(options.graph),
        width_(std::max(options.width, 400)),
        plot_width_(width_ - kLeft - kRight) {}

  std::string Write() {
    IndexNodes();
    Scale();
    std::string body;
    double y = 8;
    absl::StrAppend(
        &body, "<text class=\"title\" x=\"8\" y=\"", Px(y + 12), "\">",
        XmlEscape(absl::StrFormat(
            "plan: %d nodes, %d streams on %d devices, makespan %s, critical "
            "path %s, lower bound %s",
            plan_.nodes_size(), plan_.streams_size(), devices_.size(),
            Duration(plan_.estimated_makespan_us()),
            Duration(plan_.critical_path_us()),
            Duration(plan_.lower_bound_us()))),
        "</text>\n");
    y += 22;
    const double grid_top = y + kAxisHeight;
    Axis(&body, y, /*labels_above=*/true);
    y += kAxisHeight;
    // Drawn under the grid lines, which need the height of what follows.
    std::string rest;
    Lanes(&rest, &y);
    if (!plan_.memory().empty()) {
      y += 8;
      Charts(&rest, &y);
    }
    const double grid_bottom = y;
    Axis(&rest, y, /*labels_above=*/false);
    y += kAxisHeight + 6;
    Legend(&rest, &y);
    const double height = y + 8;
    for (int k = 0; k < NumTicks(); ++k) {
      const double x = X(k * tick_us_);
      absl::StrAppend(&body, "<line class=\"grid\" x1=\"", Px(x), "\" y1=\"",
                      Px(grid_top), "\" x2=\"", Px(x), "\" y2=\"",
                      Px(grid_bottom), "\"/>\n");
    }
    body += rest;

    std::string css =
        "text{font:11px sans-serif;fill:#333}"
        ".title{font-size:13px;font-weight:bold}"
        ".heading{font-weight:bold}"
        ".axis{stroke:#666;stroke-width:1}"
        ".grid{stroke:#e4e4e4;stroke-width:1}"
        ".lane{fill:#f6f6f6}"
        ".n{stroke:#fff;stroke-width:0.3}.n:hover{stroke:#000;stroke-width:1}"
        ".p{opacity:0.45}"
        ".area{fill:#4e79a7;fill-opacity:0.35;stroke:#4e79a7;stroke-width:1}"
        ".budget{stroke:#e15759;stroke-width:1.5;stroke-dasharray:6 4}"
        ".arena{stroke:#555;stroke-width:1;stroke-dasharray:2 3}"
        ".frame{fill:none;stroke:#ccc}";
    for (size_t c = 0; c < colours_.size(); ++c) {
      absl::StrAppend(&css, ".c", c, "{fill:", colours_[c], "}");
    }
    return absl::StrCat(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"",
        width_, "\" height=\"", std::ceil(height), "\" viewBox=\"0 0 ", width_,
        " ", std::ceil(height), "\">\n<style>", css,
        "</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n",
        body, "</svg>\n");
  }

 private:
  // Where a node is drawn.
  struct Placed {
    int lane = 0;
    int peer_lane = -1;
    double start = 0;
    double end = 0;
    std::string op;
    int colour = 0;
  };

  static std::string Duration(double us) {
    us = Time(us);
    if (us >= 1e6) return absl::StrFormat("%.3g s", us / 1e6);
    if (us >= 1e3) return absl::StrFormat("%.3g ms", us / 1e3);
    return absl::StrFormat("%.3g us", us);
  }

  double X(double us) const {
    return kLeft + Time(us) / span_us_ * plot_width_;
  }

  // Lanes, devices, colours and each node's lane and colour class.
  void IndexNodes() {
    absl::flat_hash_map<std::string, const weft::v1::Node*> graph_nodes;
    if (graph_ != nullptr) {
      for (const weft::v1::Node& n : graph_->nodes())
        graph_nodes[n.name()] = &n;
    }
    std::map<std::pair<int, int>, int> lane_of;  // (device, stream id)
    auto lane = [&](int device, int id, std::string label) {
      auto [it, inserted] =
          lane_of.emplace(std::make_pair(device, id), lanes_.size());
      if (inserted) lanes_.push_back({device, id, std::move(label)});
      return it->second;
    };
    for (const weft::v1::PlannedStream& s : plan_.streams()) {
      std::string label =
          absl::StrCat("s", s.id(), " ", weft::v1::Engine_Name(s.engine()));
      if (!s.label().empty()) absl::StrAppend(&label, " ", s.label());
      stream_lane_.push_back(lane(s.device(), s.id(), std::move(label)));
    }
    std::map<std::string, int> colour_of;
    for (const weft::v1::PlannedNode& n : plan_.nodes()) {
      Placed p;
      p.lane =
          n.stream() >= 0 && n.stream() < plan_.streams_size()
              ? stream_lane_[n.stream()]
              : lane(n.device(), n.stream(), absl::StrCat("s", n.stream()));
      if (n.has_peer_stream() && n.peer_stream() >= 0 &&
          n.peer_stream() < plan_.streams_size()) {
        p.peer_lane = stream_lane_[n.peer_stream()];
      }
      p.start = Time(n.estimated_start_us());
      p.end = std::max(p.start, Time(n.estimated_end_us()));
      auto it = graph_nodes.find(n.name());
      if (it != graph_nodes.end()) {
        p.op = OpOf(*it->second);
      } else {
        const int s = n.stream();
        p.op = weft::v1::Engine_Name(s >= 0 && s < plan_.streams_size()
                                         ? plan_.streams(s).engine()
                                         : weft::v1::COMPUTE);
      }
      auto [c, inserted] = colour_of.emplace(p.op, colours_.size());
      if (inserted) {
        if (colours_.size() < kPaletteSize) {
          colours_.push_back(kPalette[colours_.size()]);
          legend_.push_back(p.op);
        } else {
          if (other_colour_ < 0) {
            other_colour_ = colours_.size();
            colours_.push_back(kOtherColour);
            legend_.push_back("other");
          }
          c->second = other_colour_;
        }
      }
      p.colour = c->second;
      placed_.push_back(std::move(p));
    }
    for (const Lane& l : lanes_) devices_.insert(l.device);
    for (const weft::v1::DeviceMemory& m : plan_.memory()) {
      devices_.insert(m.device());
    }
    if (graph_ != nullptr) live_ = LiveBytesByDevice(plan_, *graph_);
  }

  void Scale() {
    span_us_ = Time(plan_.estimated_makespan_us());
    for (const Placed& p : placed_) span_us_ = std::max(span_us_, p.end);
    for (const DeviceLiveBytes& d : live_) {
      if (!d.samples.empty()) {
        span_us_ = std::max(span_us_, d.samples.back().time_us);
      }
    }
    if (!(span_us_ > 0)) span_us_ = 1;
    tick_us_ =
        TickStep(span_us_, std::max(2, static_cast<int>(plot_width_ / 110)));
  }

  // Ticks at 0, tick_us_, ... up to the span.
  int NumTicks() const {
    return static_cast<int>(std::floor(span_us_ / tick_us_ + 1e-9)) + 1;
  }

  void Axis(std::string* out, double y, bool labels_above) const {
    const double line_y = labels_above ? y + kAxisHeight - 4 : y + 4;
    absl::StrAppend(out, "<line class=\"axis\" x1=\"", Px(kLeft), "\" y1=\"",
                    Px(line_y), "\" x2=\"", Px(kLeft + plot_width_), "\" y2=\"",
                    Px(line_y), "\"/>\n");
    for (int k = 0; k < NumTicks(); ++k) {
      const double t = k * tick_us_;
      const double tick_end = labels_above ? line_y - 4 : line_y + 4;
      absl::StrAppend(out, "<line class=\"axis\" x1=\"", Px(X(t)), "\" y1=\"",
                      Px(line_y), "\" x2=\"", Px(X(t)), "\" y2=\"",
                      Px(tick_end), "\"/>\n");
      absl::StrAppend(out, "<text x=\"", Px(X(t)), "\" y=\"",
                      Px(labels_above ? line_y - 7 : line_y + 16),
                      "\" text-anchor=\"middle\">",
                      XmlEscape(TickLabel(t, tick_us_)), "</text>\n");
    }
  }

  void Lanes(std::string* out, double* y) {
    lane_y_.assign(lanes_.size(), 0);
    for (int device : devices_) {
      bool any = false;
      for (const Lane& l : lanes_) any = any || l.device == device;
      if (!any) continue;
      absl::StrAppend(out, "<text class=\"heading\" x=\"8\" y=\"", Px(*y + 14),
                      "\">GPU ", device, "</text>\n");
      *y += kDeviceHeading;
      for (size_t i = 0; i < lanes_.size(); ++i) {
        if (lanes_[i].device != device) continue;
        lane_y_[i] = *y;
        absl::StrAppend(out, "<rect class=\"lane\" x=\"", Px(kLeft), "\" y=\"",
                        Px(*y), "\" width=\"", Px(plot_width_), "\" height=\"",
                        Px(kLaneHeight), "\"/>\n");
        absl::StrAppend(out, "<text x=\"16\" y=\"", Px(*y + 12), "\">",
                        XmlEscape(Shorten(lanes_[i].label)), "</text>\n");
        *y += kLaneHeight;
      }
      *y += 4;
    }
    for (int i = 0; i < plan_.nodes_size(); ++i) {
      const Placed& p = placed_[i];
      const weft::v1::PlannedNode& n = plan_.nodes(i);
      std::string title =
          absl::StrCat(n.name(), " (", p.op, ")\nstream ", lanes_[p.lane].id,
                       " on GPU ", lanes_[p.lane].device, "\n",
                       absl::StrFormat("%.1f - %.1f us (%.1f us)", p.start,
                                       p.end, p.end - p.start));
      NodeRect(out, "n", p, p.lane, title);
      if (p.peer_lane >= 0) {
        NodeRect(out, "p", p, p.peer_lane,
                 absl::StrCat(title, "\npeer stream ", lanes_[p.peer_lane].id));
      }
    }
  }

  void NodeRect(std::string* out, absl::string_view kind, const Placed& p,
                int lane, const std::string& title) const {
    const double x = X(p.start);
    const double w = std::max(0.5, X(p.end) - x);
    absl::StrAppend(out, "<rect class=\"", kind, " c", p.colour, "\" x=\"",
                    Px(x), "\" y=\"",
                    Px(lane_y_[lane] + (kLaneHeight - kSlotHeight) / 2),
                    "\" width=\"", Px(w), "\" height=\"", Px(kSlotHeight),
                    "\"><title>", XmlEscape(title), "</title></rect>\n");
  }

  void Charts(std::string* out, double* y) const {
    for (const weft::v1::DeviceMemory& m : plan_.memory()) {
      const DeviceLiveBytes* live = nullptr;
      for (const DeviceLiveBytes& d : live_) {
        if (d.device == m.device()) live = &d;
      }
      std::string heading = absl::StrCat(
          "GPU ", m.device(), " memory: arena ",
          FormatBytes(std::max<int64_t>(m.arena_bytes(), 0)), ", peak live ",
          FormatBytes(std::max<int64_t>(m.peak_live_bytes(), 0)),
          ", lower bound ",
          FormatBytes(std::max<int64_t>(m.lower_bound_bytes(), 0)), ", budget ",
          m.budget_bytes() > 0 ? FormatBytes(m.budget_bytes()) : "none");
      if (live != nullptr && !live->samples.empty()) {
        absl::StrAppend(&heading, "; live over time, peak ",
                        FormatBytes(live->peak_bytes));
      } else if (graph_ == nullptr) {
        absl::StrAppend(&heading, "; live bytes need the graph");
      }
      absl::StrAppend(out, "<text class=\"heading\" x=\"8\" y=\"", Px(*y + 15),
                      "\">", XmlEscape(heading), "</text>\n");
      *y += kChartHeading;
      const double top = *y;
      const double base = top + kChartHeight;
      int64_t max_bytes =
          std::max<int64_t>({m.arena_bytes(), m.budget_bytes(), int64_t{1}});
      if (live != nullptr) max_bytes = std::max(max_bytes, live->peak_bytes);
      const double scale = kChartHeight / (1.05 * max_bytes);
      auto bytes_y = [&](int64_t bytes) {
        return base - std::max<int64_t>(bytes, 0) * scale;
      };
      absl::StrAppend(out, "<rect class=\"frame\" x=\"", Px(kLeft), "\" y=\"",
                      Px(top), "\" width=\"", Px(plot_width_), "\" height=\"",
                      Px(kChartHeight), "\"/>\n");
      absl::StrAppend(out, "<text x=\"", Px(kLeft - 6), "\" y=\"", Px(base),
                      "\" text-anchor=\"end\">0</text>\n");
      if (live != nullptr && !live->samples.empty()) {
        std::string path = absl::StrCat("M", Px(X(0)), ",", Px(base));
        for (const LiveSample& s : live->samples) {
          absl::StrAppend(&path, "H", Px(X(s.time_us)), "V",
                          Px(bytes_y(s.bytes)));
        }
        absl::StrAppend(&path, "V", Px(base), "Z");
        absl::StrAppend(out, "<path class=\"area\" d=\"", path, "\"/>\n");
      }
      auto level = [&](absl::string_view cls, int64_t bytes,
                       absl::string_view name) {
        const double ly = bytes_y(bytes);
        absl::StrAppend(out, "<line class=\"", cls, "\" x1=\"", Px(kLeft),
                        "\" y1=\"", Px(ly), "\" x2=\"", Px(kLeft + plot_width_),
                        "\" y2=\"", Px(ly), "\"/>\n");
        absl::StrAppend(out, "<text x=\"", Px(kLeft - 6), "\" y=\"", Px(ly + 4),
                        "\" text-anchor=\"end\">", name, " ",
                        XmlEscape(FormatBytes(bytes)), "</text>\n");
      };
      if (m.arena_bytes() > 0) level("arena", m.arena_bytes(), "arena");
      if (m.budget_bytes() > 0) level("budget", m.budget_bytes(), "budget");
      *y = base + 6;
    }
  }

  void Legend(std::string* out, double* y) const {
    double x = kLeft;
    for (size_t c = 0; c < legend_.size(); ++c) {
      const std::string label = Shorten(legend_[c]);
      const double w = 18 + 6.5 * label.size();
      if (x + w > width_ - kRight && x > kLeft) {
        x = kLeft;
        *y += 16;
      }
      absl::StrAppend(out, "<rect class=\"c", c, "\" x=\"", Px(x), "\" y=\"",
                      Px(*y), "\" width=\"12\" height=\"10\"/>\n");
      absl::StrAppend(out, "<text x=\"", Px(x + 16), "\" y=\"", Px(*y + 9),
                      "\">", XmlEscape(label), "</text>\n");
      x += w + 10;
    }
    if (!legend_.empty()) *y += 16;
  }

  const weft::v1::Plan& plan_;
  const weft::v1::Graph* graph_;
  const int width_;
  const double plot_width_;
  std::vector<Lane> lanes_;
  std::vector<int> stream_lane_;  // by index into Plan.streams
  std::vector<double> lane_y_;
  std::vector<Placed> placed_;  // by node
  std::set<int> devices_;
  std::vector<std::string> colours_;  // by colour class
  std::vector<std::string> legend_;   // by colour class
  int other_colour_ = -1;
  std::vector<DeviceLiveBytes> live_;
  double span_us_ = 1;
  double tick_us_ = 1;
};

}  // namespace

std::string XmlEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
      case '\n':
      case '\r':
        out.push_back(c);
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\xEF\xBF\xBD";
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string TickLabel(double us, double step_us) {
  if (step_us >= 1e6) return absl::StrFormat("%g s", us / 1e6);
  if (step_us >= 1e3) return absl::StrFormat("%g ms", us / 1e3);
  return absl::StrFormat("%g us", us);
}

std::string PlanSvg(const weft::v1::Plan& plan, const PlanSvgOptions& options) {
  return SvgWriter(plan, options).Write();
}

}  // namespace weft::client
