"""End-to-end tests of weftd driven through the weftctl binary.

Each test starts its own weftd (two simulated devices) on free loopback
ports and a unix socket, and kills it afterwards.
"""

import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
import plan_checks  # noqa: E402
from harness import describe, example, wait_until  # noqa: E402

EXAMPLES = ["vector_pipeline.json", "fork_join.json", "scale_and_copy.textproto"]
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def load_example_dict(name):
    """The example graph as a proto3 JSON dict (text format goes through protobuf)."""
    path = example(name)
    if name.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    from google.protobuf import json_format, text_format
    from weft.v1 import weft_pb2
    with open(path) as f:
        graph = text_format.Parse(f.read(), weft_pb2.Graph())
    return json.loads(json_format.MessageToJson(graph))


def parse_json(test, result):
    try:
        return json.loads(result.stdout)
    except ValueError as e:
        test.fail("output is not JSON (%s)\n%s" % (e, describe(result)))


def job_list(value):
    """`list --json` output as a list of jobs (ListJobsResponse or a bare list)."""
    if isinstance(value, dict):
        return value.get("jobs", [])
    return value


def read_numbers(test, result):
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    try:
        return [float(line) for line in lines]
    except ValueError:
        test.fail("read printed something other than one number a line\n" + describe(result))


def spin_chain(name, count, each_us):
    """`count` spin nodes that all update one buffer, so they run one after another."""
    return {
        "name": name,
        "buffers": [{"name": "state", "sizeBytes": "64", "dtype": "BYTES"}],
        "nodes": [{"name": "step%d" % i, "op": "spin",
                   "args": [{"buffer": {"name": "state", "access": "READ_WRITE"}}],
                   "cost": {"estimatedUs": each_us}} for i in range(count)],
    }


def base_graph():
    """A small valid graph that the rejection cases below break in one place."""
    return {
        "name": "base",
        "buffers": [
            {"name": "a", "sizeBytes": "64", "dtype": "FLOAT32", "fill": 1.0},
            {"name": "b", "sizeBytes": "64", "dtype": "FLOAT32", "output": True},
        ],
        "nodes": [
            {"name": "scale", "op": "scale",
             "args": [{"f32": 2}, {"buffer": {"name": "a", "access": "READ_WRITE"}}]},
            {"name": "copy", "op": "copy",
             "args": [{"buffer": {"name": "a", "access": "READ"}},
                      {"buffer": {"name": "b", "access": "WRITE"}}]},
            {"name": "tail", "op": "spin", "after": ["copy"]},
        ],
    }


def _unknown_op(g):
    g["nodes"][1]["op"] = "frobnicate"


def _duplicate_buffer(g):
    g["buffers"].append({"name": "a", "sizeBytes": "8", "dtype": "BYTES"})


def _cycle(g):
    g["nodes"][0]["after"] = ["tail"]


def _missing_access(g):
    del g["nodes"][1]["args"][1]["buffer"]["access"]


def _device_out_of_range(g):
    g["nodes"][1]["device"] = 2


def _unknown_buffer(g):
    g["nodes"][1]["args"][0]["buffer"]["name"] = "ghost"


def _zero_size(g):
    g["buffers"][1]["sizeBytes"] = "0"


def _unknown_after(g):
    g["nodes"][2]["after"] = ["ghost"]


# name -> (mutation, regex the error must match: the field path, then why)
REJECTIONS = {
    "unknown_op": (_unknown_op, r"graph\.nodes\[1\]\.op\b.*frobnicate"),
    "duplicate_buffer_name": (_duplicate_buffer, r"graph\.buffers\[2\]\.name\b.*\ba\b"),
    "cycle_through_after": (_cycle, r"graph\.nodes\[\d\]\.after.*(?i:cycle)"),
    "missing_access": (_missing_access, r"graph\.nodes\[1\]\.args\[1\]\.buffer\.access\b"),
    "device_pin_out_of_range": (_device_out_of_range, r"graph\.nodes\[1\]\.device\b"),
    "unknown_buffer_reference": (_unknown_buffer,
                                 r"graph\.nodes\[1\]\.args\[0\]\.buffer\.name\b.*ghost"),
    "zero_size_buffer": (_zero_size, r"graph\.buffers\[1\]\.size_?(?i:bytes)\b"),
    "unknown_after_reference": (_unknown_after, r"graph\.nodes\[2\]\.after\b.*ghost"),
}


