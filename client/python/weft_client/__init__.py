"""Python client for the Weft GPU graph scheduler (weft.v1.Scheduler).

    from weft_client import Client

    with Client("127.0.0.1:50051") as weft:
        job = weft.submit("examples/vector_pipeline.json")
        job = weft.wait(job.id)
        print(weft.read_floats(job.id, "total"))
"""

from weft_client._stubs import weft_pb2, weft_pb2_grpc
from weft_client.client import (
    TERMINAL_STATES,
    Client,
    JobFailedError,
    decode_values,
    inline_module_files,
    job_to_dict,
    load_graph,
    to_graph,
)

__all__ = [
    "Client",
    "JobFailedError",
    "TERMINAL_STATES",
    "decode_values",
    "inline_module_files",
    "job_to_dict",
    "load_graph",
    "to_graph",
    "weft_pb2",
    "weft_pb2_grpc",
]
