"""End-to-end test of the simulated devices' host memory: weftd keeps the
contents of simulated memory on the host only where bytes were written.

A job uploads 4 bytes of data into each of two 1 GiB buffers and runs two
kernels that only take their time over them. weftd links tcmalloc, whose
calloc clears every byte of a block at once; the job must still leave the
daemon's peak resident memory far below the 2 GiB it names.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import wait_until  # noqa: E402

GIB = 1 << 30
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def big_buffers_graph():
    half = "AAAAPw=="  # 0.5f, little-endian
    buffers = [
        {"name": "a", "sizeBytes": str(GIB), "dtype": "FLOAT32", "data": half},
        {"name": "b", "sizeBytes": str(GIB), "dtype": "FLOAT32", "data": half},
        {"name": "t", "sizeBytes": "4", "dtype": "FLOAT32", "output": True},
    ]
    nodes = [
        {"name": "k1", "op": "spin",
         "args": [{"buffer": {"name": "a", "access": "READ"}},
                  {"buffer": {"name": "t", "access": "WRITE"}}],
         "cost": {"estimatedUs": 2000}},
        {"name": "k2", "op": "spin",
         "args": [{"buffer": {"name": "b", "access": "READ"}},
                  {"buffer": {"name": "t", "access": "READ_WRITE"}}],
         "cost": {"estimatedUs": 2000}},
    ]
    return {"name": "big_buffers", "buffers": buffers, "nodes": nodes}


def peak_resident_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


class SimulatedMemoryTest(harness.WeftdTestCase):
    SIM_DEVICES = 1

    def test_large_buffers_with_a_few_bytes_of_data_hold_little_host_memory(self):
        path = self.write_file("big.json", json.dumps(big_buffers_graph()))
        job = json.loads(self.weftctl_ok("submit", path, "--json").stdout)
        job_id = job.get("job", job)["id"]

        def terminal():
            got = json.loads(self.weftctl_ok("get", job_id, "--json").stdout)
            got = got.get("job", got)
            return got if got.get("state") in TERMINAL else None
        job = wait_until(terminal, 60, interval=0.1, what="job %s to finish" % job_id)
        self.assertEqual(job.get("state"), "SUCCEEDED", job)
        peak = peak_resident_bytes(self.weftd.proc.pid)
        if peak is None:
            self.skipTest("no VmHWM in /proc")
        self.assertLess(peak, 512 << 20,
                        "weftd peaked at %d MiB for 2 GiB of simulated buffers "
                        "holding 8 bytes of data" % (peak >> 20))


if __name__ == "__main__":
    harness.main("e2e_sim_memory_test")
