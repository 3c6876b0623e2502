"""End-to-end tests of spills and fills: a job whose buffers do not fit its
device even with address reuse still runs, through spill and fill nodes.

One simulated device of 5 MiB runs a doubling chain of twelve 1 MiB
tensors (t0 filled with 1, t_i = t_{i-1} + t_{i-1}) followed by an
accumulation sum += t_i over every tensor, so each tensor is written early
and read again late: 13 MiB in all, more than the device holds even when
buffers share addresses. `weftctl plan` shows spill:<buffer>:<k> and
fill:<buffer>:<k> nodes, spilled bytes and an arena within the device; the
job succeeds under weftd's default (--arena_placement) with sum equal to
1 + 2 + ... + 2^11 = 4095 everywhere, and fails for lack of memory with
--arena_placement=false. A loop whose buffers, with one spilled around
it, fit the device runs there too, its buffers counted in the arena.
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
from harness import describe, wait_until  # noqa: E402

TENSORS = 12
ELEMS = 1 << 18  # 1 MiB of float32
TENSOR_BYTES = ELEMS * 4
DEVICE_BYTES = 5 << 20
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def buffer_arg(name, access):
    return {"buffer": {"name": name, "access": access}}


def pyramid_graph():
    """The doubling chain t0..t11, then sum += t_i for every i."""
    buffers = [{"name": "t0", "sizeBytes": str(TENSOR_BYTES), "dtype": "FLOAT32",
                "fill": 1.0}]
    for i in range(1, TENSORS):
        buffers.append({"name": "t%d" % i, "sizeBytes": str(TENSOR_BYTES),
                        "dtype": "FLOAT32"})
    buffers.append({"name": "sum", "sizeBytes": str(TENSOR_BYTES), "dtype": "FLOAT32",
                    "output": True})
    nodes = []
    for i in range(1, TENSORS):
        prev = "t%d" % (i - 1)
        nodes.append({"name": "double%d" % i, "op": "add",
                      "args": [buffer_arg(prev, "READ"), buffer_arg(prev, "READ"),
                               buffer_arg("t%d" % i, "WRITE")],
                      "cost": {"estimatedUs": 10}})
    for i in range(TENSORS):
        nodes.append({"name": "accumulate%d" % i, "op": "add",
                      "args": [buffer_arg("sum", "READ"), buffer_arg("t%d" % i, "READ"),
                               buffer_arg("sum", "WRITE")],
                      "cost": {"estimatedUs": 10}})
    return {"name": "pyramid", "buffers": buffers, "nodes": nodes}


def expected_sum():
    """What the graph computes, in float32 on the CPU: one value per element."""
    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]
    tensor, total = f32(1.0), f32(0.0)
    for i in range(TENSORS):
        if i > 0:
            tensor = f32(tensor + tensor)
        total = f32(total + tensor)
    return total


class SpillTestBase(harness.WeftdTestCase):
    SIM_DEVICES = 1

    def graph_path(self):
        return self.write_file("pyramid.json", json.dumps(pyramid_graph()))

    def run_pyramid(self):
        """Submits the graph, waits for it to end; returns the job and weftctl's result."""
        result = self.weftctl("submit", self.graph_path(), "--memory_order=submitted",
                              "--watch", timeout=120)
        jobs = json.loads(self.weftctl_ok("list", "--json").stdout)
        if isinstance(jobs, dict):
            jobs = jobs.get("jobs", [])
        self.assertEqual(len(jobs), 1, "%r\n%s" % (jobs, describe(result)))
        job_id = jobs[0]["id"]

        def terminal():
            got = json.loads(self.weftctl_ok("get", job_id, "--json").stdout)
            got = got.get("job", got)
            return got if got.get("state") in TERMINAL else None
        job = wait_until(terminal, 60, interval=0.1, what="job %s to finish" % job_id)
        return job, result


