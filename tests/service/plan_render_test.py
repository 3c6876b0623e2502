"""`weftctl plan` renderings against a live weftd: the explained table, the
Chrome/Perfetto trace (valid JSON, a slice per node, named tracks, a flow per
dependency between streams), the Graphviz view, --out, and usage errors."""

import collections
import json

import service_util as su  # noqa: F401,E402  (first: sets sys.path)
from service_util import harness

FORK_JOIN = harness.example("fork_join.json")


def graph_nodes():
    with open(FORK_JOIN) as f:
        return [n["name"] for n in json.load(f)["nodes"]]


class PlanRenderTest(harness.WeftdTestCase):

    def plan_json(self):
        value = json.loads(self.weftctl_ok("plan", FORK_JOIN, "--json").stdout)
        return value.get("plan", value)

    def test_trace_has_a_slice_per_node_on_named_stream_tracks(self):
        result = self.weftctl_ok("plan", FORK_JOIN, "--simulate", "--format=trace")
        trace = json.loads(result.stdout)
        self.assertEqual(trace["displayTimeUnit"], "ms")
        events = trace["traceEvents"]
        by_phase = collections.defaultdict(list)
        for e in events:
            by_phase[e["ph"]].append(e)

        slices = by_phase["X"]
        self.assertEqual(sorted(e["name"] for e in slices), sorted(graph_nodes()))
        processes = {e["pid"]: e["args"]["name"] for e in by_phase["M"]
                     if e["name"] == "process_name"}
        self.assertEqual(processes, {0: "GPU 0", 1: "GPU 1"})
        threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in by_phase["M"]
                   if e["name"] == "thread_name"}
        plan = self.plan_json()
        self.assertEqual(len(threads), len(plan["streams"]))
        for s in plan["streams"]:
            name = threads[(s.get("device", 0), s.get("id", 0))]
            self.assertRegex(name, r"^stream %d .*%s$" % (s.get("id", 0),
                                                         s.get("engine", "COMPUTE")))
        for e in slices:
            self.assertIn((e["pid"], e["tid"]), threads, e)
            self.assertGreaterEqual(e["dur"], 0)
            self.assertIn("reason", e["args"])
            self.assertIn("deps", e["args"])
        # fork_join: 6 branches of 4 ms after a 1 ms root, then a 1 ms join.
        end = max(e["ts"] + e["dur"] for e in slices)
        # The makespan adds the output's download (1 KiB) after the join.
        makespan = trace["otherData"]["estimated_makespan_us"]
        self.assertLessEqual(end, makespan + 1e-3)
        self.assertAlmostEqual(end, makespan, delta=1)
        self.assertGreater(end, 6000 - 1e-3)

        # One flow per dependency between two tracks, both ends matched.
        track = {e["name"]: (e["pid"], e["tid"]) for e in slices}
        crossing = sorted("%s -> %s" % (d, e["name"]) for e in slices
                          for d in e["args"]["deps"] if track[d] != track[e["name"]])
        starts = {e["id"]: e for e in by_phase["s"]}
        finishes = {e["id"]: e for e in by_phase["f"]}
        self.assertEqual(set(starts), set(finishes))
        self.assertEqual(sorted(e["name"] for e in starts.values()), crossing)
        self.assertTrue(crossing, "fork_join spreads over streams")
        for flow_id, s in starts.items():
            f = finishes[flow_id]
            self.assertEqual(f["bp"], "e")
            self.assertEqual(s["name"], f["name"])
            src, dst = s["name"].split(" -> ")
            self.assertEqual((s["pid"], s["tid"]), track[src])
            self.assertEqual((f["pid"], f["tid"]), track[dst])

    def test_trace_to_a_file(self):
        out = self.write_file("plan.trace.json", "stale")
        result = self.weftctl_ok("plan", FORK_JOIN, "--format=trace", "--out=" + out)
        self.assertEqual(result.stdout, "")
        with open(out) as f:
            trace = json.load(f)
        self.assertEqual(len([e for e in trace["traceEvents"] if e["ph"] == "X"]),
                         len(graph_nodes()))

    def test_dot_is_a_digraph_with_device_clusters(self):
        dot = self.weftctl_ok("plan", FORK_JOIN, "--format=dot").stdout
        self.assertTrue(dot.startswith("digraph"), dot[:80])
        self.assertIn("subgraph cluster_gpu0 {", dot)
        self.assertIn("subgraph cluster_gpu1 {", dot)
        plan = self.plan_json()
        edges = sum(len(n.get("deps", [])) for n in plan["nodes"])
        self.assertEqual(dot.count(" -> "), edges)
        for name in graph_nodes():
            self.assertIn('[label="%s\\nstream ' % name, dot)
        self.assertTrue(dot.rstrip().endswith("}"))

    def test_table_explains_every_placement(self):
        plan = self.plan_json()
        lines = self.weftctl_ok("plan", FORK_JOIN).stdout.splitlines()
        self.assertEqual(lines[0].split()[-1], "REASON")
        self.assertNotIn("DUR_US", lines[0])
        for i, node in enumerate(plan["nodes"]):
            self.assertTrue(lines[1 + i].startswith(node["name"] + " "), lines[1 + i])
            self.assertTrue(node.get("reason"), node)
            self.assertTrue(lines[1 + i].endswith(node["reason"]), lines[1 + i])
        self.assertTrue(any(line.startswith("devices 2  streams ") and "makespan" in line
                            and "critical path" in line and "lower bound" in line
                            for line in lines), lines)
        simulated = self.weftctl_ok("plan", FORK_JOIN, "--simulate").stdout.splitlines()
        self.assertEqual(simulated[0].split()[-2:], ["DUR_US", "REASON"])
        self.assertTrue(any(line.split()[-2:] == ["BUSY_US", "UTIL"] for line in simulated))

    def test_usage_errors(self):
        bad = self.weftctl("plan", FORK_JOIN, "--format=png")
        self.assertEqual(bad.returncode, 2, harness.describe(bad))
        self.assertIn("--format: 'png' is not table, json, trace, dot or svg", bad.stderr)
        both = self.weftctl("plan", FORK_JOIN, "--json", "--format=dot")
        self.assertEqual(both.returncode, 2, harness.describe(both))
        self.assertIn("--json conflicts with --format=dot", both.stderr)
        same = self.weftctl_ok("plan", FORK_JOIN, "--json", "--format=json")
        self.assertIn("nodes", json.loads(same.stdout))
        other = self.weftctl("devices", "--format=dot")
        self.assertEqual(other.returncode, 2, harness.describe(other))


if __name__ == "__main__":
    harness.main("plan_render_test")
