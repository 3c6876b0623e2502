"""weftctl's output: a live progress bar on a terminal and plain lines
otherwise, the list table, --json on every command, and errors as
"weftctl: CODE: message" with the server's retry hint."""

import json
import os
import pty
import select
import subprocess
import time

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness, weft_pb2


def run_on_terminal(argv, timeout=60):
    """Runs argv with stdout on a pseudo-terminal; returns (exit status, output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    proc.wait(timeout=10)
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.returncode, b"".join(chunks).decode(errors="replace"), err


class WeftctlOutputTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--max_running_jobs=1", "--max_queued_jobs=1")

    def test_watch_draws_a_progress_bar_on_a_terminal(self):
        # 8 nodes over about 0.8 s: several redraws.
        job = su.submit(self.weftd, su.spin_chain("barred", 8, 100_000))
        status, out, err = run_on_terminal(
            [harness.WEFTCTL, "--addr=" + self.weftd.addr, "watch", job.id])
        self.assertEqual(status, 0, out + err.decode())
        self.assertIn("\r\x1b[K[", out)           # redrawn in place
        self.assertIn("8/8 nodes 100%", out)
        self.assertIn("SUCCEEDED", out)
        self.assertIn("#" * 10, out)
        self.assertNotIn("node s0 FINISHED", out)  # no per-node lines
        self.assertTrue(out.rstrip().endswith("job %s SUCCEEDED" % job.id), repr(out[-200:]))

    def test_watch_prints_plain_lines_when_not_a_terminal(self):
        # Long enough (about 1 s) for the watch to attach while it runs.
        job = su.submit(self.weftd, su.spin_chain("plain", 5, 200_000))
        result = self.weftctl_ok("watch", job.id)
        self.assertNotIn("\r", result.stdout)
        self.assertNotIn("[#", result.stdout)
        self.assertIn("node s4 FINISHED", result.stdout)
        self.assertIn("job %s SUCCEEDED  5/5 nodes" % job.id, result.stdout)
        # Forcing the bar works without a terminal too.
        forced = self.weftctl_ok("watch", job.id, "--progress=bar")
        self.assertIn("5/5 nodes 100%", forced.stdout)
        bad = self.weftctl("watch", job.id, "--progress=sometimes")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--progress", bad.stderr)

    def test_list_is_a_table_with_tenants(self):
        job = su.submit(self.weftd, su.spin_chain("listed", 1, 10), tenant="team-x")
        su.wait_state(self.weftd, job.id, su.TERMINAL)
        table = self.weftctl_ok("list").stdout.splitlines()
        self.assertEqual(table[0].split(),
                         ["JOB", "STATE", "PRIORITY", "TENANT", "PROGRESS", "GRAPH", "CREATED"])
        row = [line for line in table if job.id in line][0].split()
        self.assertEqual(row[1:6], ["SUCCEEDED", "0", "team-x", "1/1", "listed"])

    def test_every_command_speaks_json(self):
        graph = self.write_file("g.json", json.dumps({
            "name": "json-graph",
            "buffers": [{"name": "b", "sizeBytes": 16, "output": True}],
            "nodes": [{"name": "n", "op": "fill",
                       "args": [{"buffer": {"name": "b", "access": "WRITE"}},
                                {"f32": 1.5}]}]}))
        submitted = json.loads(self.weftctl_ok("submit", graph, "--json", "--tenant=t1").stdout)
        self.assertEqual(submitted["tenant"], "t1")
        job_id = submitted["id"]
        su.wait_state(self.weftd, job_id, su.TERMINAL)
        outputs = {
            "get": ["get", job_id],
            "watch": ["watch", job_id],
            "list": ["list"],
            "plan": ["plan", graph],
            "devices": ["devices"],
            "read": ["read", job_id, "b"],
            "health": ["health"],
        }
        for name, args in outputs.items():
            result = self.weftctl_ok(*args, "--json")
            for line in result.stdout.splitlines():
                json.loads(line)  # every line is one JSON object
            self.assertTrue(result.stdout.strip(), name)
        cancel = self.weftctl("cancel", job_id, "--json")
        self.assertEqual(cancel.returncode, 1)
        self.assertIn("weftctl: FAILED_PRECONDITION: job %s is SUCCEEDED" % job_id,
                      cancel.stderr)

    def test_errors_carry_code_message_and_retry_hint(self):
        blocker = su.submit(self.weftd, su.spin_chain("blocker", 4, 500_000))
        su.wait_state(self.weftd, blocker.id, (weft_pb2.RUNNING,))
        su.submit(self.weftd, su.spin_chain("queued", 1, 10))
        graph = self.write_file("g.json", json.dumps({
            "name": "rejected",
            "buffers": [{"name": "b", "sizeBytes": 16}],
            "nodes": [{"name": "n", "op": "fill",
                       "args": [{"buffer": {"name": "b", "access": "WRITE"}},
                                {"f32": 1}]}]}))
        result = self.weftctl("submit", graph)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr,
                         r"^weftctl: RESOURCE_EXHAUSTED: admission queue is full "
                         r"\(1 jobs queued, 1 running\); retry later \(retry after \d+")
        missing = self.weftctl("get", "j-0000000000000000")
        self.assertEqual(missing.returncode, 1)
        self.assertEqual(missing.stderr.strip(),
                         "weftctl: NOT_FOUND: job 'j-0000000000000000' not found")


if __name__ == "__main__":
    harness.main("weftctl_output_test")
