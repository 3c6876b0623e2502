// A placement of a plan's buffer copies that leaves room for parallelism
// (spill_fitting.h uses it when it relaxes a fitted plan's orderings).
//
// Copies placed over each other must be ordered (arena_orderings.h), and
// a tight arena places each copy where memory was freed just before it:
// the orderings that placement needs then chain nodes that could have run
// side by side. This placement uses the whole budget instead. It walks a
// device's copies in issue order of first use, frees each copy once its
// last use is behind, and puts each copy where the memory it takes was
// freed longest ago (the least, over the range, of the issue position of
// the last use of what held it): with a budget above the plan's peak, a
// copy usually lands on memory whose holders ended far back, and the
// ordering it adds is one the plan already keeps. Issue order alone
// decides which copies may share: two copies share addresses only if
// every use of one comes before every use of the other in issue order.
//
// Pure functions.
#ifndef WEFT_SCHEDULER_SLACK_PLACEMENT_H_
#define WEFT_SCHEDULER_SLACK_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "scheduler/graph.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/plan.h"

namespace weft::scheduler {

// The offsets of the copies of `lt` (the lifetimes of `plan`, a plan of
// `graph` whose memory is planned: plan.buffers by copy) on each device
// with a budget (budgets[d] > 0) placed as above within that budget;
// other devices keep plan's places. Returns `plan` with those buffers and
// arena sizes, or nullopt when some copy finds no room within its budget
// (or the search for room has looked at 256 pieces of memory per copy in
// all, plus about a million: the cost stays linear in the copies).
std::optional<Plan> SlackPlacement(const Plan& plan,
                                   const memory::Lifetimes& lt,
                                   const std::vector<int64_t>& budgets);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_SLACK_PLACEMENT_H_
