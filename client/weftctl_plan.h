// `weftctl plan FILE`: asks weftd to plan a graph without running it and
// renders the Plan as an explained table, proto3 JSON, a trace-event
// timeline, Graphviz or SVG (plan_render.h), to stdout or --out. Takes the
// schedule flags of submit (weftctl_schedule_flags.h), so that a plan shows
// what the same submit would do.
#ifndef WEFT_CLIENT_WEFTCTL_PLAN_H_
#define WEFT_CLIENT_WEFTCTL_PLAN_H_

#include "client/weftctl_command.h"

namespace weft::client {

// weftctl plan FILE [--format=...] [--simulate] [--out=FILE] and the
// schedule flags.
int RunPlan(const CommandContext& context);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_PLAN_H_