class WeftctlTest(harness.WeftdTestCase):

    # ---------------------------------------------------------- helpers --

    def submit_json(self, path, *flags):
        job = parse_json(self, self.weftctl_ok("submit", path, "--json", *flags))
        job = job.get("job", job)
        self.assertTrue(job.get("id"), "submit --json printed no job id: %r" % job)
        return job

    def get_job(self, job_id):
        job = parse_json(self, self.weftctl_ok("get", job_id, "--json"))
        return job.get("job", job)

    def wait_terminal(self, job_id, timeout=30):
        def terminal():
            job = self.get_job(job_id)
            return job if job.get("state") in TERMINAL else None
        return wait_until(terminal, timeout, interval=0.1, what="job %s to finish" % job_id)

    def only_job_id(self):
        jobs = job_list(parse_json(self, self.weftctl_ok("list", "--json")))
        self.assertEqual(len(jobs), 1, "expected one job, list printed %r" % jobs)
        return jobs[0]["id"]

    # ------------------------------------------------------------ tests --

    def test_startup_lines(self):
        log = self.weftd.stderr()
        lines = log.splitlines()
        wanted = [
            "weftd: serving weft.v1.Scheduler on " + self.weftd.addr,
            "weftd: serving weft.v1.Scheduler on " + self.weftd.unix_addr,
            "weftd: metrics on " + self.weftd.metrics_url,
            "weftd: 2 simulated devices",
        ]
        for line in wanted:
            self.assertIn(line, lines, "missing startup line %r" % line)
        self.assertIn("weftd: ready", lines)
        ready = lines.index("weftd: ready")
        for line in wanted:
            self.assertLess(lines.index(line), ready, "%r printed after ready" % line)

    def test_devices(self):
        plain = self.weftctl_ok("devices")
        self.assertTrue(plain.stdout.strip(), describe(plain))
        value = parse_json(self, self.weftctl_ok("devices", "--json"))
        devices = value.get("devices", []) if isinstance(value, dict) else value
        self.assertEqual(len(devices), 2, value)
        self.assertEqual(sorted(d.get("index", 0) for d in devices), [0, 1])
        for d in devices:
            self.assertTrue(d.get("simulated"), d)
            self.assertEqual(int(d.get("memoryTotalBytes", 0)), 16 << 30, d)

    def test_plan_examples_table_and_json(self):
        for name in EXAMPLES:
            with self.subTest(example=name):
                graph = load_example_dict(name)
                table = self.weftctl_ok("plan", example(name))
                for node in graph["nodes"]:
                    self.assertIn(node["name"], table.stdout, describe(table))
                value = parse_json(self, self.weftctl_ok("plan", example(name), "--json"))
                plan = value.get("plan", value)
                problems = plan_checks.check_plan(plan, graph, num_devices=2)
                self.assertEqual(problems, [], json.dumps(plan, indent=1))

    def test_plan_infers_dependencies_from_buffer_access(self):
        value = parse_json(self, self.weftctl_ok("plan", example("vector_pipeline.json"),
                                                 "--json"))
        deps = plan_checks.plan_deps(value.get("plan", value))
        # add reads x (fill_x) and y (axpy); fill_x -> axpy makes the first
        # edge redundant, so transitive reduction leaves only axpy.
        self.assertEqual(deps, {"fill_x": [], "axpy": ["fill_x"], "add": ["axpy"],
                                "halve": ["add"], "sum": ["halve"]})

    def test_plan_fork_join_shape_and_estimates(self):
        value = parse_json(self, self.weftctl_ok("plan", example("fork_join.json"), "--json"))
        plan = value.get("plan", value)
        deps = plan_checks.plan_deps(plan)
        branches = ["branch%d" % i for i in range(6)]
        self.assertEqual(deps["root"], [])
        for b in branches:
            self.assertEqual(deps[b], ["root"])
        self.assertEqual(deps["join"], branches)
        # The longest chain is root + one branch + join = 6 ms. Every node
        # fills a simulated GPU (occupancy 1, the default), so a device runs
        # one at a time: root, three branches on each device, join = 14 ms,
        # which is also the lower bound (six branches on two devices).
        self.assertGreaterEqual(plan.get("criticalPathUs", 0), 6000 - 1e-6)
        self.assertLess(plan.get("criticalPathUs", 0), 6500)
        self.assertGreaterEqual(plan.get("lowerBoundUs", 0), 14000 - 1e-6)
        self.assertGreaterEqual(plan.get("estimatedMakespanUs", 0),
                                plan.get("lowerBoundUs", 0) - 1e-6)
        self.assertLess(plan.get("estimatedMakespanUs", 0),
                        plan.get("lowerBoundUs", 0) * 1.01, "the default reaches the bound")
        devices = [n.get("device", 0) for n in plan["nodes"]
                   if n["name"].startswith("branch")]
        self.assertEqual(sorted(devices), [0, 0, 0, 1, 1, 1])
        self.assertEqual(plan.get("numDevices", 0), 2)

    def test_plan_single_stream_mode(self):
        value = parse_json(self, self.weftctl_ok("plan", example("fork_join.json"), "--json",
                                                 "--stream_mode=single"))
        plan = value.get("plan", value)
        self.assertEqual(plan_checks.check_plan(plan, load_example_dict("fork_join.json"), 2), [])
        per_device = {}
        for s in plan.get("streams", []):
            per_device.setdefault(s.get("device", 0), []).append(s)
        for device, streams in per_device.items():
            compute = [s for s in streams if s.get("engine", "COMPUTE") == "COMPUTE"]
            self.assertLessEqual(len(compute), 1, "device %d: %r" % (device, streams))

    def test_submit_watch_and_read_vector_pipeline(self):
        result = self.weftctl_ok("submit", example("vector_pipeline.json"), "--watch",
                                 timeout=60)
        job_id = self.only_job_id()
        self.assertIn(job_id, result.stdout, describe(result))
        job = self.get_job(job_id)
        self.assertEqual(job.get("state"), "SUCCEEDED", job)
        self.assertEqual(int(job.get("nodesDone", 0)), 5, job)
        self.assertEqual(int(job.get("nodesTotal", 0)), 5, job)
        self.assertEqual(sorted(job.get("outputBuffers", [])), ["total", "y", "z"], job)
        self.assertEqual(job.get("graphName"), "vector_pipeline", job)
        for stamp in ("createTime", "startTime", "endTime"):
            self.assertIn(stamp, job)

        total = read_numbers(self, self.weftctl_ok("read", job_id, "total"))
        self.assertEqual(total, [4608.0])
        y = read_numbers(self, self.weftctl_ok("read", job_id, "y"))
        self.assertEqual(y, [7.0] * 1024)
        z = read_numbers(self, self.weftctl_ok("read", job_id, "z"))
        self.assertEqual(z, [4.5] * 1024)

        raw_path = os.path.join(self.workdir, "z.bin")
        self.weftctl_ok("read", job_id, "z", "--raw", "--out=" + raw_path)
        with open(raw_path, "rb") as f:
            raw = f.read()
        self.assertEqual(len(raw), 4096)
        self.assertEqual(set(struct.unpack("<1024f", raw)), {4.5})

    def test_submit_as_device_graphs(self):
        result = self.weftctl_ok("submit", example("vector_pipeline.json"), "--watch",
                                 "--launch_mode=graphs", timeout=60)
        job_id = self.only_job_id()
        self.assertIn(job_id, result.stdout, describe(result))
        job = self.get_job(job_id)
        self.assertEqual(job.get("state"), "SUCCEEDED", job)
        self.assertEqual(int(job.get("nodesDone", 0)), 5, job)
        total = read_numbers(self, self.weftctl_ok("read", job_id, "total"))
        self.assertEqual(total, [4608.0])
        z = read_numbers(self, self.weftctl_ok("read", job_id, "z"))
        self.assertEqual(z, [4.5] * 1024)
        # It really ran as graphs: the trace has a span per graph.
        trace = self.weftctl_ok("trace", job_id).stdout
        self.assertIn("device graph", trace)

        bad = self.weftctl("submit", example("vector_pipeline.json"),
                           "--launch_mode=sometimes")
        self.assertNotEqual(bad.returncode, 0, describe(bad))
        self.assertIn("is not auto, streams or graphs", bad.stderr, describe(bad))

    def test_read_errors(self):
        job = self.submit_json(example("vector_pipeline.json"))
        self.assertEqual(self.wait_terminal(job["id"])["state"], "SUCCEEDED")
        # `x` is not an output buffer; `nope` does not exist.
        for buffer in ("x", "nope"):
            result = self.weftctl("read", job["id"], buffer)
            self.assertEqual(result.returncode, 1, describe(result))
            self.assertRegex(result.stderr, r"^weftctl: [A-Z_]+: ", describe(result))
            self.assertIn(buffer, result.stderr)

    def test_textproto_example(self):
        self.weftctl_ok("submit", example("scale_and_copy.textproto"), "--watch", timeout=60)
        job_id = self.only_job_id()
        self.assertEqual(read_numbers(self, self.weftctl_ok("read", job_id, "total")), [96.0])
        self.assertEqual(read_numbers(self, self.weftctl_ok("read", job_id, "b")), [6.0] * 16)

    def test_fork_join_submit_then_watch(self):
        job = self.submit_json(example("fork_join.json"))
        self.assertIn(job.get("state"), ("QUEUED", "RUNNING", "SUCCEEDED"), job)
        self.assertEqual(int(job.get("nodesTotal", 0)), 8, job)
        watch = self.weftctl("watch", job["id"], timeout=60)
        self.assertEqual(watch.returncode, 0, describe(watch))
        final = self.get_job(job["id"])
        self.assertEqual(final.get("state"), "SUCCEEDED", final)
        self.assertEqual(int(final.get("nodesDone", 0)), 8, final)

    def test_watch_prints_node_events(self):
        # Long enough that watch attaches before the job ends.
        path = self.write_file("chain.json", json.dumps(spin_chain("chain", 4, 300000)))
        job = self.submit_json(path)
        watch = self.weftctl("watch", job["id"], timeout=60)
        self.assertEqual(watch.returncode, 0, describe(watch))
        for i in range(1, 4):
            self.assertIn("step%d" % i, watch.stdout, describe(watch))
        self.assertIn("SUCCEEDED", watch.stdout, describe(watch))

    def test_cancel_running_job(self):
        path = self.write_file("long.json", json.dumps(spin_chain("long", 100, 200000)))
        job = self.submit_json(path)
        job_id = job["id"]
        wait_until(lambda: self.get_job(job_id).get("state") == "RUNNING", 15,
                   what="job to start running")
        cancel = self.weftctl_ok("cancel", job_id)
        self.assertIn(job_id, cancel.stdout, describe(cancel))
        final = self.wait_terminal(job_id, timeout=10)
        self.assertEqual(final["state"], "CANCELLED", final)
        self.assertLess(int(final.get("nodesDone", 0)), 100, final)
        watch = self.weftctl("watch", job_id, timeout=30)
        self.assertEqual(watch.returncode, 1, describe(watch))
        # Devices are usable again afterwards.
        self.weftctl_ok("submit", example("vector_pipeline.json"), "--watch", timeout=60)

    def test_cancel_finished_job_keeps_state(self):
        job = self.submit_json(example("vector_pipeline.json"))
        self.assertEqual(self.wait_terminal(job["id"])["state"], "SUCCEEDED")
        result = self.weftctl("cancel", job["id"])
        self.assertIn(result.returncode, (0, 1), describe(result))
        if result.returncode == 1:
            self.assertIn("FAILED_PRECONDITION", result.stderr, describe(result))
        self.assertEqual(self.get_job(job["id"])["state"], "SUCCEEDED")

    def test_list_shows_jobs(self):
        first = self.submit_json(example("vector_pipeline.json"))
        second = self.submit_json(example("fork_join.json"))
        for job in (first, second):
            self.wait_terminal(job["id"])
        jobs = job_list(parse_json(self, self.weftctl_ok("list", "--json")))
        self.assertEqual(sorted(j["id"] for j in jobs), sorted([first["id"], second["id"]]))
        table = self.weftctl_ok("list")
        for job in (first, second):
            self.assertIn(job["id"], table.stdout, describe(table))

    def test_priority_request_id_and_state_filter(self):
        first = self.submit_json(example("vector_pipeline.json"), "--priority=5",
                                 "--request_id=req-1")
        self.assertEqual(first.get("priority"), 5, first)
        self.assertEqual(first.get("requestId"), "req-1", first)
        # The same request id names the same job; no second job is created.
        again = self.submit_json(example("vector_pipeline.json"), "--request_id=req-1")
        self.assertEqual(again["id"], first["id"])
        self.wait_terminal(first["id"])
        slow = self.write_file("slow.json", json.dumps(spin_chain("slow", 1, 2000000)))
        cancelled = self.submit_json(slow)
        self.weftctl_ok("cancel", cancelled["id"])
        self.assertEqual(self.wait_terminal(cancelled["id"])["state"], "CANCELLED")

        def ids(state):
            jobs = job_list(parse_json(self, self.weftctl_ok("list", "--json",
                                                             "--state=" + state)))
            return sorted(j["id"] for j in jobs)
        self.assertEqual(ids("succeeded"), [first["id"]])
        self.assertEqual(ids("running"), [])
        self.assertEqual(ids("all"), sorted([first["id"], cancelled["id"]]))
        bad = self.weftctl("list", "--state=bogus")
        self.assertEqual(bad.returncode, 2, describe(bad))

    def test_unix_socket(self):
        addr = self.weftd.unix_addr
        devices = self.weftctl("devices", "--json", addr=addr)
        self.assertEqual(devices.returncode, 0, describe(devices))
        self.weftctl_ok("submit", example("vector_pipeline.json"), "--watch", addr=addr,
                        timeout=60)
        jobs = job_list(parse_json(self, self.weftctl_ok("list", "--json", addr=addr)))
        self.assertEqual(len(jobs), 1)
        total = read_numbers(self, self.weftctl_ok("read", jobs[0]["id"], "total", addr=addr))
        self.assertEqual(total, [4608.0])

    def test_get_unknown_job_is_not_found(self):
        result = self.weftctl("get", "nope")
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertRegex(result.stderr, r"weftctl: NOT_FOUND: .*nope", describe(result))

    def test_unreachable_daemon(self):
        port = harness.free_port()
        result = self.weftctl("devices", "--timeout=2s", addr="127.0.0.1:%d" % port)
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertRegex(result.stderr, r"weftctl: (UNAVAILABLE|DEADLINE_EXCEEDED): ",
                         describe(result))

    def test_usage_errors(self):
        for argv in (["frobnicate"], ["submit"], ["read", "only-a-job"]):
            with self.subTest(argv=argv):
                result = self.weftctl(*argv)
                self.assertEqual(result.returncode, 2, describe(result))
                self.assertTrue(result.stderr.strip(), describe(result))

    def test_graph_file_errors(self):
        yaml = self.write_file("graph.yaml", "name: x\n")
        result = self.weftctl("submit", yaml)
        self.assertNotEqual(result.returncode, 0, describe(result))
        self.assertIn("graph.yaml", result.stderr, describe(result))
        broken = self.write_file("broken.json", '{"name": "x", "nodes": [')
        result = self.weftctl("submit", broken)
        self.assertNotEqual(result.returncode, 0, describe(result))
        self.assertIn("broken.json", result.stderr, describe(result))
        missing = self.weftctl("submit", os.path.join(self.workdir, "missing.json"))
        self.assertNotEqual(missing.returncode, 0, describe(missing))

    def test_plan_rejects_bad_graph_too(self):
        graph = base_graph()
        _unknown_op(graph)
        path = self.write_file("bad.json", json.dumps(graph))
        result = self.weftctl("plan", path)
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertRegex(result.stderr, r"weftctl: INVALID_ARGUMENT: graph\.nodes\[1\]\.op")

    def test_base_graph_is_valid(self):
        # The rejection cases below differ from this graph in one place only.
        path = self.write_file("base.json", json.dumps(base_graph()))
        self.weftctl_ok("submit", path, "--watch", timeout=60)
        job_id = self.only_job_id()
        self.assertEqual(read_numbers(self, self.weftctl_ok("read", job_id, "b")), [2.0] * 16)


