"""End-to-end tests of user kernels (graph modules) against a simulated weftd.

The simulated devices do not run user kernels: a kernel node takes its
cost.estimated_us and leaves its buffers unchanged. These tests check that
graphs with modules plan and run there, that weftctl and the Python client
inline module files, and that bad specs are rejected with INVALID_ARGUMENT
naming the field.
"""

import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
    sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"],
                                    os.environ.get("TEST_WORKSPACE", "weft"), "tests"))

import harness  # noqa: E402
from harness import describe, example  # noqa: E402

import grpc  # noqa: E402

import weft_client  # noqa: E402
from weft_client import weft_pb2  # noqa: E402


def kernel_graph():
    """Two kernel nodes (CUDA source and PTX modules) and a built-in sum."""
    return {
        "name": "uk",
        "buffers": [
            {"name": "x", "sizeBytes": "64", "dtype": "FLOAT32", "fill": 2.0},
            {"name": "y", "sizeBytes": "64", "dtype": "FLOAT32", "fill": 1.0,
             "output": True},
            {"name": "total", "sizeBytes": "4", "dtype": "FLOAT32", "output": True},
        ],
        "modules": [
            {"name": "src", "cudaSource":
             'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2; }'},
            {"name": "raw", "ptx": ".version 7.0\n.target sm_80\n"},
        ],
        "nodes": [
            {"name": "twice",
             "kernel": {"module": "src", "kernel": "twice",
                        "grid": {"x": 1}, "block": {"x": 16}},
             "args": [{"buffer": {"name": "x", "access": "READ_WRITE"}}],
             "cost": {"estimatedUs": 30}},
            {"name": "mix",
             "kernel": {"module": "raw", "kernel": "mix", "grid": {"x": 2, "y": 2},
                        "block": {"x": 8, "y": 2}, "sharedMemoryBytes": 1024},
             "args": [{"buffer": {"name": "x", "access": "READ"}},
                      {"buffer": {"name": "y", "access": "READ_WRITE"}},
                      {"f32": 0.5}, {"i64": "16"}, {"f64": 1.0}, {"i32": 3}],
             "cost": {"estimatedUs": 40}},
            {"name": "sum", "op": "reduce_sum",
             "args": [{"buffer": {"name": "y", "access": "READ"}},
                      {"buffer": {"name": "total", "access": "WRITE"}}],
             "cost": {"estimatedUs": 5}},
        ],
    }


def _set(path, value):
    """A mutation that sets graph[path...] = value."""
    def mutate(graph):
        target = graph
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _delete(path):
    def mutate(graph):
        target = graph
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


REJECTIONS = {
    "unknown_module": (_set(["nodes", 0, "kernel", "module"], "nope"),
                       "graph.nodes[0].kernel.module: unknown module 'nope'"),
    "empty_kernel": (_set(["nodes", 1, "kernel", "kernel"], ""),
                     "graph.nodes[1].kernel.kernel: empty kernel name"),
    "zero_grid": (_set(["nodes", 0, "kernel", "grid"], {"x": 0}),
                  r"graph.nodes[0].kernel.grid.x: must be at least 1"),
    "too_many_threads": (_set(["nodes", 1, "kernel", "block"], {"x": 64, "y": 32}),
                         "graph.nodes[1].kernel.block: 64x32x1 = 2048 threads"),
    "shared_memory": (_set(["nodes", 1, "kernel", "sharedMemoryBytes"], 1 << 20),
                      "graph.nodes[1].kernel.shared_memory_bytes: 1048576 bytes exceed"),
    "duplicate_module": (_set(["modules", 1, "name"], "src"),
                         "graph.modules[1].name: duplicate module name 'src'"),
    "missing_code": (_delete(["modules", 1, "ptx"]),
                     "graph.modules[1]: module 'raw' has no code"),
    "host_engine": (_set(["nodes", 0, "engine"], "HOST"),
                    "graph.nodes[0].engine: a user kernel runs on a GPU"),
    "op_and_kernel": (_set(["nodes", 0, "op"], "spin"),
                      "graph.nodes[0].op: op 'spin' and kernel are both set"),
}


class UserKernelTest(harness.WeftdTestCase):

    def setUp(self):
        super().setUp()
        self.client = weft_client.Client(self.weftd.addr, timeout=30)
        self.addCleanup(self.client.close)

    def test_plan_and_run_on_simulated_devices(self):
        graph = kernel_graph()
        plan = self.client.plan(graph)
        names = [n.name for n in plan.nodes]
        self.assertEqual(sorted(names), ["mix", "sum", "twice"])
        by_name = {n.name: n for n in plan.nodes}
        # Dependencies come from the kernels' buffer access.
        self.assertEqual(list(by_name["mix"].deps), ["twice"])
        self.assertEqual(list(by_name["sum"].deps), ["mix"])
        self.assertGreaterEqual(plan.estimated_makespan_us, 75)

        job = self.client.wait(self.client.submit(graph).id, timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        self.assertEqual(job.nodes_done, 3)
        # The simulator does not run user kernels: y keeps its fill.
        self.assertEqual(self.client.read_floats(job.id, "y"), [1.0] * 16)
        self.assertEqual(self.client.read_floats(job.id, "total"), [16.0])

    def test_example_with_a_source_file(self):
        # The Python client inlines sourceFile (relative to the graph file).
        loaded = weft_client.load_graph(example("user_kernel.json"))
        self.assertIn("__global__ void saxpy", loaded.modules[0].cuda_source)
        job = self.client.wait(self.client.submit(example("user_kernel.json")).id,
                               timeout=60)
        self.assertEqual(job.state, weft_pb2.SUCCEEDED, job)
        self.assertEqual(self.client.read_floats(job.id, "total"), [1024.0])

    def test_weftctl_plans_and_runs_the_example(self):
        plan = self.weftctl_ok("plan", example("user_kernel.json"))
        self.assertIn("saxpy", plan.stdout, describe(plan))
        self.assertIn("sum", plan.stdout, describe(plan))
        self.weftctl_ok("submit", example("user_kernel.json"), "--watch", timeout=60)

    def test_weftctl_reports_an_unreadable_module_file(self):
        graph = kernel_graph()
        graph["modules"][0] = {"name": "src", "sourceFile": "missing.cu"}
        path = self.write_file("missing_file.json", json.dumps(graph))
        result = self.weftctl("submit", path)
        self.assertEqual(result.returncode, 1, describe(result))
        self.assertIn("modules[0].source_file: cannot read", result.stderr,
                      describe(result))

    def test_daemon_rejects_unresolved_file_references(self):
        graph = kernel_graph()
        graph["modules"][1] = {"name": "raw", "ptxFile": "k.ptx"}
        with self.assertRaises(grpc.RpcError) as caught:
            # A dict is sent as it is: nothing inlines the file.
            self.client.submit(graph)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("graph.modules[1].ptx_file: file references are read by the client",
                      caught.exception.details())


def _make_rejection_test(mutate, expected):
    def test(self):
        graph = copy.deepcopy(kernel_graph())
        mutate(graph)
        for call in (self.client.submit, self.client.plan):
            with self.assertRaises(grpc.RpcError) as caught:
                call(graph)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                             caught.exception.details())
            self.assertIn(expected.replace("\\", ""), caught.exception.details())
        self.assertEqual(self.client.list(), [])
    return test


for _name, (_mutate, _expected) in REJECTIONS.items():
    setattr(UserKernelTest, "test_rejects_" + _name, _make_rejection_test(_mutate, _expected))


if __name__ == "__main__":
    harness.main("e2e_user_kernel_test")
