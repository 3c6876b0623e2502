"""End-to-end tests of weftd through the Python client (client/python).

Each test starts its own weftd (two simulated devices) on free loopback
ports and kills it afterwards.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import example, wait_until  # noqa: E402

import grpc  # noqa: E402

import weft_client  # noqa: E402
from weft_client import weft_pb2  # noqa: E402


def spin_chain(name, count, each_us):
    return {
        "name": name,
        "buffers": [{"name": "state", "sizeBytes": "64", "dtype": "BYTES"}],
        "nodes": [{"name": "step%d" % i, "op": "spin",
                   "args": [{"buffer": {"name": "state", "access": "READ_WRITE"}}],
                   "cost": {"estimatedUs": each_us}} for i in range(count)],
    }


def scrape(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8")


def metric_samples(text, name):
    """{frozenset(label items): value} for every sample of metric `name`."""
    samples = {}
    pattern = re.compile(r"^%s(?:\{([^}]*)\})?\s+(\S+)" % re.escape(name))
    for line in text.splitlines():
        m = pattern.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        samples[labels] = float(m.group(2))
    return samples


class PythonClientTest(harness.WeftdTestCase):

    def setUp(self):
        super().setUp()
        self.client = weft_client.Client(self.weftd.addr, timeout=30)
        self.addCleanup(self.client.close)

    def test_submit_watch_read(self):
        job = self.client.submit(example("vector_pipeline.json"))
        self.assertTrue(job.id)
        self.assertIn(job.state, (weft_pb2.QUEUED, weft_pb2.RUNNING, weft_pb2.SUCCEEDED))
        self.assertEqual(job.nodes_total, 5)
        states = []
        for update in self.client.watch(job.id, timeout=60):
            if update.HasField("job"):
                states.append(update.job.state)
        self.assertEqual(states[-1], weft_pb2.SUCCEEDED, states)
        # States only move forward.
        self.assertEqual(states, sorted(states), states)

        final = self.client.get(job.id)
        self.assertEqual(final.state, weft_pb2.SUCCEEDED)
        self.assertEqual(final.nodes_done, 5)
        self.assertLessEqual(final.create_time.ToNanoseconds(), final.start_time.ToNanoseconds())
        self.assertLessEqual(final.start_time.ToNanoseconds(), final.end_time.ToNanoseconds())
        self.assertEqual(self.client.read_floats(job.id, "total"), [4608.0])
        self.assertEqual(self.client.read_floats(job.id, "y"), [7.0] * 1024)
        self.assertEqual(self.client.read_floats(job.id, "z"), [4.5] * 1024)
        # Small chunks reassemble to the same bytes.
        self.assertEqual(self.client.read_buffer(job.id, "z", chunk_bytes=1000),
                         self.client.read_buffer(job.id, "z"))

    def test_trace_of_finished_job(self):
        job = self.client.submit(example("vector_pipeline.json"))
        self.client.wait(job.id, timeout=60, check=True)
        trace = self.client.trace(job.id)
        spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        names = {e["name"] for e in spans}
        graph = json.load(open(example("vector_pipeline.json")))
        for node in graph["nodes"]:
            self.assertTrue(any(node["name"] in n for n in names), (node["name"], names))
        for span in spans:
            self.assertGreaterEqual(span["dur"], 0)

    def test_watch_reports_every_node(self):
        graph = spin_chain("chain", 5, 200000)
        job = self.client.submit(graph)
        finished = set()
        last = None
        for update in self.client.watch(job.id, timeout=60):
            for event in update.node_events:
                self.assertIn(event.device, (0, 1))
                if event.kind == weft_pb2.NODE_FINISHED:
                    finished.add(event.node)
            if update.HasField("job"):
                last = update.job
        self.assertEqual(last.state, weft_pb2.SUCCEEDED)
        # The first node may finish before the watch attaches.
        self.assertTrue({"step%d" % i for i in range(1, 5)} <= finished, finished)

    def test_inline_graph_with_data_and_dtypes(self):
        import struct
        graph = weft_pb2.Graph(name="inline")
        graph.buffers.add(name="x", size_bytes=16, dtype=weft_pb2.FLOAT32,
                          data=struct.pack("<4f", 1, 2, 3, 4))
        graph.buffers.add(name="s", size_bytes=4, dtype=weft_pb2.FLOAT32, output=True)
        graph.buffers.add(name="d", size_bytes=16, dtype=weft_pb2.FLOAT64, fill=-0.25,
                          output=True)
        graph.buffers.add(name="i", size_bytes=12, dtype=weft_pb2.INT32, output=True)
        sum_node = graph.nodes.add(name="sum", op="reduce_sum")
        sum_node.args.add().buffer.CopyFrom(weft_pb2.BufferArg(name="x", access=weft_pb2.READ))
        sum_node.args.add().buffer.CopyFrom(weft_pb2.BufferArg(name="s", access=weft_pb2.WRITE))
        fill_node = graph.nodes.add(name="fill_i", op="fill")
        fill_node.args.add().buffer.CopyFrom(weft_pb2.BufferArg(name="i", access=weft_pb2.WRITE))
        fill_node.args.add().i32 = -7
        job = self.client.run(graph, timeout=60)
        self.assertEqual(self.client.read_floats(job.id, "s"), [10.0])
        self.assertEqual(self.client.read_values(job.id, "d"), [-0.25, -0.25])
        self.assertEqual(self.client.read_values(job.id, "i"), [-7, -7, -7])

    def test_plan_graph(self):
        plan = self.client.plan(example("fork_join.json"))
        self.assertEqual(sorted(n.name for n in plan.nodes),
                         sorted(["root", "join"] + ["branch%d" % i for i in range(6)]))
        order = [n.name for n in plan.nodes]
        self.assertEqual(order[0], "root")
        self.assertEqual(order[-1], "join")
        self.assertEqual(plan.num_devices, 2)
        for node in plan.nodes:
            self.assertIn(node.device, (0, 1))
            self.assertLess(node.stream, len(plan.streams))
        # A dry run executes nothing.
        self.assertEqual(self.client.list(), [])

    def test_plan_unimplemented_or_valid_policies(self):
        for policy in weft_pb2.DevicePolicy.keys():
            with self.subTest(policy=policy):
                try:
                    plan = self.client.plan(example("fork_join.json"), policy=policy)
                except grpc.RpcError as e:
                    self.assertNotEqual(policy, "ROUND_ROBIN")
                    self.assertEqual(e.code(), grpc.StatusCode.UNIMPLEMENTED, e.details())
                    continue
                self.assertEqual(len(plan.nodes), 8)

    def test_list_devices(self):
        devices = self.client.devices()
        self.assertEqual([d.index for d in devices], [0, 1])
        for d in devices:
            self.assertTrue(d.simulated)
            self.assertTrue(d.name)
            self.assertEqual(d.memory_total_bytes, 16 << 30)
            self.assertLessEqual(d.streams_busy, d.streams_total)
            self.assertEqual(d.streams_busy, 0, "idle daemon has busy streams")
        self.assertNotEqual(devices[0].uuid, devices[1].uuid)

    def test_bad_input_is_invalid_argument_with_field(self):
        cases = [
            ({"name": "g", "nodes": [{"name": "n", "op": "frobnicate"}]},
             r"graph\.nodes\[0\]\.op"),
            ({"name": "g",
              "buffers": [{"name": "a", "sizeBytes": "4", "dtype": "FLOAT32"},
                          {"name": "a", "sizeBytes": "4", "dtype": "FLOAT32"}],
              "nodes": [{"name": "n", "op": "spin"}]},
             r"graph\.buffers\[1\]\.name"),
            ({"name": "g",
              "buffers": [{"name": "a", "sizeBytes": "4", "dtype": "FLOAT32"}],
              "nodes": [{"name": "n", "op": "scale",
                         "args": [{"f32": 1}, {"buffer": {"name": "b",
                                                          "access": "READ_WRITE"}}]}]},
             r"graph\.nodes\[0\]\.args\[1\]\.buffer\.name"),
            ({"name": "g",
              "buffers": [{"name": "a", "sizeBytes": "4", "dtype": "FLOAT32"}],
              "nodes": [{"name": "n", "op": "scale",
                         "args": [{"buffer": {"name": "a", "access": "READ_WRITE"}}]}]},
             r"graph\.nodes\[0\]"),
        ]
        for graph, field in cases:
            with self.subTest(field=field):
                for call in (self.client.submit, self.client.plan):
                    with self.assertRaises(grpc.RpcError) as cm:
                        call(graph)
                    self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                    self.assertRegex(cm.exception.details(), field)
        self.assertEqual(self.client.list(), [])

    def test_unknown_job(self):
        for call in (self.client.get, self.client.cancel):
            with self.assertRaises(grpc.RpcError) as cm:
                call("nope")
            self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.client.watch("nope", timeout=10))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_cancel(self):
        job = self.client.submit(spin_chain("long", 100, 200000))
        wait_until(lambda: self.client.get(job.id).state == weft_pb2.RUNNING, 15,
                   what="job to run")
        cancelled_at = time.monotonic()
        self.client.cancel(job.id)

        def finished():
            current = self.client.get(job.id)
            return current if current.state in weft_client.TERMINAL_STATES else None
        try:
            final = wait_until(finished, 10, interval=0.1, what="the cancelled job to end")
        except AssertionError:
            current = self.client.get(job.id)
            self.fail("cancelled job did not end within 10s; %.1fs after CancelJob it is "
                      "%s with %d of 100 nodes done"
                      % (time.monotonic() - cancelled_at,
                         weft_pb2.JobState.Name(current.state), current.nodes_done))
        self.assertEqual(final.state, weft_pb2.CANCELLED)
        self.assertLess(final.nodes_done, 100, "cancel did not stop the job's work")
        self.assertEqual(self.client.wait(job.id, timeout=10).state, weft_pb2.CANCELLED)
        with self.assertRaises(weft_client.JobFailedError):
            self.client.wait(job.id, timeout=10, check=True)

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("weft.v1.Scheduler"), "SERVING")
        self.assertEqual(self.weftd.health("weft.v1.Scheduler"), "SERVING")

    def test_metrics_scrape(self):
        self.client.run(example("vector_pipeline.json"), timeout=60)
        # The job's metrics may be recorded just after its final state.
        def succeeded_count():
            jobs = metric_samples(scrape(self.weftd.metrics_url), "weft_jobs_total")
            for labels, value in jobs.items():
                if ("outcome", "succeeded") in {(k, v.lower()) for k, v in labels}:
                    return value
            return None
        self.assertEqual(wait_until(succeeded_count, 10, what="weft_jobs_total"), 1.0)
        text = scrape(self.weftd.metrics_url)
        self.assertIn("# TYPE weft_jobs_total counter", text)
        for name in ("weft_jobs_total",):
            for labels in metric_samples(text, name):
                self.assertIn("outcome", dict(labels), "%s sample without outcome" % name)
        self.assertTrue(re.search(r"^weft_\w*queue\w*\s*(\{[^}]*\})?\s+\d", text, re.M),
                        "no queue depth gauge")
        nodes = [v for m in re.finditer(r"^(weft_node\w*_total)\b", text, re.M)
                 for v in metric_samples(text, m.group(1)).values()]
        self.assertGreaterEqual(sum(nodes), 5, "node executions not counted")
        self.assertTrue(re.search(r"^weft_\w*stream\w*\{[^}]*device", text, re.M),
                        "no per-device stream gauge")

    def test_large_graph(self):
        count = 20000
        graph = weft_pb2.Graph(name="large")
        for i in range(count):
            graph.nodes.add(name="n%05d" % i, op="spin")
        self.assertGreater(graph.ByteSize(), 200000)
        job = self.client.submit(graph, timeout=60)
        self.assertEqual(job.nodes_total, count)
        final = self.client.wait(job.id, timeout=120)
        self.assertEqual(final.state, weft_pb2.SUCCEEDED, final.error.message)
        self.assertEqual(final.nodes_done, count)

    def test_server_reflection(self):
        # grpc.reflection.v1alpha ServerReflectionRequest{list_services: ""}
        # (field 7); the reply lists service names as plain strings.
        call = self.weftd.channel().stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        replies = list(call(iter([b"\x3a\x00"]), timeout=10))
        self.assertEqual(len(replies), 1)
        self.assertIn(b"weft.v1.Scheduler", replies[0])
        self.assertIn(b"grpc.health.v1.Health", replies[0])

    def test_example_script(self):
        script = os.path.join(harness.ROOT, "client", "python", "examples", "submit_and_read.py")
        env = dict(os.environ, WEFT_PROTO_PYTHONPATH=os.path.join(harness.GEN, "proto"))
        result = subprocess.run(
            ["/usr/bin/python3", script, "--addr=" + self.weftd.addr,
             example("vector_pipeline.json")],
            capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(result.returncode, 0, harness.describe(result))
        self.assertRegex(result.stdout, r"job \S+ SUCCEEDED", result.stdout)
        self.assertIn("total: [4608.0]", result.stdout)
        self.assertIn("z: [4.5, 4.5", result.stdout)

    def test_sigterm_drains_and_exits_zero(self):
        job = self.client.submit(spin_chain("drain", 4, 250000))
        wait_until(lambda: self.client.get(job.id).state == weft_pb2.RUNNING, 15,
                   what="job to run")
        self.weftd.signal(signal.SIGTERM)

        def not_serving():
            try:
                return self.weftd.health(timeout=1) == "NOT_SERVING"
            except grpc.RpcError as e:
                # The listener may already be closed.
                return e.code() in (grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.DEADLINE_EXCEEDED,
                                    grpc.StatusCode.CANCELLED)
        wait_until(not_serving, 5, what="health NOT_SERVING after SIGTERM")
        status = self.weftd.wait(timeout=30)
        self.assertIsNotNone(status, "weftd still running 30s after SIGTERM")
        self.assertEqual(status, 0)


class MessageLimitTest(harness.WeftdTestCase):
    """--max_message_bytes bounds what a client may send."""

    EXTRA_FLAGS = ("--max_message_bytes=65536",)

    def test_large_graph_over_limit_is_rejected(self):
        client = weft_client.Client(self.weftd.addr, timeout=30)
        self.addCleanup(client.close)
        graph = weft_pb2.Graph(name="large")
        for i in range(20000):
            graph.nodes.add(name="n%05d" % i, op="spin")
        self.assertGreater(graph.ByteSize(), 65536)
        with self.assertRaises(grpc.RpcError) as cm:
            client.submit(graph)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED,
                         cm.exception.details())
        self.assertEqual(client.list(), [])
        # Graphs under the limit are fine.
        self.assertEqual(client.run(example("vector_pipeline.json"), timeout=60).state,
                         weft_pb2.SUCCEEDED)


class EventLogTest(harness.WeftdTestCase):
    """Jobs keep a bounded log of node events for their watches."""

    EXTRA_FLAGS = ("--max_job_events=16", "--finished_job_events=6")

    def _watch(self, client, job_id):
        events, dropped = [], 0
        for update in client.watch(job_id, timeout=60):
            events.extend(update.node_events)
            dropped += update.events_dropped
        return events, dropped

    def test_a_watch_after_the_end_gets_the_last_events(self):
        client = weft_client.Client(self.weftd.addr, timeout=30)
        self.addCleanup(client.close)
        job = client.run(spin_chain("chain", 5, 100), timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED)
        events, dropped = self._watch(client, job.id)
        # Started and finished for each of 5 nodes: the last 6 are kept.
        self.assertEqual(dropped, 4)
        self.assertEqual(len(events), 6)
        finished = [e.node for e in events if e.kind == weft_pb2.NODE_FINISHED]
        self.assertEqual(finished[-3:], ["step2", "step3", "step4"])

    def test_a_watch_that_keeps_up_sees_every_event(self):
        client = weft_client.Client(self.weftd.addr, timeout=30)
        self.addCleanup(client.close)
        # More events than the log holds, spread over 40 x 20 ms.
        job = client.submit(spin_chain("chain", 40, 20000))
        events, dropped = self._watch(client, job.id)
        # Every event is either seen, in order, or counted as dropped (the
        # nodes start together, more than the log holds): none is lost
        # silently, and the finishes, 20 ms apart, are all seen.
        self.assertEqual(len(events) + dropped, 80, (events, dropped))
        finished = [e.node for e in events if e.kind == weft_pb2.NODE_FINISHED]
        self.assertEqual(finished[-30:], ["step%d" % i for i in range(10, 40)])
        self.assertEqual(finished, sorted(finished, key=lambda n: int(n[4:])))


if __name__ == "__main__":
    harness.main("e2e_python_test")
