"""Unit tests for weft_client against an in-process fake Scheduler service.

These check the wrapper itself (graph loading, option mapping, chunk
reassembly, watch termination, value decoding, the hand-encoded health
check); tests/e2e_python_test.py checks it against a real weftd.
"""

import os
import struct
import sys
import unittest
from concurrent import futures

_WORKSPACE = os.path.join(os.environ.get("TEST_SRCDIR", ""),
                          os.environ.get("TEST_WORKSPACE", "weft"))
_ROOT = _WORKSPACE if os.environ.get("TEST_SRCDIR") else os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "client", "python"))

import grpc  # noqa: E402

import weft_client  # noqa: E402
from weft_client import client as client_lib  # noqa: E402
from weft_client import weft_pb2, weft_pb2_grpc  # noqa: E402


def example(name):
    return os.path.join(_ROOT, "examples", name)


class FakeScheduler(weft_pb2_grpc.SchedulerServicer):
    """Records requests and answers from canned data."""

    def __init__(self):
        self.submits = []
        self.plans = []
        self.buffer = struct.pack("<4f", 1.0, 2.5, -3.0, 4608.0)
        self.chunk = 5

    def SubmitGraph(self, request, context):
        self.submits.append(request)
        if not request.graph.nodes:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "graph.nodes: a graph needs at least one node")
        return weft_pb2.SubmitGraphResponse(job=weft_pb2.Job(
            id="job-1", graph_name=request.graph.name, state=weft_pb2.QUEUED,
            nodes_total=len(request.graph.nodes)))

    def GetJob(self, request, context):
        if request.job_id != "job-1":
            context.abort(grpc.StatusCode.NOT_FOUND, "job %s" % request.job_id)
        return weft_pb2.Job(id="job-1", state=weft_pb2.SUCCEEDED)

    def WatchJob(self, request, context):
        yield weft_pb2.WatchJobResponse(job=weft_pb2.Job(id="job-1", state=weft_pb2.RUNNING))
        yield weft_pb2.WatchJobResponse(node_events=[
            weft_pb2.NodeEvent(node="a", kind=weft_pb2.NODE_FINISHED)])
        yield weft_pb2.WatchJobResponse(job=weft_pb2.Job(
            id="job-1", state=weft_pb2.FAILED,
            error=weft_pb2.JobError(code=13, message="boom", node="a")))

    def ReadBuffer(self, request, context):
        step = request.chunk_bytes or self.chunk
        for offset in range(0, len(self.buffer), step):
            yield weft_pb2.ReadBufferResponse(
                offset=offset, data=self.buffer[offset:offset + step],
                total_bytes=len(self.buffer), dtype=weft_pb2.FLOAT32)

    def PlanGraph(self, request, context):
        self.plans.append(request)
        return weft_pb2.PlanGraphResponse(plan=weft_pb2.Plan(
            nodes=[weft_pb2.PlannedNode(name=n.name) for n in request.graph.nodes],
            num_devices=2))

    def ListDevices(self, request, context):
        return weft_pb2.ListDevicesResponse(devices=[
            weft_pb2.Device(index=0, simulated=True), weft_pb2.Device(index=1, simulated=True)])


class FakeHealth(grpc.GenericRpcHandler):
    """grpc.health.v1.Health/Check over raw bytes: SERVING for "" only."""

    def service(self, handler_call_details):
        if handler_call_details.method != "/grpc.health.v1.Health/Check":
            return None

        def check(request, context):
            # "" -> SERVING (1); any named service -> SERVICE_UNKNOWN (3).
            return b"\x08\x01" if request == b"" else b"\x08\x03"

        return grpc.unary_unary_rpc_method_handler(check)


