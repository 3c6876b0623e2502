// A simulated machine for executor tests: SimBackend devices linked as the
// planner's default topology has them (so a plan's estimate is what runs),
// with an unpaced clock and 4 GiB each, and an executor over them. Its
// devices' clocks carry on from one job to the next: a job that must be
// timed from 0 gets a machine of its own.
#ifndef WEFT_RUNTIME_SIM_MACHINE_TEST_UTIL_H_
#define WEFT_RUNTIME_SIM_MACHINE_TEST_UTIL_H_

#include <memory>

#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime::executor_testing {

class SimMachine {
 public:
  explicit SimMachine(int num_devices);
  ~SimMachine();  // the executor goes before the backend it drives

  SimMachine(const SimMachine&) = delete;
  SimMachine& operator=(const SimMachine&) = delete;

  // Runs `plan` of `graph` (traced) and waits for its end; a job that does
  // not start, end in time or succeed fails the test.
  void Run(std::shared_ptr<const scheduler::Graph> graph,
           std::shared_ptr<const scheduler::Plan> plan, Outcome& outcome,
           JobOptions options = {});

  SimBackend& sim() { return *sim_; }
  Executor& executor() { return *executor_; }

 private:
  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace weft::runtime::executor_testing

#endif  // WEFT_RUNTIME_SIM_MACHINE_TEST_UTIL_H_
