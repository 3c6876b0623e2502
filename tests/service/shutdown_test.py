"""SIGTERM: health flips to NOT_SERVING (a health Watch stream sees it), new
submissions get UNAVAILABLE, running jobs finish within --drain_timeout or are
cancelled and reported, and weftd exits 0. Also: `weftd --help` exits 0."""

import signal
import subprocess
import threading
import time

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness, weft_pb2

import grpc
import health_pb2
import health_pb2_grpc


class HealthWatcher:
    """Follows grpc.health.v1 Watch for `service` on a thread of its own."""

    def __init__(self, weftd, service=""):
        self.statuses = []
        self.changed = threading.Condition()
        self._call = health_pb2_grpc.HealthStub(weftd.channel()).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=60)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for response in self._call:
                with self.changed:
                    self.statuses.append(harness.health_status_name(response.status))
                    self.changed.notify_all()
        except grpc.RpcError:
            pass  # the server went away

    def wait_for(self, status, timeout):
        with self.changed:
            ok = self.changed.wait_for(lambda: status in self.statuses, timeout)
        if not ok:
            raise AssertionError("health Watch never reported %s (saw %s)"
                                 % (status, self.statuses))


class ShutdownTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--drain_timeout=10s",)

    def test_sigterm_drains_running_jobs_and_exits_zero(self):
        overall = HealthWatcher(self.weftd)
        scheduler = HealthWatcher(self.weftd, "weft.v1.Scheduler")
        overall.wait_for("SERVING", 10)
        scheduler.wait_for("SERVING", 10)
        # About 1.5 s of work, so that it is still running after SIGTERM.
        job = su.submit(self.weftd, su.spin_chain("draining", 6, 250_000))
        su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        updates = su.stub(self.weftd).WatchJob(
            weft_pb2.WatchJobRequest(job_id=job.id), timeout=60)

        self.weftd.signal(signal.SIGTERM)
        overall.wait_for("NOT_SERVING", 10)
        scheduler.wait_for("NOT_SERVING", 10)
        self.assertEqual(self.weftd.health(), "NOT_SERVING")
        with self.assertRaises(grpc.RpcError) as caught:
            su.submit(self.weftd, su.spin_chain("late", 1, 10))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("shutting down", caught.exception.details())

        # The API keeps answering while draining: the job runs to the end,
        # and its watcher sees that before the server goes.
        self.assertEqual(su.get(self.weftd, job.id).state, weft_pb2.RUNNING)
        done = None
        for update in updates:
            done = update.job
        self.assertEqual(done.state, weft_pb2.SUCCEEDED, done)
        self.assertEqual(done.nodes_done, 6)
        self.assertEqual(self.weftd.wait(20), 0, self.weftd.stderr())
        log = self.weftd.stderr()
        self.assertIn("received SIGTERM", log)
        self.assertIn("draining: 1 running jobs", log)
        self.assertIn("drained in", log)
        self.assertIn("weftd: stopped", log)


class DrainTimeoutTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--drain_timeout=500ms", "--max_running_jobs=1")

    def test_jobs_past_the_drain_timeout_are_cancelled_and_reported(self):
        running = su.submit(self.weftd, su.spin_chain("too-long", 8, 250_000))
        su.wait_state(self.weftd, running.id, (weft_pb2.RUNNING,))
        queued = su.submit(self.weftd, su.spin_chain("never-started", 1, 10))
        updates = su.stub(self.weftd).WatchJob(
            weft_pb2.WatchJobRequest(job_id=running.id), timeout=60)

        start = time.monotonic()
        self.weftd.signal(signal.SIGTERM)
        last = None
        for update in updates:
            last = update.job
        self.assertIsNotNone(last)
        self.assertEqual(last.state, weft_pb2.CANCELLED, last)
        self.assertIn("drain timeout expired", last.error.message)
        self.assertEqual(self.weftd.wait(30), 0, self.weftd.stderr())
        # Exited about when the cancelled work drained, not after it all ran.
        self.assertLess(time.monotonic() - start, 15)
        log = self.weftd.stderr()
        self.assertIn("1 queued jobs cancelled", log)
        self.assertIn("drain timeout expired: cancelling 1 jobs: %s" % running.id, log)
        self.assertRegex(log, r"job %s CANCELLED \(\d+/8 nodes done\)" % running.id)
        del queued


class HelpTest(harness.unittest.TestCase):
    def test_help_prints_the_flags_and_exits_zero(self):
        for flag in ("--help", "-h", "--helpfull"):
            result = subprocess.run([harness.WEFTD, flag], capture_output=True, text=True,
                                    timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            for name in ("--listen=127.0.0.1:50051", "--max_queued_jobs=1024",
                         "--max_queued_jobs_per_tenant=0", "--retain_seconds=0",
                         "--drain_timeout=30s"):
                self.assertIn(name, result.stdout)
            self.assertIn("Usage: weftd", result.stdout)

    def test_unknown_flag_is_an_error(self):
        result = subprocess.run([harness.WEFTD, "--no_such_flag"], capture_output=True,
                                text=True, timeout=30)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("no_such_flag", result.stderr)


if __name__ == "__main__":
    harness.main("shutdown_test")
