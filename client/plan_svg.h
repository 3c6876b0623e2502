// A plan as a self-contained SVG picture for `weftctl plan --format=svg`:
// a timeline and, below it, each device's memory over the same time axis.
//
//   - a lane per stream, grouped by device under a "GPU <n>" heading and
//     labelled "s<id> <ENGINE>[ <label>]", with a rect per node over its
//     estimated [start, end] (class "n"; a copy between devices also has a
//     rect of class "p" on its peer stream), coloured by op when the graph
//     is given and by engine otherwise, with the node's name, op, stream
//     and times as its <title> tooltip;
//   - a time axis with ticks in us, ms or s above the lanes and below the
//     charts, and a legend of the colours;
//   - per device in Plan.memory, an area chart of live bytes (plan_memory.h;
//     needs the graph) with a dashed budget line (class "budget") when
//     budget_bytes > 0, a dotted arena line (class "arena") and a heading
//     with the arena, peak live, lower bound and budget.
//
// All text from the plan or graph is escaped for XML. No scripts, no
// external references. Pure functions of their inputs.
#ifndef WEFT_CLIENT_PLAN_SVG_H_
#define WEFT_CLIENT_PLAN_SVG_H_

#include <string>

#include "absl/strings/string_view.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

struct PlanSvgOptions {
  // The graph the plan is of: node ops for colours and tooltips, buffer uses
  // for the live-bytes charts. Without it nodes are coloured by engine and
  // the charts show only their headings and lines.
  const weft::v1::Graph* graph = nullptr;
  // Of the whole picture, in pixels (at least 400).
  int width = 1200;
};

// The SVG document, ending with a newline.
std::string PlanSvg(const weft::v1::Plan& plan,
                    const PlanSvgOptions& options = {});

// `s` as XML character data or an attribute value: & < > " ' as entities,
// control characters XML 1.0 does not allow as U+FFFD.
std::string XmlEscape(absl::string_view s);

// A label for a time axis tick at `us` when ticks are `step_us` apart:
// "250 us", "1.5 ms", "2 s".
std::string TickLabel(double us, double step_us);

}  // namespace weft::client

#endif  // WEFT_CLIENT_PLAN_SVG_H_