class WeftctlSmallMemoryTest(harness.WeftdTestCase):
    """A daemon whose simulated GPUs hold 1 MiB each, to make jobs fail."""

    EXTRA_FLAGS = ("--sim_memory_bytes=1048576",)

    def test_node_larger_than_a_device_is_refused(self):
        graph = {
            "name": "too_big",
            "buffers": [{"name": "a", "sizeBytes": str(2 << 20), "dtype": "FLOAT32",
                         "output": True}],
            "nodes": [{"name": "f", "op": "fill",
                       "args": [{"buffer": {"name": "a", "access": "WRITE"}}, {"f32": 1}]}],
        }
        path = self.write_file("too_big.json", json.dumps(graph))
        result = self.weftctl("submit", path, "--watch", timeout=60)
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertRegex(
            result.stderr,
            r"^weftctl: RESOURCE_EXHAUSTED: node 'f': its arguments need 2097152 bytes "
            r"on device 0, above the memory budget of 1048576 bytes \(the device's memory\)",
            describe(result))
        # Nothing was queued.
        self.assertEqual(job_list(parse_json(self, self.weftctl_ok("list", "--json"))), [])
        # The daemon is fine afterwards, and small jobs still run.
        self.weftctl_ok("submit", example("vector_pipeline.json"), "--watch", timeout=60)


