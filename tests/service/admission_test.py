"""Admission control through the gRPC API: a full queue answers
RESOURCE_EXHAUSTED with a RetryInfo detail, tenants come from metadata and
have their own bound, planner errors are rejected at submission, duplicate
request ids make one job, finished jobs expire, and cancelling a finished job
is FAILED_PRECONDITION."""

import threading

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness, weft_pb2

import grpc


class AdmissionTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--max_running_jobs=1", "--max_queued_jobs=2",
                   "--max_queued_jobs_per_tenant=0", "--retain_seconds=2")

    def start_blocker(self, tenant=None):
        # About 2 s of device time; the test ends long before.
        job = su.submit(self.weftd, su.spin_chain("blocker", 4, 500_000), tenant=tenant)
        su.wait_state(self.weftd, job.id, (weft_pb2.RUNNING,))
        return job

    def test_full_queue_is_resource_exhausted_with_retry_info(self):
        blocker = self.start_blocker()
        queued = [su.submit(self.weftd, su.spin_chain("q%d" % i, 1, 10)) for i in range(2)]
        with self.assertRaises(grpc.RpcError) as caught:
            su.submit(self.weftd, su.spin_chain("one-too-many", 1, 10))
        error = caught.exception
        self.assertEqual(error.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("admission queue is full (2 jobs queued, 1 running)", error.details())
        info = su.retry_info(error)
        self.assertIsNotNone(info, "no google.rpc.RetryInfo detail")
        delay_ms = info.retry_delay.seconds * 1000 + info.retry_delay.nanos // 1_000_000
        self.assertGreaterEqual(delay_ms, 10)
        self.assertLessEqual(delay_ms, 30_000)
        self.assertEqual(su.trailer(error, "grpc-retry-pushback-ms"), str(delay_ms))
        # Nothing was created for the rejected submission.
        jobs = su.stub(self.weftd).ListJobs(weft_pb2.ListJobsRequest(), timeout=10).jobs
        self.assertEqual(sorted(j.graph_name for j in jobs), ["blocker", "q0", "q1"])
        # Cancelling a queued job frees its slot at once.
        cancelled = su.stub(self.weftd).CancelJob(
            weft_pb2.CancelJobRequest(job_id=queued[0].id), timeout=10)
        self.assertEqual(cancelled.state, weft_pb2.CANCELLED)
        su.submit(self.weftd, su.spin_chain("fits-now", 1, 10))

    def test_planner_errors_are_invalid_argument_at_submission(self):
        graph = su.spin_chain("labelled", 2, 10, label="io")
        options = weft_pb2.ScheduleOptions(stream_mode=weft_pb2.SINGLE)
        with self.assertRaises(grpc.RpcError) as caught:
            su.submit(self.weftd, graph, options=options)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("stream_label", caught.exception.details())
        jobs = su.stub(self.weftd).ListJobs(weft_pb2.ListJobsRequest(), timeout=10).jobs
        self.assertEqual(list(jobs), [])

    def test_tenant_metadata_is_recorded_and_checked(self):
        job = su.submit(self.weftd, su.spin_chain("mine", 1, 10), tenant="team-a")
        self.assertEqual(job.tenant, "team-a")
        with self.assertRaises(grpc.RpcError) as caught:
            su.submit(self.weftd, su.spin_chain("bad", 1, 10), tenant="team a")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("weft-tenant metadata", caught.exception.details())
        su.wait_state(self.weftd, job.id, su.TERMINAL)

    def test_concurrent_duplicates_make_one_job(self):
        barrier = threading.Barrier(16)
        ids, errors = [], []

        def one():
            barrier.wait()
            try:
                ids.append(su.submit(self.weftd, su.spin_chain("dup", 1, 10),
                                     request_id="dup-1").id)
            except grpc.RpcError as e:
                errors.append(e)

        threads = [threading.Thread(target=one) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(set(ids)), 1, ids)
        jobs = su.stub(self.weftd).ListJobs(weft_pb2.ListJobsRequest(), timeout=10).jobs
        self.assertEqual([j.id for j in jobs], [ids[0]])

    def test_finished_jobs_expire_and_cancelling_them_is_failed_precondition(self):
        job = su.submit(self.weftd, su.spin_chain("short", 1, 10), request_id="r-1")
        done = su.wait_state(self.weftd, job.id, su.TERMINAL)
        self.assertEqual(done.state, weft_pb2.SUCCEEDED)
        with self.assertRaises(grpc.RpcError) as caught:
            su.stub(self.weftd).CancelJob(weft_pb2.CancelJobRequest(job_id=job.id), timeout=10)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("SUCCEEDED", caught.exception.details())

        # --retain_seconds=2: gone a little later, and its request id is free.
        def gone():
            try:
                su.get(self.weftd, job.id)
                return False
            except grpc.RpcError as e:
                return e.code() == grpc.StatusCode.NOT_FOUND
        harness.wait_until(gone, 10, interval=0.2, what="job %s to expire" % job.id)
        again = su.submit(self.weftd, su.spin_chain("short", 1, 10), request_id="r-1")
        self.assertNotEqual(again.id, job.id)


class PerTenantBoundTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--max_running_jobs=1", "--max_queued_jobs=10",
                   "--max_queued_jobs_per_tenant=1")

    def test_one_tenant_cannot_fill_the_queue(self):
        blocker = su.submit(self.weftd, su.spin_chain("blocker", 4, 500_000), tenant="a")
        su.wait_state(self.weftd, blocker.id, (weft_pb2.RUNNING,))
        first = su.submit(self.weftd, su.spin_chain("a1", 1, 10), tenant="a")
        with self.assertRaises(grpc.RpcError) as caught:
            su.submit(self.weftd, su.spin_chain("a2", 1, 10), tenant="a")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("tenant 'a' has 1 jobs queued", caught.exception.details())
        self.assertIsNotNone(su.retry_info(caught.exception))
        other = su.submit(self.weftd, su.spin_chain("b1", 1, 10), tenant="b")
        self.assertEqual(other.state, weft_pb2.QUEUED)
        self.assertEqual(first.tenant, "a")


if __name__ == "__main__":
    harness.main("admission_test")
