// The simulated machine executor tests run jobs on (sim_machine_test_util.h).
#include "runtime/sim_machine_test_util.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"
#include "scheduler/topology.h"

namespace weft::runtime::executor_testing {

SimMachine::SimMachine(int num_devices) {
  const scheduler::Topology topology =
      scheduler::Topology::Default(num_devices);
  SimBackend::Options sim_options;
  sim_options.num_devices = num_devices;
  sim_options.bandwidth_gbps = topology.Matrix();
  sim_options.time_scale = 0;
  sim_options.memory_bytes = uint64_t{4} << 30;
  sim_ = SimBackend::Create(sim_options).value();
  Executor::Options options;
  options.backend = sim_.get();
  executor_ = Executor::Create(options).value();
}

SimMachine::~SimMachine() {
  executor_.reset();
  sim_.reset();
}

void SimMachine::Run(std::shared_ptr<const scheduler::Graph> graph,
                     std::shared_ptr<const scheduler::Plan> plan,
                     Outcome& outcome, JobOptions options) {
  ASSERT_TRUE(executor_
                  ->Start(std::move(graph), std::move(plan),
                          outcome.Callbacks(/*traced=*/true), options)
                  .ok());
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
}

}  // namespace weft::runtime::executor_testing
