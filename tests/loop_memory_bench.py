"""What long loops cost weftd in memory.

Runs loops of several iteration counts, each in a fresh weftd with its
default flags (simulated GPUs), and prints weftd's peak resident memory over
what it held before the job, in MB and in bytes per iteration, with what the
job's trace and event log kept (spans kept + dropped, events kept + dropped).
With the bounds (--trace_max_spans, --max_job_events, and one event per
stream for a loop's joins) the bytes per iteration fall as loops grow; a
cost that grew with every iteration would keep them level.

    bazel build -c opt //server:weftd //proto:weft_py_gen //tests:health_py_gen
    /usr/bin/python3 tests/loop_memory_bench.py [--iterations=10000,50000,200000]
        [--flags="--trace_max_spans=..."]

Shapes: a loop of two kernels driven by the host; the same with a case..of
in its body (host-driven: a nested run per iteration); and that one run on
the device (control_mode auto).
"""

import argparse
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import weft_client  # noqa: E402
from weft_client import weft_pb2  # noqa: E402


def loop_graph(iterations, with_case):
    body = [
        {"name": "count", "op": "axpy",
         "args": [{"f32": 1.0}, {"buffer": {"name": "one", "access": "READ"}},
                  {"buffer": {"name": "n", "access": "READ_WRITE"}}]},
        {"name": "more", "op": "less",
         "args": [{"buffer": {"name": "n", "access": "READ"}}, {"f32": float(iterations)},
                  {"buffer": {"name": "go", "access": "WRITE"}}]},
    ]
    if with_case:
        step = lambda name: {"nodes": [{"name": name, "op": "add", "args": [
            {"buffer": {"name": "x", "access": "READ"}},
            {"buffer": {"name": "one", "access": "READ"}},
            {"buffer": {"name": "x", "access": "WRITE"}}]}]}
        body.insert(0, {"name": "pick", "caseOf": {
            "selector": "go", "branches": [step("a0"), step("a1")]}})
    return {
        "name": "loop",
        "buffers": [
            {"name": "one", "sizeBytes": "4", "dtype": "FLOAT32", "fill": 1.0},
            {"name": "x", "sizeBytes": "4", "dtype": "FLOAT32"},
            {"name": "n", "sizeBytes": "4", "dtype": "FLOAT32", "output": True},
            {"name": "go", "sizeBytes": "4", "dtype": "INT32", "fill": 1},
        ],
        "nodes": [{"name": "walk", "whileLoop": {
            "condition": "go", "maxIterations": iterations + 1, "body": body}}],
    }


def rss_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def measure(shape, mode, with_case, iterations, flags):
    workdir = harness.scratch_dir()
    weftd = harness.Weftd(workdir, sim_devices=1, extra_flags=flags)
    weftd.start()
    try:
        client = weft_client.Client(weftd.addr, timeout=600)
        pid = weftd.proc.pid
        # A small job first, so what every job costs once is counted before.
        client.run(loop_graph(2, with_case), control_mode=mode, timeout=60)
        before = rss_kb(pid, "VmRSS")
        start = time.monotonic()
        job = client.run(loop_graph(iterations, with_case), control_mode=mode,
                         timeout=600)
        seconds = time.monotonic() - start
        peak = rss_kb(pid, "VmHWM")
        if client.read_floats(job.id, "n") != [float(iterations)]:
            raise RuntimeError("%s: wrong count %s" % (shape, client.read_floats(job.id, "n")))
        spans, dropped_spans = "-", "-"  # untraced (--trace_jobs=false)
        if "--trace_jobs=false" not in flags:
            trace = client.trace(job.id)
            spans = len([e for e in trace["traceEvents"] if e.get("ph") == "X"])
            dropped_spans = trace["otherData"].get("spansDropped", 0)
        events, dropped_events = 0, 0
        for update in client.watch(job.id, timeout=60):
            events += len(update.node_events)
            dropped_events += update.events_dropped
        client.close()
    finally:
        weftd.signal(2)
        weftd.wait(30)
    grown = max(0, peak - before) * 1024
    print("%-12s %-7s %9d %8.1f %10.1f %9.2f %9s %11s %7d %11d" % (
        shape, mode, iterations, grown / 1e6, grown / iterations, seconds,
        spans, dropped_spans, events, dropped_events), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", default="10000,50000,200000")
    parser.add_argument("--flags", default="", help="extra weftd flags")
    args = parser.parse_args()
    counts = [int(c) for c in args.iterations.split(",")]
    flags = shlex.split(args.flags)
    print("%-12s %-7s %9s %8s %10s %9s %9s %11s %7s %11s" % (
        "shape", "mode", "iters", "grown_MB", "B/iter", "seconds", "spans",
        "spans_drop", "events", "events_drop"))
    for shape, mode, with_case in (("loop", "host", False),
                                   ("loop+case", "host", True),
                                   ("loop+case", "auto", True)):
        for n in counts:
            measure(shape, mode, with_case, n, flags)


if __name__ == "__main__":
    main()
