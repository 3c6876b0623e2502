"""`weftctl trace` against a live weftd: the trace of an executed job is valid
Chrome/Perfetto JSON with a complete span per node on per-stream thread
tracks, flows for the event waits between streams, copy spans on copy-engine
tracks, and clear errors for jobs that have no trace (yet)."""

import collections
import json
import os

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness

FORK_JOIN = harness.example("fork_join.json")
VECTOR_PIPELINE = harness.example("vector_pipeline.json")


def load(path):
    with open(path) as f:
        return json.load(f)


def by_phase(trace):
    phases = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        phases[e["ph"]].append(e)
    return phases


def thread_names(phases):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in phases["M"]
            if e["name"] == "thread_name"}


def process_names(phases):
    return {e["pid"]: e["args"]["name"] for e in phases["M"]
            if e["name"] == "process_name"}


class TraceTest(harness.WeftdTestCase):

    def run_job(self, path):
        """Submits the graph file with weftctl and waits for it to succeed."""
        job_id = json.loads(self.weftctl_ok("submit", path, "--json").stdout)["id"]
        job = su.wait_state(self.weftd, job_id, su.TERMINAL)
        self.assertEqual(job.state, su.weft_pb2.SUCCEEDED, job)
        return job_id

    def trace(self, job_id):
        out = os.path.join(self.workdir, job_id + ".json")
        result = self.weftctl_ok("trace", job_id, "--out=" + out)
        self.assertEqual(result.stdout, "")
        return load(out)

    def test_fork_join_has_a_span_per_node_on_stream_tracks_and_flows(self):
        job_id = self.run_job(FORK_JOIN)
        trace = self.trace(job_id)
        self.assertEqual(trace["otherData"]["job"], "fork_join")
        phases = by_phase(trace)
        threads = thread_names(phases)
        processes = process_names(phases)

        nodes = [n["name"] for n in load(FORK_JOIN)["nodes"]]
        kernels = [e for e in phases["X"] if e["cat"] == "kernel" and e["args"]["node"] >= 0]
        self.assertEqual(sorted(e["name"] for e in kernels), sorted(nodes))
        span = {e["name"]: e for e in kernels}
        for e in kernels:
            self.assertRegex(threads[(e["pid"], e["tid"])], r"^stream \d+$", e)
            self.assertEqual(processes[e["pid"]], "device %d" % (e["pid"] - 1), e)
            self.assertEqual(e["args"]["op"], "spin")
            self.assertGreater(e["dur"], 0, e)
        # Work followed the graph: every branch after the root, the join last.
        root, join = span["root"], span["join"]
        for name in nodes[1:-1]:
            self.assertGreaterEqual(span[name]["ts"], root["ts"] + root["dur"] - 1e-3, name)
            self.assertGreaterEqual(join["ts"], span[name]["ts"] + span[name]["dur"] - 1e-3,
                                    name)
        # The branches ran on several streams, so waits crossed streams.
        self.assertGreater(len({(e["pid"], e["tid"]) for e in kernels}), 1)

        starts = {e["id"]: e for e in phases["s"]}
        finishes = {e["id"]: e for e in phases["f"]}
        self.assertTrue(starts, "no flow events")
        self.assertEqual(set(starts), set(finishes))
        crossing = 0
        for flow_id, s in starts.items():
            f = finishes[flow_id]
            self.assertEqual(f["bp"], "e")
            self.assertLessEqual(s["ts"], f["ts"] + 1e-3)
            if (s["pid"], s["tid"]) != (f["pid"], f["tid"]):
                crossing += 1
        self.assertGreater(crossing, 0)
        # The join waited on branches of other streams: flows end at its start.
        into_join = [f for f in finishes.values()
                     if (f["pid"], f["tid"]) == (join["pid"], join["tid"])
                     and abs(f["ts"] - join["ts"]) < 1e-3]
        self.assertTrue(into_join, "no flow ends at the join")

        # Without --out the same document goes to stdout.
        self.assertEqual(json.loads(self.weftctl_ok("trace", job_id).stdout), trace)

    def test_outputs_are_downloaded_on_a_device_to_host_track(self):
        job_id = self.run_job(VECTOR_PIPELINE)
        phases = by_phase(self.trace(job_id))
        threads = thread_names(phases)
        graph = load(VECTOR_PIPELINE)
        outputs = {b["name"]: int(b["sizeBytes"]) for b in graph["buffers"] if b.get("output")}
        copies = [e for e in phases["X"] if e["cat"] == "copy"]
        downloads = {e["name"]: e for e in copies if e["name"].endswith(" download")}
        self.assertEqual(sorted(downloads), sorted(n + " download" for n in outputs))
        for name, size in outputs.items():
            e = downloads[name + " download"]
            self.assertEqual(threads[(e["pid"], e["tid"])], "D2H", e)
            self.assertEqual(e["args"]["bytes"], size)
        kernels = [e for e in phases["X"] if e["cat"] == "kernel" and e["args"]["node"] >= 0]
        self.assertEqual(sorted(e["name"] for e in kernels),
                         sorted(n["name"] for n in graph["nodes"]))
        # Each download follows the last kernel that wrote its buffer.
        last_kernel_end = max(e["ts"] + e["dur"] for e in kernels
                              if e["name"] in ("axpy", "sum", "halve"))
        self.assertGreaterEqual(max(e["ts"] for e in downloads.values()) + 1e-3,
                                last_kernel_end)

    def test_errors(self):
        unknown = self.weftctl("trace", "j-feedfeedfeedfeed")
        self.assertEqual(unknown.returncode, 1, harness.describe(unknown))
        self.assertIn("NOT_FOUND", unknown.stderr)
        self.assertIn("j-feedfeedfeedfeed", unknown.stderr)

        job = su.submit(self.weftd, su.spin_chain("slow", 4, 500_000))
        su.wait_state(self.weftd, job.id, (su.weft_pb2.RUNNING,))
        early = self.weftctl("trace", job.id)
        self.assertEqual(early.returncode, 1, harness.describe(early))
        self.assertIn("FAILED_PRECONDITION", early.stderr)
        self.assertIn("available once it has finished", early.stderr)
        self.assertEqual(early.stdout, "")
        su.stub(self.weftd).CancelJob(su.weft_pb2.CancelJobRequest(job_id=job.id), timeout=30)
        done = su.wait_state(self.weftd, job.id, su.TERMINAL)
        self.assertEqual(done.state, su.weft_pb2.CANCELLED)
        cancelled = json.loads(self.weftctl_ok("trace", job.id).stdout)
        spans = [e["name"] for e in cancelled["traceEvents"] if e["ph"] == "X"]
        self.assertIn("s0", spans)

        usage = self.weftctl("trace")
        self.assertEqual(usage.returncode, 2)
        self.assertIn("'trace' takes 1 argument", usage.stderr)
        self.assertIn("trace JOB", self.weftctl_ok("--help").stdout)


class UntracedTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--trace_max_nodes=4",)

    def test_jobs_beyond_the_node_limit_are_not_traced(self):
        big = su.submit(self.weftd, su.spin_chain("big", 5, 10))
        small = su.submit(self.weftd, su.spin_chain("small", 4, 10))
        su.wait_state(self.weftd, big.id, su.TERMINAL)
        su.wait_state(self.weftd, small.id, su.TERMINAL)
        refused = self.weftctl("trace", big.id)
        self.assertEqual(refused.returncode, 1, harness.describe(refused))
        self.assertIn("FAILED_PRECONDITION", refused.stderr)
        self.assertIn("--trace_max_nodes=4", refused.stderr)
        traced = json.loads(self.weftctl_ok("trace", small.id).stdout)
        self.assertEqual(sorted(e["name"] for e in traced["traceEvents"]
                                if e["ph"] == "X" and e["cat"] == "kernel"
                                and e["args"]["node"] >= 0),
                         ["s0", "s1", "s2", "s3"])


if __name__ == "__main__":
    harness.main("trace_test")
