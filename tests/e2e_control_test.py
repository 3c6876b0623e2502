"""End-to-end tests of control nodes (while_loop, case_of) against weftd.

Conjugate gradient on a 256 x 256 system (examples/conjugate_gradient.json)
checked against a CPU solve, a case..of inside a loop, progress events and
metrics, cancellation mid-loop, and bad input refused with the field named.
"""

import copy
import json
import math
import os
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import example  # noqa: E402

import grpc  # noqa: E402

import weft_client  # noqa: E402
from weft_client import weft_pb2  # noqa: E402


def _floats(b64):
    import base64
    raw = base64.b64decode(b64)
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def _cpu_cg(a, b, tol, max_iterations):
    """Conjugate gradient in float64: (x, iterations until r.r <= tol^2)."""
    n = len(b)
    x = [0.0] * n
    r = list(b)
    p = list(r)
    rs = sum(v * v for v in r)
    iterations = 0
    while rs > tol * tol and iterations < max_iterations:
        q = [sum(a[i][j] * p[j] for j in range(n)) for i in range(n)]
        alpha = rs / sum(p[i] * q[i] for i in range(n))
        x = [x[i] + alpha * p[i] for i in range(n)]
        r = [r[i] - alpha * q[i] for i in range(n)]
        rs_next = sum(v * v for v in r)
        p = [r[i] + (rs_next / rs) * p[i] for i in range(n)]
        rs = rs_next
        iterations += 1
    return x, iterations


def _events(client, job_id):
    events = []
    for update in client.watch(job_id, timeout=60):
        events.extend(update.node_events)
    return events


def _halve_or_step_with_a_spin(name, buffer, access):
    """examples/halve_or_step.json with a 300 ms spin first that uses `buffer`."""
    with open(example("halve_or_step.json")) as f:
        graph = json.load(f)
    graph["nodes"].insert(0, {
        "name": name, "op": "spin",
        "args": [{"buffer": {"name": buffer, "access": access}}],
        "cost": {"estimatedUs": 300000}})
    return graph


