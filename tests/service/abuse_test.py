"""weftd against a hostile client: nothing a request does wedges the daemon,
starves another tenant, or holds CPU, memory or threads without bound.

Each case drives a live weftd (simulated GPUs) over gRPC and checks, beside
its own refusal or outcome, that another tenant's small job still finishes.
Measured figures (cancel latency, exit times, thread counts) are printed.
"""

import os
import signal
import time

import service_util as su
import harness

import grpc
from weft.v1 import weft_pb2

QUIET = "quiet"


def small_job_finishes(test, weftd, within=30):
    """Another tenant's one-node job is admitted and succeeds. It fills a
    tenth of a device, so it fits beside other tenants' small kernels (a
    kernel that fills the device waits for the device, as on a GPU)."""
    graph = su.spin_chain("bystander", 1, 100)
    graph.nodes[0].cost.occupancy = 0.1
    job = su.submit(weftd, graph, tenant=QUIET)
    done = su.wait_state(weftd, job.id, su.TERMINAL, timeout=within)
    test.assertEqual(done.state, weft_pb2.SUCCEEDED, done)


def proc_status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def parallel_spins(name, count, us, occupancy=0.0):
    """`count` independent spins, each over its own buffer."""
    graph = weft_pb2.Graph(name=name)
    for i in range(count):
        graph.buffers.add(name="b%d" % i, size_bytes=16)
        node = graph.nodes.add(name="s%d" % i, op="spin")
        node.args.add().buffer.CopyFrom(
            weft_pb2.BufferArg(name="b%d" % i, access=weft_pb2.READ_WRITE))
        node.cost.estimated_us = us
        if occupancy:
            node.cost.occupancy = occupancy
    return graph


class RefusalTest(harness.WeftdTestCase):
    """Requests that would cost without bound are refused, naming the field."""

    def invalid(self, call):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         caught.exception.details())
        return caught.exception.details()

    def test_a_spin_of_1e18_us_is_refused(self):
        details = self.invalid(
            lambda: su.submit(self.weftd, su.spin_chain("forever", 1, 1e18)))
        self.assertIn("graph.nodes[0].cost.estimated_us", details)
        self.assertIn("--max_node_cost_seconds", details)
        small_job_finishes(self, self.weftd)

    def test_an_empty_graph_is_refused(self):
        details = self.invalid(
            lambda: su.submit(self.weftd, weft_pb2.Graph(name="nothing")))
        self.assertIn("graph.nodes", details)

    def test_errors_quote_client_input_briefly(self):
        huge = "x" * (1 << 20)
        graph = su.spin_chain("g", 1, 10)
        graph.nodes[0].args[0].buffer.name = huge
        details = self.invalid(lambda: su.submit(self.weftd, graph))
        self.assertIn("graph.nodes[0].args[0].buffer.name", details)
        self.assertLess(len(details), 300)
        for call in (
                lambda: su.stub(self.weftd).GetJob(
                    weft_pb2.GetJobRequest(job_id=huge), timeout=10),
                lambda: su.stub(self.weftd).CancelJob(
                    weft_pb2.CancelJobRequest(job_id=huge), timeout=10)):
            with self.assertRaises(grpc.RpcError) as caught:
                call()
            self.assertLess(len(caught.exception.details()), 300)

    def test_unknown_enum_values_are_refused(self):
        for field, value in (("launch_mode", 9), ("device_policy", 99),
                             ("stream_mode", 7)):
            options = weft_pb2.ScheduleOptions()
            setattr(options, field, value)
            details = self.invalid(lambda: su.submit(
                self.weftd, su.spin_chain("g", 1, 10), options=options))
            self.assertIn("options." + field, details)


