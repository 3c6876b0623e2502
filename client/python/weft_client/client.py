"""A small, synchronous wrapper around the weft.v1.Scheduler gRPC service.

Every method maps to one RPC and raises grpc.RpcError on failure, so callers
see the server's status code (e.details() carries its message, which names
the offending field for a rejected graph). Not thread-safe for concurrent
close(); the underlying gRPC channel itself may be shared by threads.
"""

import json
import os
import struct
import time

import grpc
from google.protobuf import json_format, text_format

from weft_client._stubs import weft_pb2, weft_pb2_grpc

DEFAULT_ADDR = "127.0.0.1:50051"
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20

TERMINAL_STATES = frozenset([
    weft_pb2.SUCCEEDED,
    weft_pb2.FAILED,
    weft_pb2.CANCELLED,
])

_TEXT_EXTENSIONS = (".textproto", ".txtpb", ".pbtxt")

# struct formats (little-endian) of the numeric dtypes.
_DTYPE_FORMATS = {
    weft_pb2.FLOAT32: "f",
    weft_pb2.FLOAT64: "d",
    weft_pb2.INT32: "i",
    weft_pb2.INT64: "q",
}

_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


class JobFailedError(Exception):
    """Raised by Client.wait(check=True) when a job ends other than SUCCEEDED."""

    def __init__(self, job):
        self.job = job
        state = weft_pb2.JobState.Name(job.state)
        detail = job.error.message or "no error message"
        if job.error.node:
            detail = "node %s: %s" % (job.error.node, detail)
        super().__init__("job %s %s: %s" % (job.id, state, detail))


def load_graph(path):
    """Reads a graph file: proto3 JSON for *.json, text format for *.textproto."""
    if path.endswith(".json"):
        parse = json_format.Parse
    elif path.endswith(_TEXT_EXTENSIONS):
        parse = text_format.Parse
    else:
        raise ValueError("%s: graph files end in .json or .textproto" % path)
    with open(path, "r", encoding="utf-8") as f:
        graph = parse(f.read(), weft_pb2.Graph())
    inline_module_files(graph, os.path.dirname(path) or ".")
    return graph


def inline_module_files(graph, base_dir):
    """Replaces each module's source_file / ptx_file with the file's contents.

    The daemon takes only inline code (cuda_source / ptx); relative paths are
    taken from base_dir (the graph file's directory). Raises OSError naming
    the module's field when a file cannot be read.
    """
    for i, module in enumerate(graph.modules):
        kind = module.WhichOneof("code")
        if kind not in ("source_file", "ptx_file"):
            continue
        path = os.path.join(base_dir, getattr(module, kind))
        try:
            with open(path, "r", encoding="utf-8") as f:
                code = f.read()
        except OSError as e:
            raise OSError("modules[%d].%s: cannot read %s: %s"
                          % (i, kind, path, e.strerror)) from e
        if kind == "source_file":
            module.cuda_source = code
        else:
            module.ptx = code


def to_graph(graph):
    """Accepts a weft_pb2.Graph, a dict in the proto3 JSON mapping, or a file path."""
    if isinstance(graph, weft_pb2.Graph):
        return graph
    if isinstance(graph, dict):
        return json_format.ParseDict(graph, weft_pb2.Graph())
    if isinstance(graph, (str, os.PathLike)):
        return load_graph(os.fspath(graph))
    raise TypeError("graph must be a weft_pb2.Graph, a dict or a path, not %s"
                    % type(graph).__name__)


def decode_values(data, dtype):
    """Decodes buffer bytes into a list of numbers per `dtype` (BYTES -> bytes)."""
    fmt = _DTYPE_FORMATS.get(dtype)
    if fmt is None:
        return bytes(data)
    size = struct.calcsize(fmt)
    count = len(data) // size
    return list(struct.unpack("<%d%s" % (count, fmt), data[:count * size]))