class ControlTest(harness.WeftdTestCase):

    def setUp(self):
        super().setUp()
        self.client = weft_client.Client(self.weftd.addr, timeout=60)
        self.addCleanup(self.client.close)

    def test_conjugate_gradient_matches_a_cpu_solve(self):
        with open(example("conjugate_gradient.json")) as f:
            graph = json.load(f)
        buffers = {b["name"]: b for b in graph["buffers"]}
        n = 256
        flat = _floats(buffers["A"]["data"])
        a = [flat[i * n:(i + 1) * n] for i in range(n)]
        b = _floats(buffers["b"]["data"])
        loop = graph["nodes"][-1]["whileLoop"]
        tol = math.sqrt(loop["body"][-1]["args"][1]["f32"])

        # On the host: the first iteration, then (the later ones begun in
        # the completion callbacks) the latest one now and then and the
        # count, in increasing order.
        job = self.client.submit(graph, control_mode="host")
        events = _events(self.client, job.id)
        job = self.client.wait(job.id, timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        reported = [e.iteration for e in events
                    if e.kind == weft_pb2.NODE_ITERATION and e.node == "cg"]
        self.assertEqual(reported[0], 1, reported)
        self.assertEqual(reported, sorted(set(reported)))
        iterations = list(range(1, reported[-1] + 1))

        x = self.client.read_floats(job.id, "x")
        expected, cpu_iterations = _cpu_cg(a, b, tol, 500)
        # float32 on the device against float64 here: the same iteration
        # count give or take rounding, and the same solution.
        self.assertLessEqual(abs(len(iterations) - cpu_iterations), 2,
                             (len(iterations), cpu_iterations))
        self.assertGreater(len(iterations), 5)
        worst = max(abs(x[i] - expected[i]) for i in range(n))
        self.assertLess(worst, 1e-3 * max(abs(v) for v in expected), worst)
        residual = [sum(a[i][j] * x[j] for j in range(n)) - b[i] for i in range(n)]
        norm_b = math.sqrt(sum(v * v for v in b))
        self.assertLess(math.sqrt(sum(v * v for v in residual)) / norm_b, 1e-3)
        rs = self.client.read_floats(job.id, "rs")[0]
        self.assertLessEqual(rs, tol * tol)

        # Loops count in /metrics.
        with urllib.request.urlopen(self.weftd.metrics_url, timeout=10) as page:
            text = page.read().decode()
        counted = [line for line in text.splitlines()
                   if line.startswith("weft_loop_iterations_total")]
        self.assertEqual(counted, ["weft_loop_iterations_total %d" % len(iterations)])

    def test_case_of_inside_a_loop(self):
        x = 100.0
        branches = []
        for _ in range(20):
            big = x > 1.0
            branches.append(1 if big else 0)
            x = x * 0.5 if big else x + 1.0
            x = struct.unpack("f", struct.pack("f", x))[0]
        # Driven by the host: an event per iteration and per branch. A spin
        # the loop waits for (it holds x) keeps the loop from running before
        # the watch has begun, so its events arrive as they happen.
        job = self.client.submit(_halve_or_step_with_a_spin("first", "x", "READ_WRITE"),
                                 control_mode="host")
        events = _events(self.client, job.id)
        job = self.client.wait(job.id, timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        self.assertEqual(self.client.read_floats(job.id, "x"), [x])
        self.assertEqual(self.client.read_floats(job.id, "n"), [20.0])
        self.assertEqual([e.branch for e in events if e.kind == weft_pb2.NODE_BRANCH],
                         branches)
        self.assertEqual(len([e for e in events if e.kind == weft_pb2.NODE_ITERATION]),
                         20)
        # On the device, the case..of nested in the loop too (AUTO): the
        # same result, the loop's count and the branch taken last. A spin
        # beside the loop keeps the job running until the watch has begun
        # (its events then arrive as they happen).
        graph = _halve_or_step_with_a_spin("meanwhile", "one", "READ")
        for mode in ("auto", "device"):
            job = self.client.submit(graph, control_mode=mode)
            events = _events(self.client, job.id)
            job = self.client.wait(job.id, timeout=60)
            self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
            self.assertEqual(self.client.read_floats(job.id, "x"), [x])
            self.assertEqual([e.iteration for e in events
                              if e.kind == weft_pb2.NODE_ITERATION], [20], events)
            self.assertEqual([e.branch for e in events
                              if e.kind == weft_pb2.NODE_BRANCH], [branches[-1]])

    def test_weftctl_watch_shows_iterations(self):
        # A spin the loop waits for (it holds x) keeps the loop from running
        # before the watch has begun, so its events arrive as they happen.
        graph = _halve_or_step_with_a_spin("first", "x", "READ_WRITE")
        path = self.write_file("halve_or_step_after_a_spin.json", json.dumps(graph))
        out = self.weftctl_ok("submit", path, "--watch",
                              "--progress=lines", "--control_mode=host").stdout
        self.assertIn("walk: iteration 20", out)
        self.assertIn("move: branch 1", out)
        self.assertIn("SUCCEEDED", out)

    def test_cancel_stops_an_endless_loop(self):
        graph = {
            "name": "endless",
            "buffers": [{"name": "go", "sizeBytes": "4", "dtype": "INT32", "fill": 1}],
            "nodes": [{"name": "loop", "whileLoop": {
                "condition": "go", "maxIterations": 100000000,
                "body": [{"name": "work", "op": "spin",
                          "args": [{"buffer": {"name": "go", "access": "READ"}}],
                          "cost": {"estimatedUs": 1000}}]}}],
        }
        job = self.client.submit(graph)
        harness.wait_until(
            lambda: self.client.get(job.id).state == weft_pb2.RUNNING, 20,
            what="job running")
        time.sleep(0.2)
        start = time.monotonic()
        self.client.cancel(job.id)
        job = self.client.wait(job.id, timeout=20)
        self.assertEqual(job.state, weft_pb2.CANCELLED, job)
        self.assertLess(time.monotonic() - start, 5)
        # The daemon is free for the next job.
        done = self.client.wait(self.client.submit(example("halve_or_step.json")).id,
                                timeout=60)
        self.assertEqual(done.state, weft_pb2.SUCCEEDED, done)

    def test_loop_over_its_bound_fails_naming_it(self):
        with open(example("halve_or_step.json")) as f:
            graph = json.load(f)
        graph["nodes"][0]["whileLoop"]["maxIterations"] = 7
        job = self.client.wait(self.client.submit(graph).id, timeout=60)
        self.assertEqual(job.state, weft_pb2.FAILED, job)
        self.assertIn("loop 'walk' would exceed max_iterations 7", job.error.message)
        self.assertEqual(job.error.node, "walk")

    def test_bad_control_nodes_are_refused_with_the_field(self):
        with open(example("halve_or_step.json")) as f:
            base = json.load(f)

        def mutated(fn):
            g = copy.deepcopy(base)
            fn(g)
            return g

        loop = lambda g: g["nodes"][0]["whileLoop"]  # noqa: E731
        case = lambda g: loop(g)["body"][1]["caseOf"]  # noqa: E731
        cases = {
            "unknown condition": (
                lambda g: loop(g).update(condition="nope"),
                "graph.nodes[0].while_loop.condition: unknown buffer 'nope'"),
            "zero iterations": (
                lambda g: loop(g).pop("maxIterations"),
                "graph.nodes[0].while_loop.max_iterations: required and > 0"),
            "empty body": (
                lambda g: loop(g).update(body=[]),
                "graph.nodes[0].while_loop.body: empty"),
            "float selector": (
                lambda g: case(g).update(selector="x"),
                "graph.nodes[0].while_loop.body[1].case_of.selector: selector 'x' "
                "is FLOAT32"),
            "unknown buffer in a branch": (
                lambda g: case(g)["branches"][1]["nodes"][0]["args"][1]["buffer"]
                .update(name="ghost"),
                "graph.nodes[0].while_loop.body[1].case_of.branches[1].nodes[0]"
                ".args[1].buffer.name: unknown buffer 'ghost'"),
            "op on a control node": (
                lambda g: g["nodes"][0].update(op="spin"),
                "graph.nodes[0].op: a control node"),
        }
        for name, (fn, message) in cases.items():
            with self.subTest(name):
                with self.assertRaises(grpc.RpcError) as raised:
                    self.client.submit(mutated(fn))
                self.assertEqual(raised.exception.code(),
                                 grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(message, raised.exception.details())

    def test_conjugate_gradient_on_the_device(self):
        # The simulated devices evaluate the condition themselves: one
        # iteration event with the count, the same answer as on the host.
        host = self.client.submit(example("conjugate_gradient.json"),
                                  control_mode="host")
        host_events = _events(self.client, host.id)
        host = self.client.wait(host.id, timeout=60)
        self.assertEqual(host.state, weft_pb2.SUCCEEDED, host)
        job = self.client.submit(example("conjugate_gradient.json"),
                                 control_mode="device")
        events = _events(self.client, job.id)
        job = self.client.wait(job.id, timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        iterations = [e.iteration for e in events
                      if e.kind == weft_pb2.NODE_ITERATION and e.node == "cg"]
        self.assertEqual(len(iterations), 1, iterations)
        host_count = max(e.iteration for e in host_events
                         if e.kind == weft_pb2.NODE_ITERATION)
        self.assertEqual(iterations[0], host_count)
        self.assertEqual(self.client.read_floats(job.id, "x"),
                         self.client.read_floats(host.id, "x"))

    def test_control_device_fails_a_loop_the_device_cannot_run(self):
        # The body is pinned to two devices: only the host can drive it.
        graph = {
            "name": "split",
            "buffers": [
                {"name": "a", "sizeBytes": "4", "dtype": "FLOAT32", "fill": 1.0,
                 "output": True},
                {"name": "b", "sizeBytes": "4", "dtype": "FLOAT32", "fill": 1.0,
                 "output": True},
                {"name": "go", "sizeBytes": "4", "dtype": "INT32", "fill": 1}],
            "nodes": [{"name": "walk", "whileLoop": {
                "condition": "go", "maxIterations": 10,
                "body": [
                    {"name": "on0", "op": "scale", "device": 0,
                     "args": [{"f32": 2.0},
                              {"buffer": {"name": "a", "access": "READ_WRITE"}}]},
                    {"name": "on1", "op": "scale", "device": 1,
                     "args": [{"f32": 3.0},
                              {"buffer": {"name": "b", "access": "READ_WRITE"}}]},
                    {"name": "stop", "op": "fill", "device": 1,
                     "args": [{"buffer": {"name": "go", "access": "WRITE"}},
                              {"i32": 0}]}]}}],
        }
        job = self.client.wait(self.client.submit(graph, control_mode="device").id,
                               timeout=60)
        self.assertEqual(job.state, weft_pb2.FAILED, job)
        self.assertEqual(job.error.code, grpc.StatusCode.FAILED_PRECONDITION.value[0])
        self.assertIn("loop 'walk' cannot evaluate its condition on the device",
                      job.error.message)
        # AUTO runs it on the host instead.
        job = self.client.wait(self.client.submit(graph, control_mode="auto").id,
                               timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        self.assertEqual(self.client.read_floats(job.id, "a"), [2.0])
        self.assertEqual(self.client.read_floats(job.id, "b"), [3.0])
        # The memory plan places what each pinned body node uses on its
        # device, whichever device the loop itself is on, and the job's
        # memory need counts both devices' arenas.
        plan = self.client.plan(graph)
        placed = {(b.name, b.device) for b in plan.buffers}
        self.assertLessEqual({("a", 0), ("b", 1), ("go", 1)}, placed)
        arenas = {m.device: m.arena_bytes for m in plan.memory}
        self.assertGreaterEqual(arenas.get(1, 0), 2 * 4)
        self.assertEqual(len(job.device_memory_bytes), 2, job)
        self.assertGreater(job.device_memory_bytes[1], 0, job)


class LongLoopTest(harness.WeftdTestCase):
    """A loop's many iterations cost the daemon bounded memory."""

    EXTRA_FLAGS = ("--trace_max_spans=10", "--max_job_events=32",
                   "--finished_job_events=8")

    def test_trace_and_events_of_a_long_loop_are_bounded(self):
        client = weft_client.Client(self.weftd.addr, timeout=60)
        self.addCleanup(client.close)
        job = client.run(example("halve_or_step.json"), control_mode="host",
                         timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        self.assertEqual(client.read_floats(job.id, "n"), [20.0])
        trace = client.trace(job.id)
        spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        self.assertEqual(len(spans), 10, trace["otherData"])
        # At least a span per iteration: the rest are counted, not kept.
        self.assertGreaterEqual(len(spans) + trace["otherData"]["spansDropped"], 20,
                                trace["otherData"])
        # A watch after the end: the last 8 events, the rest counted.
        events, dropped = [], 0
        for update in client.watch(job.id, timeout=60):
            events.extend(update.node_events)
            dropped += update.events_dropped
        self.assertEqual(len(events), 8)
        # An iteration and a branch event per iteration, at least.
        self.assertGreaterEqual(len(events) + dropped, 40)
        iterations = [e.iteration for e in events if e.kind == weft_pb2.NODE_ITERATION]
        self.assertEqual(iterations[-1:], [20])


if __name__ == "__main__":
    harness.main(__name__)
