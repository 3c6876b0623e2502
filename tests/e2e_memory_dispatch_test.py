"""End-to-end test of memory-gated dispatch: weftd starts a queued job only
where its buffers fit in the devices' memory beside the running jobs'.

One simulated device of 8 MiB. Job `first` holds a 5 MiB buffer for about a
second; job `second` needs 5 MiB too, so, with slots free, it waits in the
queue until `first` has ended, and then succeeds (run together they would
need 10 MiB). `weftctl get` shows a job's need and why it waits,
`weftctl devices` and /metrics what the running job reserved.
"""

import calendar
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import describe, wait_until  # noqa: E402

MIB = 1 << 20
BUFFER_BYTES = 5 * MIB
DEVICE_BYTES = 8 * MIB
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def seconds(timestamp):
    """Seconds since the epoch of an RFC 3339 UTC timestamp ("...Z")."""
    whole, _, fraction = timestamp.rstrip("Z").partition(".")
    base = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return base + (float("0." + fraction) if fraction else 0.0)


def holder_graph(name, spin_us):
    """Fills a 5 MiB buffer, spins on it for `spin_us`, and outputs it."""
    return {
        "name": name,
        "buffers": [{"name": "b", "sizeBytes": str(BUFFER_BYTES), "dtype": "FLOAT32",
                     "output": True}],
        "nodes": [
            {"name": "fill", "op": "fill",
             "args": [{"buffer": {"name": "b", "access": "WRITE"}}, {"f32": 1.5}]},
            {"name": "hold", "op": "spin",
             "args": [{"buffer": {"name": "b", "access": "READ_WRITE"}}],
             "cost": {"estimatedUs": spin_us}},
        ],
    }


class MemoryDispatchTest(harness.WeftdTestCase):
    SIM_DEVICES = 1
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % DEVICE_BYTES,)

    def submit(self, graph):
        path = self.write_file(graph["name"] + ".json", json.dumps(graph))
        job = json.loads(self.weftctl_ok("submit", path, "--json").stdout)
        return job.get("job", job)["id"]

    def get(self, job_id):
        job = json.loads(self.weftctl_ok("get", job_id, "--json").stdout)
        return job.get("job", job)

    def test_a_job_waits_for_memory_then_runs(self):
        first = self.submit(holder_graph("first", 1.0e6))
        wait_until(lambda: self.get(first).get("state") == "RUNNING", 30,
                   what="the first job to run")
        second = self.submit(holder_graph("second", 1000))

        # Queued while the first runs, though slots are free.
        waiting = self.get(second)
        self.assertEqual(waiting.get("state"), "QUEUED", waiting)
        self.assertEqual([int(b) for b in waiting.get("deviceMemoryBytes", [])],
                         [BUFFER_BYTES], waiting)
        self.assertIn("waiting for device memory: it needs %d bytes on device 0"
                      % BUFFER_BYTES, waiting.get("queueReason", ""), waiting)
        details = self.weftctl_ok("get", second)
        self.assertIn("memory:    GPU 0 5.0 MiB", details.stdout, describe(details))
        self.assertIn("waiting:   waiting for device memory", details.stdout,
                      describe(details))
        devices = self.weftctl_ok("devices")
        self.assertIn("RESERVED", devices.stdout, describe(devices))
        with urllib.request.urlopen(self.weftd.metrics_url, timeout=10) as response:
            text = response.read().decode()
        reserved = re.search(
            r'weft_device_memory_reserved_bytes\{UUID="[^"]*",device="0"\} (\S+)', text)
        self.assertIsNotNone(reserved, text)
        self.assertEqual(float(reserved.group(1)), BUFFER_BYTES)

        def ended(job_id):
            job = self.get(job_id)
            return job if job.get("state") in TERMINAL else None
        done_first = wait_until(lambda: ended(first), 60, interval=0.1,
                                what="the first job to end")
        done_second = wait_until(lambda: ended(second), 60, interval=0.1,
                                 what="the second job to end")
        self.assertEqual(done_first.get("state"), "SUCCEEDED", done_first)
        self.assertEqual(done_second.get("state"), "SUCCEEDED", done_second)
        self.assertGreaterEqual(seconds(done_second["startTime"]),
                                seconds(done_first["endTime"]))


if __name__ == "__main__":
    harness.main("e2e_memory_dispatch_test")
