"""WatchJob at scale: 1,000 open watches keep weftd's thread count small and
all see their job end when it ends; the count returns near where it was once
they have ended; a watch beyond --max_watchers is RESOURCE_EXHAUSTED with a
retry hint, and a cancelled watch gives its slot back at once."""

import time

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness, weft_pb2

import grpc

WATCHES = 1000
CHANNELS = 4  # connections, each well below --max_concurrent_streams


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line for pid %d" % pid)


def own_channel(weftd):
    # A connection of its own, as a separate client would have.
    return grpc.insecure_channel(weftd.addr, options=[("grpc.use_local_subchannel_pool", 1)])


class WatchScaleTest(harness.WeftdTestCase):
    # One job runs at a time, so a second one stays QUEUED behind the first.
    EXTRA_FLAGS = ("--max_running_jobs=1",)

    def start_blocker(self):
        # Up to a minute of device time in short nodes, cancelled at the end.
        job = su.submit(self.weftd, su.spin_chain("blocker", 600, 100_000))
        su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        self.addCleanup(self.cancel, job.id)
        return job

    def cancel(self, job_id):
        try:
            su.stub(self.weftd).CancelJob(weft_pb2.CancelJobRequest(job_id=job_id), timeout=10)
        except grpc.RpcError:
            pass

    def test_thousand_watches_hold_no_thread_each(self):
        self.start_blocker()
        queued = su.submit(self.weftd, su.spin_chain("watched", 1, 10))
        pid = self.weftd.proc.pid
        baseline = threads_of(pid)

        channels = [own_channel(self.weftd) for _ in range(CHANNELS)]
        self.addCleanup(lambda: [c.close() for c in channels])
        stubs = [su.weft_pb2_grpc.SchedulerStub(c) for c in channels]
        request = weft_pb2.WatchJobRequest(job_id=queued.id)
        calls = [stubs[i % CHANNELS].WatchJob(request, timeout=120) for i in range(WATCHES)]
        # Every watch is open once it has its first message: the job, queued.
        for call in calls:
            self.assertEqual(next(call).job.state, weft_pb2.QUEUED)
        watching = threads_of(pid)
        self.assertLess(watching, 100, "baseline %d" % baseline)
        self.assertLessEqual(watching, baseline + 20, "baseline %d" % baseline)

        # Cancelling the queued job wakes every watch with its end.
        started = time.monotonic()
        self.cancel(queued.id)
        for call in calls:
            last = None
            for update in call:
                last = update.job
            self.assertEqual(last.state, weft_pb2.CANCELLED)
            self.assertEqual(call.code(), grpc.StatusCode.OK)
        self.assertLess(time.monotonic() - started, 60)
        after = harness.wait_until(
            lambda: (lambda n: n if n <= baseline + 10 else None)(threads_of(pid)),
            20, what="weftd back near %d threads" % baseline)
        print("weftd threads: %d before, %d with %d watches, %d after"
              % (baseline, watching, WATCHES, after))


class WatcherCapTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--max_running_jobs=1", "--max_watchers=3")

    def test_watch_beyond_the_cap_is_resource_exhausted_with_retry_hint(self):
        blocker = su.submit(self.weftd, su.spin_chain("blocker", 600, 100_000))
        su.wait_state(self.weftd, blocker.id, (weft_pb2.RUNNING,))
        stub = su.stub(self.weftd)
        request = weft_pb2.WatchJobRequest(job_id=blocker.id)
        calls = [stub.WatchJob(request, timeout=60) for _ in range(3)]
        for call in calls:
            self.assertEqual(next(call).job.id, blocker.id)

        with self.assertRaises(grpc.RpcError) as caught:
            next(stub.WatchJob(request, timeout=10))
        error = caught.exception
        self.assertEqual(error.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("--max_watchers", error.details())
        info = su.retry_info(error)
        self.assertIsNotNone(info, "no google.rpc.RetryInfo detail")
        self.assertEqual(info.retry_delay.seconds, 1)
        self.assertEqual(su.trailer(error, "grpc-retry-pushback-ms"), "1000")

        # A watch cancelled by its client frees its slot without any timer
        # running out: the next watch gets in.
        calls[0].cancel()
        deadline = time.monotonic() + 10
        while True:
            try:
                again = stub.WatchJob(request, timeout=30)
                self.assertEqual(next(again).job.id, blocker.id)
                break
            except grpc.RpcError as e:
                self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertLess(time.monotonic(), deadline, "slot never given back")
                time.sleep(0.01)
        stub.CancelJob(weft_pb2.CancelJobRequest(job_id=blocker.id), timeout=10)
        for call in calls[1:] + [again]:
            states = [update.job.state for update in call]
            self.assertEqual(states[-1], weft_pb2.CANCELLED)


if __name__ == "__main__":
    harness.main("watch_scale_test")