def _enum_value(enum_type, value, what):
    """Maps 'round_robin' / 'ROUND_ROBIN' / 0 to the enum's number."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        return enum_type.Value(str(value).upper())
    except ValueError:
        names = ", ".join(n.lower() for n in enum_type.keys())
        raise ValueError("unknown %s %r (one of: %s)" % (what, value, names))


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _health_status(data):
    """Extracts field 1 (status) from an encoded grpc.health.v1.HealthCheckResponse."""
    pos = 0
    status = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            if field == 1:
                status = value
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            break
    return _HEALTH_STATUS.get(status, "UNKNOWN")


class Client:
    """Talks to one weftd. `addr` is host:port or unix:/path/to/socket."""

    def __init__(self, addr=DEFAULT_ADDR, timeout=30.0,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, channel=None):
        self.addr = addr
        self.timeout = timeout
        if channel is None:
            channel = grpc.insecure_channel(addr, options=[
                ("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes),
            ])
        self._channel = channel
        self._stub = weft_pb2_grpc.SchedulerStub(channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _timeout(self, timeout):
        return self.timeout if timeout is None else timeout

    @staticmethod
    def _options(policy, stream_mode, max_streams_per_device, data_threshold=0.0,
                 restrict_to_parent_devices=False, max_nodes_per_stream=0):
        """ScheduleOptions; 0 / None / False leave the daemon's defaults."""
        options = weft_pb2.ScheduleOptions(
            stream_mode=_enum_value(weft_pb2.StreamMode, stream_mode, "stream mode"),
            max_streams_per_device=max_streams_per_device,
            data_threshold=data_threshold,
            restrict_to_parent_devices=restrict_to_parent_devices,
            max_nodes_per_stream=max_nodes_per_stream)
        if policy is not None:
            options.device_policy = _enum_value(
                weft_pb2.DevicePolicy, policy, "policy")
        return options

    # ------------------------------------------------------------------ jobs

    def submit(self, graph, policy=None, stream_mode=None,
               max_streams_per_device=0, priority=0, request_id="",
               timeout=None, *, data_threshold=0.0,
               restrict_to_parent_devices=False, max_nodes_per_stream=0,
               launch_mode=None, control_mode=None):
        """Submits a graph (proto, dict or file path); returns the new weft_pb2.Job.

        data_threshold (in [0, 1], 0: the default 0.1), restrict_to_parent_devices
        and max_nodes_per_stream (at least 3, 0: the default) tune the planner as
        weftctl's flags of the same names do; launch_mode ("auto", "streams" or
        "graphs") and control_mode ("auto", "host" or "device") as weftctl's
        --launch_mode and --control_mode.
        """
        options = self._options(policy, stream_mode, max_streams_per_device,
                                data_threshold, restrict_to_parent_devices,
                                max_nodes_per_stream)
        if launch_mode is not None:
            modes = {"auto": weft_pb2.LAUNCH_AUTO,
                     "streams": weft_pb2.LAUNCH_STREAMS,
                     "graphs": weft_pb2.LAUNCH_DEVICE_GRAPHS}
            if str(launch_mode).lower() not in modes:
                raise ValueError("unknown launch mode %r (one of: auto, streams, graphs)"
                                 % (launch_mode,))
            options.launch_mode = modes[str(launch_mode).lower()]
        if control_mode is not None:
            modes = {"auto": weft_pb2.CONTROL_AUTO,
                     "host": weft_pb2.CONTROL_HOST,
                     "device": weft_pb2.CONTROL_DEVICE}
            if str(control_mode).lower() not in modes:
                raise ValueError("unknown control mode %r (one of: auto, host, device)"
                                 % (control_mode,))
            options.control_mode = modes[str(control_mode).lower()]
        request = weft_pb2.SubmitGraphRequest(
            graph=to_graph(graph),
            options=options,
            request_id=request_id,
            priority=priority)
        return self._stub.SubmitGraph(request, timeout=self._timeout(timeout)).job

    def get(self, job_id, timeout=None):
        return self._stub.GetJob(weft_pb2.GetJobRequest(job_id=job_id),
                                 timeout=self._timeout(timeout))

    def cancel(self, job_id, timeout=None):
        return self._stub.CancelJob(weft_pb2.CancelJobRequest(job_id=job_id),
                                    timeout=self._timeout(timeout))

    def list(self, state=None, page_size=0, timeout=None):
        request = weft_pb2.ListJobsRequest(
            state=_enum_value(weft_pb2.JobState, state, "job state"),
            page_size=page_size)
        return list(self._stub.ListJobs(request, timeout=self._timeout(timeout)).jobs)

    def watch(self, job_id, timeout=None):
        """Yields WatchJobResponse messages until the job has ended and every
        node event it kept was sent (weftd then ends the stream).

        The first message is the job as it is; node events follow from the
        job's first, with `events_dropped` counting those it no longer kept.
        `timeout` bounds the whole stream (None: no deadline).
        """
        stream = self._stub.WatchJob(weft_pb2.WatchJobRequest(job_id=job_id),
                                     timeout=timeout)
        try:
            for update in stream:
                yield update
        finally:
            stream.cancel()

    def wait(self, job_id, timeout=None, check=False):
        """Watches a job to its end and returns the final Job.

        With check=True raises JobFailedError unless the job SUCCEEDED.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = None
        for update in self.watch(job_id, timeout=timeout):
            if update.HasField("job"):
                job = update.job
        if job is None or job.state not in TERMINAL_STATES:
            remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
            job = self.get(job_id, timeout=remaining)
        if check and job.state != weft_pb2.SUCCEEDED:
            raise JobFailedError(job)
        return job

    def run(self, graph, timeout=None, **submit_args):
        """Submits a graph and waits for it; raises JobFailedError on failure."""
        job = self.submit(graph, **submit_args)
        return self.wait(job.id, timeout=timeout, check=True)

    # -------------------------------------------------------------- planning

    def plan(self, graph, policy=None, stream_mode=None,
             max_streams_per_device=0, timeout=None, *, data_threshold=0.0,
             restrict_to_parent_devices=False, max_nodes_per_stream=0):
        """Dry run: returns the weft_pb2.Plan the daemon would execute.

        Takes the planner options of submit().
        """
        request = weft_pb2.PlanGraphRequest(
            graph=to_graph(graph),
            options=self._options(policy, stream_mode, max_streams_per_device,
                                  data_threshold, restrict_to_parent_devices,
                                  max_nodes_per_stream))
        return self._stub.PlanGraph(request, timeout=self._timeout(timeout)).plan

    def devices(self, timeout=None):
        response = self._stub.ListDevices(weft_pb2.ListDevicesRequest(),
                                          timeout=self._timeout(timeout))
        return list(response.devices)

    # --------------------------------------------------------------- outputs

    def read_buffer_with_dtype(self, job_id, buffer, chunk_bytes=0, timeout=None):
        """Returns (bytes, dtype) of an output buffer of a finished job."""
        request = weft_pb2.ReadBufferRequest(job_id=job_id, buffer=buffer,
                                             chunk_bytes=chunk_bytes)
        data = bytearray()
        dtype = weft_pb2.BYTES
        total = None
        for chunk in self._stub.ReadBuffer(request, timeout=self._timeout(timeout)):
            if chunk.offset != len(data):
                raise IOError("buffer %s: chunk at offset %d, expected %d"
                              % (buffer, chunk.offset, len(data)))
            data += chunk.data
            dtype = chunk.dtype
            total = chunk.total_bytes
        if total is not None and total != len(data):
            raise IOError("buffer %s: got %d of %d bytes" % (buffer, len(data), total))
        return bytes(data), dtype

    def read_buffer(self, job_id, buffer, chunk_bytes=0, timeout=None):
        """Returns the bytes of an output buffer of a finished job."""
        return self.read_buffer_with_dtype(job_id, buffer, chunk_bytes, timeout)[0]

    def trace(self, job_id, timeout=None):
        """Returns the Chrome/Perfetto trace-event JSON of a finished job as a dict."""
        import json
        request = weft_pb2.GetJobTraceRequest(job_id=job_id)
        data = bytearray()
        total = None
        for chunk in self._stub.GetJobTrace(request, timeout=self._timeout(timeout)):
            data += chunk.chunk
            total = chunk.total_bytes
        if total is not None and total != len(data):
            raise IOError("trace of %s: got %d of %d bytes" % (job_id, len(data), total))
        return json.loads(bytes(data).decode("utf-8"))

    def read_values(self, job_id, buffer, timeout=None):
        """Returns an output buffer decoded per its dtype (BYTES stays bytes)."""
        data, dtype = self.read_buffer_with_dtype(job_id, buffer, timeout=timeout)
        return decode_values(data, dtype)

    def read_floats(self, job_id, buffer, timeout=None):
        """Returns a FLOAT32 or FLOAT64 output buffer as a list of floats."""
        data, dtype = self.read_buffer_with_dtype(job_id, buffer, timeout=timeout)
        if dtype not in (weft_pb2.FLOAT32, weft_pb2.FLOAT64):
            raise TypeError("buffer %s has dtype %s, not a float type"
                            % (buffer, weft_pb2.DType.Name(dtype)))
        return decode_values(data, dtype)

    # ---------------------------------------------------------------- health

    def health(self, service="", timeout=None):
        """grpc.health.v1 Check; returns 'SERVING', 'NOT_SERVING', ...

        The health messages have a single field each, so they are encoded by
        hand rather than with generated code.
        """
        name = service.encode("utf-8")
        request = (b"\x0a" + _varint(len(name)) + name) if name else b""
        check = self._channel.unary_unary(_HEALTH_CHECK)
        return _health_status(check(request, timeout=self._timeout(timeout)))


def job_to_dict(job):
    """A Job (or any message) as the proto3 JSON mapping, as a dict."""
    return json.loads(json_format.MessageToJson(job))
