"""The planner's options end to end: weftd started with --topology, every
device policy through `weftctl plan`, a job submitted with a policy and
checked by its outputs, the placement and splitting flags, the Python
client, and the errors for bad options and bad topology files."""

import json
import os
import re
import subprocess

import service_util as su  # noqa: F401,E402  (first: sets sys.path)
from service_util import harness

import weft_client  # noqa: E402
from weft.v1 import weft_pb2  # noqa: E402

FORK_JOIN = harness.example("fork_join.json")
VECTOR_PIPELINE = harness.example("vector_pipeline.json")
TOPOLOGY = harness.example("topology_2gpu.csv")
POLICIES = ("round_robin", "stream_aware", "min_transfer_size",
            "minmin_transfer_time", "minmax_transfer_time", "min_finish_time")


def node_names(path):
    with open(path) as f:
        return sorted(n["name"] for n in json.load(f)["nodes"])


class PoliciesTest(harness.WeftdTestCase):

    EXTRA_FLAGS = ("--topology=" + TOPOLOGY,)

    def plan(self, *flags):
        value = json.loads(self.weftctl_ok("plan", FORK_JOIN, "--json", *flags).stdout)
        return value.get("plan", value)

    def test_every_policy_places_every_node(self):
        expected = node_names(FORK_JOIN)
        devices_used = {}
        for policy in POLICIES:
            with self.subTest(policy=policy):
                plan = self.plan("--policy=" + policy)
                self.assertEqual(sorted(n["name"] for n in plan["nodes"]), expected)
                for n in plan["nodes"]:
                    # proto3 JSON leaves device 0 out.
                    self.assertIn(n.get("device", 0), (0, 1), n)
                    self.assertTrue(n.get("reason"), n)
                devices_used[policy] = {n.get("device", 0) for n in plan["nodes"]}
        self.assertEqual(devices_used["round_robin"], {0, 1})

    def test_submit_with_min_finish_time_computes_the_right_outputs(self):
        result = self.weftctl_ok("submit", VECTOR_PIPELINE, "--policy=min_finish_time",
                                 "--watch", "--progress=lines")
        match = re.match(r"job (\S+) ", result.stdout)
        self.assertIsNotNone(match, harness.describe(result))
        job_id = match.group(1)
        self.assertEqual(self.weftctl_ok("read", job_id, "total").stdout.split(), ["4608"])
        z = self.weftctl_ok("read", job_id, "z").stdout.split()
        self.assertEqual(z, ["4.5"] * 1024)

    def test_placement_and_splitting_flags(self):
        expected = node_names(FORK_JOIN)
        for flags in (("--restrict_to_parent_devices",),
                      ("--restrict_to_parent_devices", "--policy=min_transfer_size",
                       "--data_threshold=0.5"),
                      ("--policy=min_finish_time", "--max_nodes_per_stream=3")):
            with self.subTest(flags=flags):
                plan = self.plan(*flags)
                self.assertEqual(sorted(n["name"] for n in plan["nodes"]), expected)
                for n in plan["nodes"]:
                    self.assertIn(n.get("device", 0), (0, 1), n)
        # Streams of at most 3 tasks: fork_join's 8 nodes need more streams
        # than the unsplit plan.
        unsplit = self.plan("--policy=min_finish_time")
        split = self.plan("--policy=min_finish_time", "--max_nodes_per_stream=3")
        self.assertGreater(len(split["streams"]), len(unsplit["streams"]))

    def test_bad_options_are_usage_errors(self):
        for flag, message in (("--policy=fastest", "unknown policy 'fastest'"),
                              ("--data_threshold=1.5", "--data_threshold must be in [0, 1]"),
                              ("--data_threshold=lots", "is not a number"),
                              ("--max_nodes_per_stream=2",
                               "--max_nodes_per_stream must be at least 3")):
            for command in ("plan", "submit"):
                with self.subTest(command=command, flag=flag):
                    result = self.weftctl(command, FORK_JOIN, flag)
                    self.assertEqual(result.returncode, 2, harness.describe(result))
                    self.assertIn(message, result.stderr)

    def test_python_client_passes_the_options(self):
        with weft_client.Client(self.weftd.addr, timeout=30) as client:
            plan = client.plan(FORK_JOIN, policy="minmax_transfer_time",
                               data_threshold=0.2, restrict_to_parent_devices=True,
                               max_nodes_per_stream=4)
            self.assertEqual(sorted(n.name for n in plan.nodes), node_names(FORK_JOIN))
            job = client.run(VECTOR_PIPELINE, timeout=30, policy="min_finish_time",
                             restrict_to_parent_devices=True)
            self.assertEqual(job.state, weft_pb2.SUCCEEDED)
            self.assertEqual(client.read_floats(job.id, "total"), [4608.0])
            with self.assertRaises(Exception) as cm:
                client.plan(FORK_JOIN, max_nodes_per_stream=2)
            self.assertIn("options.max_nodes_per_stream", str(cm.exception))


class TopologyFlagTest(harness.WeftdTestCase):
    """weftd's --topology at start-up (no daemon of the base class needed)."""

    def setUp(self):
        self.workdir = harness.scratch_dir()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.workdir]))

    def tearDown(self):
        pass

    def weftd(self, *flags):
        return subprocess.run(
            [harness.WEFTD, "--listen=127.0.0.1:0", "--unix_socket=",
             "--metrics_listen=", "--backend=sim", "--sim_devices=2"] + list(flags),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)

    def test_bad_file_stops_weftd_naming_file_and_line(self):
        bad = self.write_file("bad.csv", "From,To,GB/s\n-1,0,10\n-1,x,10\n")
        result = self.weftd("--topology=" + bad)
        self.assertEqual(result.returncode, 1, harness.describe(result))
        self.assertIn("--topology: %s: topology line 3" % bad, result.stderr)

        missing = os.path.join(self.workdir, "missing.csv")
        result = self.weftd("--topology=" + missing)
        self.assertEqual(result.returncode, 1, harness.describe(result))
        self.assertIn("cannot read '%s'" % missing, result.stderr)

    def test_help_documents_the_flag(self):
        result = self.weftd("--help")
        self.assertEqual(result.returncode, 0, harness.describe(result))
        self.assertIn("--topology=", result.stdout)
        self.assertIn("GrCUDA", result.stdout)


if __name__ == "__main__":
    harness.main("policies_test")