class SpillTest(SpillTestBase):
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES,)

    def test_plan_spills_and_fills_to_fit_the_device(self):
        # Issued as submitted, the twelve tensors outlive the device's five.
        value = json.loads(self.weftctl_ok("plan", self.graph_path(),
                                           "--memory_order=submitted", "--json").stdout)
        plan = value.get("plan", value)
        names = [n.get("name", "") for n in plan.get("nodes", [])]
        spills = [n for n in names if n.startswith("spill:")]
        fills = [n for n in names if n.startswith("fill:")]
        self.assertTrue(spills, "no spill node in %r" % names)
        self.assertTrue(fills, "no fill node in %r" % names)
        # Every spill "spill:<buffer>:<k>" comes back as "fill:<buffer>:<k>".
        for spill in spills:
            self.assertIn("fill:" + spill[len("spill:"):], fills, names)
            self.assertRegex(spill, r"^spill:t\d+:\d+$")
        # The submitted nodes are all still there.
        for node in pyramid_graph()["nodes"]:
            self.assertIn(node["name"], names)
        memory = plan.get("memory", [])
        self.assertEqual(len(memory), 1, json.dumps(memory))
        self.assertGreater(int(memory[0].get("spilledBytes", 0)), 0, memory[0])
        self.assertLessEqual(int(memory[0]["arenaBytes"]), DEVICE_BYTES, memory[0])
        # No budget asked for: the device's memory.
        self.assertEqual(int(memory[0].get("budgetBytes", 0)), DEVICE_BYTES, memory[0])

    def test_auto_order_fits_the_device_without_spills(self):
        # The default order, where the submitted one spills, also tries the
        # memory-aware one: each accumulation right after its tensor.
        value = json.loads(self.weftctl_ok("plan", self.graph_path(), "--json").stdout)
        plan = value.get("plan", value)
        names = [n.get("name", "") for n in plan.get("nodes", [])]
        self.assertFalse([n for n in names if n.startswith("spill:")], names)
        memory = plan.get("memory", [])
        self.assertEqual(len(memory), 1, json.dumps(memory))
        self.assertEqual(int(memory[0].get("spilledBytes", 0)), 0, memory[0])
        self.assertLessEqual(int(memory[0]["arenaBytes"]), DEVICE_BYTES, memory[0])

    def test_job_larger_than_the_device_runs_with_spills(self):
        job, result = self.run_pyramid()
        self.assertEqual(job.get("state"), "SUCCEEDED", "%r\n%s" % (job, describe(result)))
        self.assertEqual(result.returncode, 0, describe(result))
        self.assertEqual(job.get("outputBuffers", []), ["sum"], job)
        # The job ran the spills and fills as nodes of its own.
        self.assertEqual(job.get("nodesDone"), job.get("nodesTotal"), job)
        self.assertGreater(int(job.get("nodesTotal", 0)), len(pyramid_graph()["nodes"]), job)
        self.assertRegex(result.stdout, r"node spill:t\d+:\d+ FINISHED", describe(result))
        self.assertRegex(result.stdout, r"node fill:t\d+:\d+ FINISHED", describe(result))
        raw_path = os.path.join(self.workdir, "sum.bin")
        self.weftctl_ok("read", job["id"], "sum", "--raw", "--out=" + raw_path)
        with open(raw_path, "rb") as f:
            raw = f.read()
        self.assertEqual(len(raw), TENSOR_BYTES)
        self.assertEqual(expected_sum(), 4095.0)
        self.assertEqual(set(struct.unpack("<%df" % ELEMS, raw)), {expected_sum()})


LOOP_ELEMS = 1 << 19  # 2 MiB of float32
LOOP_BYTES = LOOP_ELEMS * 4


