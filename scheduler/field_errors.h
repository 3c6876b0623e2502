// Errors of graph building that name the field at fault
// (`graph.nodes[3].while_loop.body[2].args[0]: why`), shared by the
// builders of graph_builder.h.
#ifndef WEFT_SCHEDULER_FIELD_ERRORS_H_
#define WEFT_SCHEDULER_FIELD_ERRORS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "scheduler/graph_builder.h"

namespace weft::scheduler {

// INVALID_ARGUMENT "`field`: `why`".
inline absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A name the graph defines or refers to: at most max_name_bytes. Says
// nothing of the name itself, which may be huge.
inline absl::Status CheckNameLength(absl::string_view field,
                                    absl::string_view name,
                                    const GraphLimits& limits) {
  if (static_cast<int64_t>(name.size()) <= limits.max_name_bytes) {
    return absl::OkStatus();
  }
  return Invalid(field, absl::StrCat(name.size(), " bytes exceed the limit of ",
                                     limits.max_name_bytes));
}

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_FIELD_ERRORS_H_