class CancelTest(harness.WeftdTestCase):
    """A running node stops when its job is cancelled; its streams come back."""

    def cancel_latency(self, graph):
        job = su.submit(self.weftd, graph, tenant="hostile")
        su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        time.sleep(0.3)
        start = time.monotonic()
        su.stub(self.weftd).CancelJob(weft_pb2.CancelJobRequest(job_id=job.id),
                                      timeout=30)
        done = su.wait_state(self.weftd, job.id, su.TERMINAL, timeout=30)
        latency = time.monotonic() - start
        self.assertEqual(done.state, weft_pb2.CANCELLED, done)
        return latency

    def test_cancel_during_a_long_node(self):
        latency = self.cancel_latency(su.spin_chain("long", 1, 20e6))
        print("cancel of a 20 s node after 0.3 s: ended in %.0f ms" % (latency * 1e3))
        self.assertLess(latency, 2.0)
        small_job_finishes(self, self.weftd)

    def test_cancel_frees_every_pinned_stream(self):
        # 64 parallel long spins hold 64 streams on both devices.
        latency = self.cancel_latency(parallel_spins("pin", 64, 20e6, 0.01))
        print("cancel of 64 pinned streams: ended in %.0f ms" % (latency * 1e3))
        self.assertLess(latency, 2.0)
        small_job_finishes(self, self.weftd)


class FloodTest(harness.WeftdTestCase):
    """A tenant flooding at the highest priority does not delay another's job."""
    EXTRA_FLAGS = ("--max_running_jobs=2",)

    def test_max_priority_flood_waits_its_turn(self):
        run_us = 200_000
        flood = [su.submit(self.weftd, su.spin_chain("flood%d" % i, 1, run_us),
                           tenant="flooder", priority=2**31 - 1)
                 for i in range(40)]
        su.wait_state(self.weftd, flood[0].id, (weft_pb2.RUNNING,))
        mine = su.submit(self.weftd, su.spin_chain("mine", 1, 1000), tenant=QUIET)
        done = su.wait_state(self.weftd, mine.id, su.TERMINAL, timeout=60)
        self.assertEqual(done.state, weft_pb2.SUCCEEDED, done)
        waited = (done.start_time.ToNanoseconds() - done.create_time.ToNanoseconds()) / 1e9
        print("quiet tenant's first job waited %.0f ms behind a 40-job flood "
              "(one flood job runs %.0f ms)" % (waited * 1e3, run_us / 1e3))
        # At most one flood job's run time (plus scheduling slack).
        self.assertLess(waited, run_us / 1e6 + 0.15)
        flooded = [su.get(self.weftd, j.id) for j in flood]
        self.assertGreater(sum(j.state == weft_pb2.QUEUED for j in flooded), 20)


class HogTest(harness.WeftdTestCase):
    """A tenant holding every slot it may with long jobs leaves one to others."""
    EXTRA_FLAGS = ("--max_running_jobs=16",)

    def test_sixteen_long_jobs_leave_a_slot(self):
        hog = [su.submit(self.weftd, parallel_spins("hog%d" % i, 1, 60e6, 0.01),
                         tenant="hog") for i in range(16)]
        harness.wait_until(
            lambda: sum(su.get(self.weftd, j.id).state == weft_pb2.RUNNING
                        for j in hog) == 15, 30, what="15 hog jobs running")
        start = time.monotonic()
        small_job_finishes(self, self.weftd, within=10)
        print("16 long jobs of one tenant: another tenant's job done in %.0f ms"
              % ((time.monotonic() - start) * 1e3))
        self.assertEqual(sum(su.get(self.weftd, j.id).state == weft_pb2.QUEUED
                             for j in hog), 1)


class ShutdownTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--drain_timeout=60s",)

    def test_a_second_sigterm_exits_at_once(self):
        job = su.submit(self.weftd, su.spin_chain("long", 1, 60e6))
        su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        self.weftd.signal(signal.SIGTERM)
        harness.wait_until(lambda: "draining" in self.weftd.stderr(), 10,
                           what="the drain to start")
        start = time.monotonic()
        self.weftd.signal(signal.SIGTERM)
        code = self.weftd.wait(10)
        elapsed = time.monotonic() - start
        print("second SIGTERM: exited %d after %.0f ms" % (code, elapsed * 1e3))
        self.assertEqual(code, 1)
        self.assertLess(elapsed, 5)
        self.assertIn("received a second SIGTERM", self.weftd.stderr())


class DrainDeadlineTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--drain_timeout=500ms", "--drain_grace=2s")

    def test_exit_is_bounded_by_the_drain_timeout_and_grace(self):
        jobs = [su.submit(self.weftd, su.spin_chain("long%d" % i, 1, 60e6),
                          tenant="t%d" % i) for i in range(4)]
        for job in jobs:
            su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        start = time.monotonic()
        self.weftd.signal(signal.SIGTERM)
        code = self.weftd.wait(30)
        elapsed = time.monotonic() - start
        print("SIGTERM with 4 running 60 s nodes: exited %d after %.0f ms "
              "(drain timeout 500 ms, grace 2 s)" % (code, elapsed * 1e3))
        # The cancelled work stops at once: a clean exit well within the
        # grace; the grace bounds it in any case.
        self.assertEqual(code, 0, self.weftd.stderr())
        self.assertLess(elapsed, 0.5 + 2 + 2)


def flat_graph(name, nodes):
    """`nodes` independent one-microsecond spins without buffers."""
    graph = weft_pb2.Graph(name=name)
    for i in range(nodes):
        node = graph.nodes.add(name="n%d" % i, op="spin")
        node.cost.estimated_us = 1
    return graph


class PlanGraphTest(harness.WeftdTestCase):
    """PlanGraph knows before planning whether its answer can be sent."""

    def test_a_2m_node_plan_is_refused_before_planning(self):
        pid = self.weftd.proc.pid
        small_job_finishes(self, self.weftd)
        rss0 = proc_status(pid, "VmRSS")
        graph = flat_graph("huge", 2_000_000)
        start = time.monotonic()
        with self.assertRaises(grpc.RpcError) as caught:
            su.stub(self.weftd).PlanGraph(weft_pb2.PlanGraphRequest(graph=graph),
                                          timeout=120)
        elapsed = time.monotonic() - start
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                         caught.exception.details())
        self.assertIn("graph.nodes", caught.exception.details())
        self.assertIn("--max_message_bytes", caught.exception.details())
        del graph
        small_job_finishes(self, self.weftd)
        # The daemon hands the request's memory back shortly after the call.
        deadline = time.monotonic() + 10
        rss1 = proc_status(pid, "VmRSS")
        while rss1 >= rss0 + 128 * 1024 and time.monotonic() < deadline:
            time.sleep(0.1)
            rss1 = proc_status(pid, "VmRSS")
        print("2M-node PlanGraph (%d MB request) refused after %.1f s; RSS %d -> %d "
              "MiB" % (57, elapsed, rss0 // 1024, rss1 // 1024))
        self.assertLess(rss1, rss0 + 128 * 1024)

    def test_a_plan_that_fits_is_answered(self):
        plan = su.stub(self.weftd).PlanGraph(
            weft_pb2.PlanGraphRequest(graph=flat_graph("fine", 1000)), timeout=60).plan
        self.assertEqual(len(plan.nodes), 1000)


class ThreadsTest(harness.WeftdTestCase):
    def test_threads_and_memory_return_to_baseline(self):
        pid = self.weftd.proc.pid
        small_job_finishes(self, self.weftd)
        threads0 = proc_status(pid, "Threads")
        rss0 = proc_status(pid, "VmRSS")
        # Many concurrent jobs and a burst of calls.
        jobs = [su.submit(self.weftd, parallel_spins("p%d" % i, 16, 20_000, 0.05),
                          tenant="t%d" % (i % 4)) for i in range(40)]
        for job in jobs:
            su.wait_state(self.weftd, job.id, su.TERMINAL, timeout=120)
        time.sleep(0.5)
        threads1 = proc_status(pid, "Threads")
        rss1 = proc_status(pid, "VmRSS")
        print("threads %d -> %d, RSS %d -> %d KiB after 40 jobs" %
              (threads0, threads1, rss0, rss1))
        self.assertLessEqual(threads1, threads0 + 4)
        self.assertLess(rss1, rss0 + 64 * 1024)


if __name__ == "__main__":
    harness.main("abuse_test")