class WeftctlShortEventLogTest(harness.WeftdTestCase):
    """A daemon whose finished jobs keep their last 2 node events."""

    EXTRA_FLAGS = ("--finished_job_events=2",)

    def test_watch_of_a_finished_job_says_what_was_not_kept(self):
        result = self.weftctl_ok("submit", example("vector_pipeline.json"), "--json")
        job_id = parse_json(self, result).get("id")
        self.assertTrue(job_id, describe(result))
        wait_until(lambda: parse_json(self, self.weftctl_ok("get", job_id, "--json"))
                   .get("state") == "SUCCEEDED", 30, interval=0.1,
                   what="job %s to succeed" % job_id)
        out = self.weftctl_ok("watch", job_id, "--progress=lines").stdout
        # 5 nodes, started and finished: the last 2 events kept.
        self.assertIn("(8 earlier node events were not kept)", out, out)
        self.assertIn("SUCCEEDED", out)
        # The last node's finish is among those kept.
        self.assertRegex(out, r"node sum FINISHED device \d+ stream \d+")


def _make_rejection_test(mutate, pattern):
    def test(self):
        graph = base_graph()
        mutate(graph)
        path = self.write_file("bad.json", json.dumps(graph))
        result = self.weftctl("submit", path)
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertRegex(result.stderr, r"weftctl: INVALID_ARGUMENT: ", describe(result))
        self.assertRegex(result.stderr, pattern, describe(result))
        # Nothing was queued.
        jobs = job_list(parse_json(self, self.weftctl_ok("list", "--json")))
        self.assertEqual(jobs, [])
    return test


for _name, (_mutate, _pattern) in REJECTIONS.items():
    setattr(WeftctlTest, "test_rejects_" + _name, _make_rejection_test(_mutate, _pattern))


if __name__ == "__main__":
    harness.main("e2e_weftctl_test")
