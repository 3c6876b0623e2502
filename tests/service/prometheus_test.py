"""A real Prometheus (Debian's /usr/bin/prometheus) scrapes weftd on
loopback; the weft_ metrics are checked through Prometheus' HTTP query API,
which is how dashboards and alerts will read them. Skips when Prometheus is
not installed (tools/install_deps.sh installs it)."""

import json
import os
import shutil
import subprocess
import unittest
import urllib.parse
import urllib.request

import service_util as su  # noqa: E402  (first: sets sys.path)
from service_util import harness, weft_pb2

PROMETHEUS = "/usr/bin/prometheus"
SIM_MEMORY = 1 << 30


class Prometheus:
    def __init__(self, workdir, target):
        self.port = harness.free_port()
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "prometheus.log")
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n"
                    "  scrape_interval: 1s\n"
                    "  scrape_timeout: 900ms\n"
                    "scrape_configs:\n"
                    "  - job_name: weftd\n"
                    "    static_configs:\n"
                    "      - targets: ['%s']\n" % target)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + config,
                 "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                 "--web.listen-address=127.0.0.1:%d" % self.port,
                 "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def query(self, expr):
        """Instant query; returns [(labels dict, float value)]."""
        url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (
            self.port, urllib.parse.quote(expr))
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise AssertionError("query %r failed: %s" % (expr, body))
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@unittest.skipUnless(os.access(PROMETHEUS, os.X_OK),
                     PROMETHEUS + " is missing; run tools/install_deps.sh")
class PrometheusTest(harness.WeftdTestCase):
    EXTRA_FLAGS = ("--sim_memory_bytes=%d" % SIM_MEMORY,)

    def setUp(self):
        super().setUp()
        prom_dir = os.path.join(os.environ.get("TEST_TMPDIR", self.workdir), "prometheus")
        shutil.rmtree(prom_dir, ignore_errors=True)
        os.makedirs(prom_dir)
        self.prometheus = Prometheus(prom_dir, "127.0.0.1:%d" % self.weftd.metrics_port)
        self.addCleanup(self.prometheus.stop)

    def poll(self, expr, predicate, what, timeout=40):
        last = []

        def check():
            nonlocal last
            try:
                last = self.prometheus.query(expr)
            except OSError:  # not listening yet
                return None
            return last if predicate(last) else None
        try:
            return harness.wait_until(check, timeout, interval=0.5, what=what)
        except AssertionError:
            raise AssertionError("%s: last answer to %r: %s\n--- prometheus log ---\n%s"
                                 % (what, expr, last, self.prometheus.log()))

    def test_prometheus_scrapes_the_weft_metrics(self):
        ids = [su.submit(self.weftd, su.spin_chain("ok%d" % i, 2, 100), tenant="alpha").id
               for i in range(3)]
        # The first graph again: run from the plan kept for it, not planned.
        ids.append(su.submit(self.weftd, su.spin_chain("ok0", 2, 100), tenant="alpha").id)
        long_job = su.submit(self.weftd, su.spin_chain("cancelled", 2, 300_000), tenant="beta")
        su.wait_state(self.weftd, long_job.id, (weft_pb2.RUNNING,))
        su.stub(self.weftd).CancelJob(weft_pb2.CancelJobRequest(job_id=long_job.id), timeout=30)
        for job_id in ids + [long_job.id]:
            su.wait_state(self.weftd, job_id, su.TERMINAL)

        self.poll('up{job="weftd"}', lambda r: r and r[0][1] == 1.0, "weftd scraped")

        def jobs(result):
            return {(m.get("tenant", ""), m["outcome"]): v for m, v in result}
        result = self.poll("weft_jobs_total",
                           lambda r: jobs(r).get(("beta", "cancelled")) == 1.0,
                           "weft_jobs_total for both tenants")
        counts = jobs(result)
        self.assertEqual(counts[("alpha", "succeeded")], 4.0, counts)
        self.assertEqual(counts[("beta", "cancelled")], 1.0, counts)
        self.assertEqual(counts.get(("alpha", "failed"), 0.0), 0.0, counts)
        for labels, _ in result:
            self.assertEqual(labels["job"], "weftd")

        # 4 jobs x 2 spin nodes finished; the cancelled one may add a node.
        nodes = self.prometheus.query('sum(weft_node_executions_total{op="spin"})')
        self.assertGreaterEqual(nodes[0][1], 8.0)
        waits = self.prometheus.query("weft_queue_wait_seconds_count")
        self.assertEqual(waits[0][1], 5.0)
        durations = self.prometheus.query(
            'sum by (outcome) (weft_job_duration_seconds_count)')
        self.assertEqual({m["outcome"]: v for m, v in durations}["succeeded"], 4.0)
        # Five jobs, four plans: the repeated graph was not planned again.
        self.assertEqual(self.prometheus.query("weft_planning_seconds_count")[0][1], 4.0)
        lookups = {m["result"]: v for m, v in
                   self.prometheus.query("weft_plan_cache_lookups_total")}
        self.assertEqual(lookups, {"hit": 1.0, "miss": 4.0})
        read_back = self.prometheus.query('weft_copy_bytes_total{direction="device_to_host"}')
        self.assertGreaterEqual(read_back[0][1], 4 * 16.0)  # each output read back

        capacity = self.prometheus.query("weft_device_memory_capacity_bytes")
        self.assertEqual(len(capacity), 2, capacity)
        uuids = {m["UUID"] for m, v in capacity}
        self.assertEqual(len(uuids), 2, capacity)
        for labels, value in capacity:
            self.assertEqual(value, float(SIM_MEMORY))
            self.assertTrue(labels["UUID"].startswith("GPU-"), labels)
        devices = {d.uuid for d in su.stub(self.weftd).ListDevices(
            weft_pb2.ListDevicesRequest(), timeout=10).devices}
        self.assertEqual(uuids, devices)
        for name in ("weft_device_streams", "weft_device_busy_streams",
                     "weft_device_memory_used_bytes", "weft_queue_depth",
                     "weft_jobs_running"):
            self.assertTrue(self.prometheus.query(name), name)
        # Rates work, as a dashboard would use them (from the second scrape on).
        rates = self.poll('rate(weft_jobs_submitted_total{tenant="alpha"}[1m])', bool,
                          "a rate of submissions")
        self.assertGreaterEqual(rates[0][1], 0.0)


if __name__ == "__main__":
    harness.main("prometheus_test")
