"""Helpers shared by the service end-to-end tests.

Imports tests/harness.py (weftd start-up, ports, binaries) and adds what the
service tests need on top: Scheduler stubs, small graphs, tenant metadata and
the google.rpc.RetryInfo detail of an error.
"""

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import harness  # noqa: E402  (sets sys.path for the generated stubs)

import grpc  # noqa: E402

from google.rpc import retry_info_pb2, status_pb2  # noqa: E402
from weft.v1 import weft_pb2, weft_pb2_grpc  # noqa: E402

TERMINAL = (weft_pb2.SUCCEEDED, weft_pb2.FAILED, weft_pb2.CANCELLED)


def stub(weftd):
    return weft_pb2_grpc.SchedulerStub(weftd.channel())


def spin_chain(name, nodes, us, label=""):
    """`nodes` spin nodes of `us` microseconds each, in a chain over one buffer."""
    graph = weft_pb2.Graph(name=name)
    graph.buffers.add(name="b", size_bytes=16, output=True)
    for i in range(nodes):
        node = graph.nodes.add(name="s%d" % i, op="spin", stream_label=label)
        node.args.add().buffer.CopyFrom(
            weft_pb2.BufferArg(name="b", access=weft_pb2.READ_WRITE))
        node.cost.estimated_us = us
    return graph


def submit(weftd, graph, tenant=None, timeout=10, **fields):
    """SubmitGraph; returns the Job or raises grpc.RpcError."""
    metadata = (("weft-tenant", tenant),) if tenant is not None else None
    request = weft_pb2.SubmitGraphRequest(graph=graph, **fields)
    return stub(weftd).SubmitGraph(request, timeout=timeout, metadata=metadata).job


def get(weftd, job_id):
    return stub(weftd).GetJob(weft_pb2.GetJobRequest(job_id=job_id), timeout=10)


def wait_state(weftd, job_id, states, timeout=30):
    return harness.wait_until(
        lambda: (lambda j: j if j.state in states else None)(get(weftd, job_id)),
        timeout, what="job %s in %s" % (job_id, states))


def retry_info(error):
    """The RetryInfo detail of a grpc.RpcError, or None."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = retry_info_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info
    return None


def trailer(error, name):
    for key, value in error.trailing_metadata() or ():
        if key == name:
            return value
    return None
