#include "client/weftctl_plan.h"

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/graph_file.h"
#include "client/plan_render.h"
#include "client/weftctl_schedule_flags.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

int RunPlan(const CommandContext& context) {
  const CliArgs& args = context.args;
  absl::StatusOr<weft::v1::ScheduleOptions> options =
      ScheduleOptionsFromFlags(args);
  if (!options.ok())
    return ReportUsage(std::string(options.status().message()));
  PlanFormat format = context.json ? PlanFormat::kJson : PlanFormat::kTable;
  if (std::optional<std::string> name = args.String("format")) {
    absl::StatusOr<PlanFormat> parsed = ParsePlanFormat(*name);
    if (!parsed.ok())
      return ReportUsage(std::string(parsed.status().message()));
    if (context.json && *parsed != PlanFormat::kJson) {
      return ReportUsage(
          absl::StrCat("--json conflicts with --format=", *name));
    }
    format = *parsed;
  }
  PlanRenderOptions render;
  render.simulate = args.Bool("simulate");
  absl::StatusOr<weft::v1::Graph> graph = LoadGraphFile(context.Arg(0));
  if (!graph.ok()) return ReportError(graph.status());
  absl::StatusOr<weft::v1::Plan> plan = context.client->Plan(*graph, *options);
  if (!plan.ok()) return ReportError(plan.status());
  render.graph = &*graph;
  return WriteOutput(args, RenderPlan(*plan, format, render));
}

}  // namespace weft::client
