"""End-to-end tests of arena placement: weftd places a job's buffers at the
offsets of its memory plan, so buffers whose lifetimes do not overlap share
device memory.

One simulated device of 8 MiB runs a chain of sixteen 1 MiB tensors (16 MiB
in all, two live at once), each the sum of the one before with itself: it
succeeds with the right output under weftd's default (--arena_placement)
and is refused at submission for lack of memory with
--arena_placement=false. `weftctl devices` and /metrics show the planned
arenas.
"""

import json
import os
import struct
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import describe, wait_until  # noqa: E402

TENSORS = 16
ELEMS = 1 << 18  # 1 MiB of float32
DEVICE_BYTES = 8 << 20
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def chain_graph():
    buffers = [{"name": "t0", "sizeBytes": str(ELEMS * 4), "dtype": "FLOAT32", "fill": 1.0}]
    nodes = []
    for i in range(1, TENSORS):
        buffers.append({"name": "t%d" % i, "sizeBytes": str(ELEMS * 4), "dtype": "FLOAT32",
                        "output": i == TENSORS - 1})
        nodes.append({"name": "double%d" % i, "op": "add",
                      "args": [{"buffer": {"name": "t%d" % (i - 1), "access": "READ"}},
                               {"buffer": {"name": "t%d" % (i - 1), "access": "READ"}},
                               {"buffer": {"name": "t%d" % i, "access": "WRITE"}}],
                      "cost": {"estimatedUs": 10}})
    return {"name": "doubling_chain", "buffers": buffers, "nodes": nodes}


class ArenaTestBase(harness.WeftdTestCase):
    SIM_DEVICES = 1

    def run_chain(self):
        path = self.write_file("chain.json", json.dumps(chain_graph()))
        result = self.weftctl_ok("submit", path, "--json")
        job = json.loads(result.stdout)
        job = job.get("job", job)
        job_id = job["id"]

        def terminal():
            got = json.loads(self.weftctl_ok("get", job_id, "--json").stdout)
            got = got.get("job", got)
            return got if got.get("state") in TERMINAL else None
        return wait_until(terminal, 60, interval=0.1, what="job %s to finish" % job_id)


class PlacedTest(ArenaTestBase):
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES,)

    def test_chain_larger_than_the_device_runs_in_its_arena(self):
        job = self.run_chain()
        self.assertEqual(job.get("state"), "SUCCEEDED", job)
        raw_path = os.path.join(self.workdir, "last.bin")
        self.weftctl_ok("read", job["id"], "t%d" % (TENSORS - 1), "--raw", "--out=" + raw_path)
        with open(raw_path, "rb") as f:
            raw = f.read()
        self.assertEqual(len(raw), ELEMS * 4)
        self.assertEqual(set(struct.unpack("<%df" % ELEMS, raw)), {float(1 << (TENSORS - 1))})

    def test_devices_and_metrics_show_the_planned_arena(self):
        table = self.weftctl_ok("devices")
        self.assertIn("ARENA_PLANNED", table.stdout, describe(table))
        self.assertIn("RESERVED", table.stdout, describe(table))
        with urllib.request.urlopen(self.weftd.metrics_url, timeout=10) as response:
            text = response.read().decode()
        # No job runs: no arena is held.
        self.assertRegex(text, r'weft_device_arena_bytes\{UUID="[^"]*",device="0"\} 0\b')
        self.assertRegex(text,
                         r'weft_device_memory_reserved_bytes\{UUID="[^"]*",device="0"\} 0\b')


class SeparateTest(ArenaTestBase):
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES, "--arena_placement=false")

    def test_chain_larger_than_the_device_is_refused_without_placement(self):
        path = self.write_file("chain.json", json.dumps(chain_graph()))
        result = self.weftctl("submit", path, "--json")
        self.assertNotEqual(result.returncode, 0, describe(result))
        # Sixteen 1 MiB tensors, each allocated by itself, on a device of 8.
        self.assertRegex(result.stderr,
                         r"^weftctl: RESOURCE_EXHAUSTED: the job's buffers, each allocated "
                         r"by itself for the whole job, need %d bytes on device 0, above the "
                         r"memory budget of %d bytes \(the device's memory\); weftd runs with "
                         r"--arena_placement=false" % (TENSORS * ELEMS * 4, DEVICE_BYTES),
                         describe(result))
        jobs = json.loads(self.weftctl_ok("list", "--json").stdout)
        if isinstance(jobs, dict):
            jobs = jobs.get("jobs", [])
        self.assertEqual(jobs, [], describe(result))


if __name__ == "__main__":
    harness.main("e2e_arena_test")
