#!/usr/bin/python3
"""Submits a graph to weftd, follows it to the end and prints its outputs.

    bazel build //proto:weft_py_gen
    /usr/bin/python3 client/python/examples/submit_and_read.py \
        --addr=127.0.0.1:50051 examples/vector_pipeline.json
"""

import argparse
import os
import sys

# Make `weft_client` importable when run from a source checkout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import grpc  # noqa: E402

import weft_client  # noqa: E402
from weft_client import weft_pb2  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", help="graph file (.json or .textproto)")
    parser.add_argument("--addr", default="127.0.0.1:50051",
                        help="host:port or unix:/path of weftd")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the job")
    parser.add_argument("--max_values", type=int, default=8,
                        help="values printed per output buffer")
    args = parser.parse_args()

    with weft_client.Client(args.addr) as weft:
        try:
            job = weft.submit(args.graph)
            print("job %s %s (%d nodes)" % (job.id, weft_pb2.JobState.Name(job.state),
                                          job.nodes_total))
            for update in weft.watch(job.id, timeout=args.timeout):
                for event in update.node_events:
                    print("  %-13s %-16s device %d stream %d" % (
                        weft_pb2.NodeEventKind.Name(event.kind), event.node,
                        event.device, event.stream))
                if update.HasField("job"):
                    job = update.job
            job = weft.get(job.id)
        except grpc.RpcError as e:
            print("error: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
            return 1
        print("job %s %s" % (job.id, weft_pb2.JobState.Name(job.state)))
        if job.state != weft_pb2.SUCCEEDED:
            print("error: %s" % job.error.message, file=sys.stderr)
            return 1
        for name in job.output_buffers:
            values = weft.read_values(job.id, name)
            shown = values[:args.max_values]
            more = " ... (%d values)" % len(values) if len(values) > len(shown) else ""
            if isinstance(shown, bytes):
                shown = shown.hex()
            print("%s: %s%s" % (name, shown, more))
    return 0


if __name__ == "__main__":
    sys.exit(main())