def loop_graph():
    """a, b, c of 2 MiB (6 MiB in all) around a loop over b: the job fits the
    device only with c spilled while a and b are live, and the loop's
    buffers in the arena. b = 1 + 2, doubled while under 40 (48), plus
    c = 3 * 2: 54 everywhere."""
    def tensor(name, fill, output=False):
        b = {"name": name, "sizeBytes": str(LOOP_BYTES), "dtype": "FLOAT32",
             "fill": fill}
        if output:
            b["output"] = True
        return b
    return {
        "name": "loop_under_the_device",
        "buffers": [tensor("a", 1.0), tensor("b", 2.0, output=True), tensor("c", 3.0),
                    {"name": "go", "sizeBytes": "4", "dtype": "INT32", "fill": 1.0}],
        "nodes": [
            {"name": "scale_c", "op": "scale",
             "args": [{"f32": 2.0}, buffer_arg("c", "READ_WRITE")]},
            {"name": "a_into_b", "op": "axpy",
             "args": [{"f32": 1.0}, buffer_arg("a", "READ"), buffer_arg("b", "READ_WRITE")]},
            {"name": "loop", "whileLoop": {
                "condition": "go", "maxIterations": 8,
                "body": [
                    {"name": "double_b", "op": "scale",
                     "args": [{"f32": 2.0}, buffer_arg("b", "READ_WRITE")]},
                    {"name": "test", "op": "less",
                     "args": [buffer_arg("b", "READ"), {"f32": 40.0},
                              buffer_arg("go", "WRITE")]},
                ]}},
            {"name": "c_into_b", "op": "axpy",
             "args": [{"f32": 1.0}, buffer_arg("c", "READ"), buffer_arg("b", "READ_WRITE")]},
        ],
    }


class LoopSpillTest(harness.WeftdTestCase):
    SIM_DEVICES = 1
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES,)

    def test_loop_buffers_count_in_the_budget(self):
        path = self.write_file("loop.json", json.dumps(loop_graph()))
        value = json.loads(self.weftctl_ok("plan", path, "--memory_order=submitted",
                                           "--max_streams_per_device=1", "--json").stdout)
        plan = value.get("plan", value)
        names = [n.get("name", "") for n in plan.get("nodes", [])]
        self.assertIn("spill:c:1", names)
        # The loop's buffers lie in the arena, which stays within the device.
        placed = {b["name"] for b in plan.get("buffers", [])}
        self.assertTrue({"b", "go"} <= placed, placed)
        self.assertLessEqual(int(plan["memory"][0]["arenaBytes"]), DEVICE_BYTES, plan["memory"])
        for mode in ("host", "device"):
            with self.subTest(mode=mode):
                result = self.weftctl("submit", path, "--memory_order=submitted",
                                      "--max_streams_per_device=1",
                                      "--control_mode=" + mode, "--watch", timeout=120)
                self.assertEqual(result.returncode, 0, describe(result))
                jobs = json.loads(self.weftctl_ok("list", "--json").stdout)
                if isinstance(jobs, dict):
                    jobs = jobs.get("jobs", [])
                job_id = jobs[-1]["id"]
                got = json.loads(self.weftctl_ok("get", job_id, "--json").stdout)
                got = got.get("job", got)
                self.assertEqual(got.get("state"), "SUCCEEDED", got)
                raw_path = os.path.join(self.workdir, "b_%s.bin" % mode)
                self.weftctl_ok("read", job_id, "b", "--raw", "--out=" + raw_path)
                with open(raw_path, "rb") as f:
                    raw = f.read()
                self.assertEqual(len(raw), LOOP_BYTES)
                self.assertEqual(set(struct.unpack("<%df" % LOOP_ELEMS, raw)), {54.0})


class SeparateTest(SpillTestBase):
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES, "--arena_placement=false")

    def test_job_larger_than_the_device_is_refused_without_placement(self):
        # Without placement every buffer is allocated by itself for the whole
        # job: one that could not run so is refused at submission, naming
        # the device, the bytes and why, and leaves no job behind.
        result = self.weftctl("submit", self.graph_path(), "--memory_order=submitted",
                              "--watch", timeout=120)
        self.assertNotEqual(result.returncode, 0, describe(result))
        self.assertRegex(result.stderr,
                         r"^weftctl: RESOURCE_EXHAUSTED: the job's buffers, each allocated "
                         r"by itself for the whole job, need \d+ bytes on device \d, above "
                         r"the memory budget of %d bytes" % DEVICE_BYTES, describe(result))
        self.assertIn("--arena_placement=false", result.stderr, describe(result))
        jobs = json.loads(self.weftctl_ok("list", "--json").stdout)
        if isinstance(jobs, dict):
            jobs = jobs.get("jobs", [])
        self.assertEqual(jobs, [], describe(result))


if __name__ == "__main__":
    harness.main("e2e_spill_test")