class ClientTest(unittest.TestCase):

    def setUp(self):
        self.fake = FakeScheduler()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        weft_pb2_grpc.add_SchedulerServicer_to_server(self.fake, self.server)
        self.server.add_generic_rpc_handlers((FakeHealth(),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.client = weft_client.Client("127.0.0.1:%d" % port, timeout=10)

    def tearDown(self):
        self.client.close()
        self.server.stop(None)

    def test_submit_accepts_path_dict_and_proto(self):
        job = self.client.submit(example("vector_pipeline.json"), policy="round_robin",
                                 stream_mode="single", priority=3, request_id="r1")
        self.assertEqual(job.id, "job-1")
        self.assertEqual(job.nodes_total, 5)
        request = self.fake.submits[-1]
        self.assertEqual(request.options.stream_mode, weft_pb2.SINGLE)
        self.assertEqual(request.priority, 3)
        self.assertEqual(request.request_id, "r1")

        graph = {"name": "d", "nodes": [{"name": "n", "op": "spin"}]}
        self.assertEqual(self.client.submit(graph).graph_name, "d")
        proto = weft_pb2.Graph(name="p", nodes=[weft_pb2.Node(name="n", op="spin")])
        self.assertEqual(self.client.submit(proto).graph_name, "p")

    def test_submit_error_keeps_code_and_details(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.submit({"name": "empty"})
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("graph.nodes", cm.exception.details())

    def test_unknown_policy_is_rejected_locally(self):
        with self.assertRaisesRegex(ValueError, "unknown policy 'fastest'"):
            self.client.submit(example("fork_join.json"), policy="fastest")

    def test_watch_yields_every_message_until_the_stream_ends(self):
        updates = list(self.client.watch("job-1", timeout=10))
        self.assertEqual(len(updates), 3)
        self.assertEqual(updates[1].node_events[0].node, "a")
        self.assertEqual(updates[-1].job.state, weft_pb2.FAILED)

    def test_wait_check_raises_with_failing_node(self):
        with self.assertRaisesRegex(weft_client.JobFailedError, "node a: boom"):
            self.client.wait("job-1", timeout=10, check=True)
        self.assertEqual(self.client.wait("job-1", timeout=10).state, weft_pb2.FAILED)

    def test_read_reassembles_chunks(self):
        self.assertEqual(self.client.read_buffer("job-1", "total"), self.fake.buffer)
        self.assertEqual(self.client.read_floats("job-1", "total"), [1.0, 2.5, -3.0, 4608.0])
        self.assertEqual(self.client.read_buffer("job-1", "total", chunk_bytes=3),
                         self.fake.buffer)

    def test_get_not_found(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.get("nope")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_plan_and_devices(self):
        plan = self.client.plan(example("scale_and_copy.textproto"))
        self.assertEqual([n.name for n in plan.nodes], ["scale", "copy", "sum", "trace"])
        self.assertEqual(len(self.client.devices()), 2)

    def test_planner_options_reach_the_request(self):
        self.client.plan(example("fork_join.json"), policy="min_finish_time",
                         data_threshold=0.3, restrict_to_parent_devices=True,
                         max_nodes_per_stream=5)
        options = self.fake.plans[-1].options
        self.assertEqual(options.device_policy, weft_pb2.MIN_FINISH_TIME)
        self.assertAlmostEqual(options.data_threshold, 0.3)
        self.assertTrue(options.restrict_to_parent_devices)
        self.assertEqual(options.max_nodes_per_stream, 5)
        self.client.submit(example("fork_join.json"), policy="minmax_transfer_time",
                           data_threshold=0.5, max_nodes_per_stream=7)
        options = self.fake.submits[-1].options
        self.assertEqual(options.device_policy, weft_pb2.MINMAX_TRANSFER_TIME)
        self.assertAlmostEqual(options.data_threshold, 0.5)
        self.assertFalse(options.restrict_to_parent_devices)
        self.assertEqual(options.max_nodes_per_stream, 7)
        self.assertEqual(options.launch_mode, weft_pb2.LAUNCH_AUTO)
        self.client.submit(example("fork_join.json"), launch_mode="graphs")
        self.assertEqual(self.fake.submits[-1].options.launch_mode,
                         weft_pb2.LAUNCH_DEVICE_GRAPHS)
        with self.assertRaisesRegex(ValueError, "unknown launch mode 'often'"):
            self.client.submit(example("fork_join.json"), launch_mode="often")

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("other.Service"), "SERVICE_UNKNOWN")


class GraphFileTest(unittest.TestCase):

    def test_examples_load(self):
        self.assertEqual(len(weft_client.load_graph(example("vector_pipeline.json")).nodes), 5)
        self.assertEqual(len(weft_client.load_graph(example("fork_join.json")).nodes), 8)
        graph = weft_client.load_graph(example("scale_and_copy.textproto"))
        self.assertEqual(graph.nodes[1].engine, weft_pb2.COPY)
        self.assertEqual(list(graph.nodes[3].after), ["copy"])

    def test_module_files_are_inlined(self):
        graph = weft_client.load_graph(example("user_kernel.json"))
        self.assertEqual(graph.modules[0].WhichOneof("code"), "cuda_source")
        self.assertIn('extern "C" __global__ void saxpy', graph.modules[0].cuda_source)
        self.assertEqual(list(graph.modules[0].nvrtc_options), ["--use_fast_math"])
        self.assertEqual(graph.nodes[0].kernel.block.x, 256)

    def test_unreadable_module_file_names_the_field(self):
        graph = weft_pb2.Graph()
        graph.modules.add(name="m", ptx_file="nowhere.ptx")
        with self.assertRaisesRegex(OSError, r"modules\[0\]\.ptx_file: cannot read "):
            client_lib.inline_module_files(graph, "/nonexistent")

    def test_bad_extension(self):
        with self.assertRaisesRegex(ValueError, "end in .json or .textproto"):
            weft_client.load_graph(example("notes.yaml"))

    def test_decode_values(self):
        self.assertEqual(weft_client.decode_values(struct.pack("<2d", 1.5, -2), weft_pb2.FLOAT64),
                         [1.5, -2.0])
        self.assertEqual(weft_client.decode_values(struct.pack("<3i", 1, -2, 7), weft_pb2.INT32),
                         [1, -2, 7])
        self.assertEqual(weft_client.decode_values(struct.pack("<q", -5), weft_pb2.INT64), [-5])
        self.assertEqual(weft_client.decode_values(b"\x01\x02", weft_pb2.BYTES), b"\x01\x02")

    def test_health_wire_format(self):
        self.assertEqual(client_lib._varint(300), b"\xac\x02")
        self.assertEqual(client_lib._health_status(b"\x08\x02"), "NOT_SERVING")
        self.assertEqual(client_lib._health_status(b""), "UNKNOWN")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print("client_test: %d passed, %d failed" % (result.testsRun - failed, failed))
    sys.exit(0 if result.wasSuccessful() else 1)
