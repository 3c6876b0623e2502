"""Shared set-up for the end-to-end tests: find the binaries, start weftd.

Works in two places:
  * under `bazel test`, where everything is in the runfiles tree
    ($TEST_SRCDIR/$TEST_WORKSPACE, also the working directory), and
  * from a source checkout after `bazel build //server:weftd //client:weftctl
    //proto:weft_py_gen //tests:health_py_gen`, reading bazel-bin (or
    $WEFT_BAZEL_BIN).

Every wait has a deadline; a test that fails prints weftd's stderr.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

if os.environ.get("TEST_SRCDIR"):
    ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "weft"))
    GEN = ROOT
else:
    ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # $WEFT_BAZEL_BIN overrides the bazel-bin symlink (e.g. `bazel info bazel-bin`).
    GEN = os.environ.get("WEFT_BAZEL_BIN") or os.path.join(ROOT, "bazel-bin")

for _path in (os.path.join(GEN, "proto"), os.path.join(GEN, "tests"),
              os.path.join(ROOT, "client", "python")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import grpc  # noqa: E402

import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402

WEFTD = os.path.join(GEN, "server", "weftd")
WEFTCTL = os.path.join(GEN, "client", "weftctl")
EXAMPLES = os.path.join(ROOT, "examples")

READY_TIMEOUT_S = 30
# Unix socket paths must fit in sockaddr_un.sun_path (108 bytes).
_MAX_SOCKET_PATH = 100


def example(name):
    return os.path.join(EXAMPLES, name)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scratch_dir():
    """A fresh directory, under $TEST_TMPDIR when socket paths fit there."""
    base = os.environ.get("TEST_TMPDIR")
    if not base or len(base) + 40 > _MAX_SOCKET_PATH:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="weft-", dir=base)


def health_status_name(status):
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


class Weftd:
    """One weftd process on free loopback ports, with its stderr in a file."""

    def __init__(self, workdir, sim_devices=2, extra_flags=()):
        self.workdir = workdir
        self.sim_devices = sim_devices
        self.extra_flags = list(extra_flags)
        self.proc = None
        self.stderr_path = os.path.join(workdir, "weftd.stderr")
        self.socket_path = os.path.join(workdir, "weftd.sock")
        self.port = None
        self.metrics_port = None
        self._channel = None

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    @property
    def unix_addr(self):
        return "unix:" + self.socket_path

    @property
    def metrics_url(self):
        return "http://127.0.0.1:%d/metrics" % self.metrics_port

    def command(self):
        return [
            WEFTD,
            "--listen=" + self.addr,
            "--unix_socket=" + self.socket_path,
            "--metrics_listen=127.0.0.1:%d" % self.metrics_port,
            "--backend=sim",
            "--sim_devices=%d" % self.sim_devices,
            "--drain_timeout=5s",
        ] + self.extra_flags

    def start(self, attempts=3):
        """Starts weftd and waits until its health check answers SERVING."""
        last_error = None
        for _ in range(attempts):
            self.port, self.metrics_port = free_port(), free_port()
            while self.metrics_port == self.port:
                self.metrics_port = free_port()
            with open(self.stderr_path, "ab") as err:
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                             stdout=err, stderr=err)
            try:
                self._wait_serving(READY_TIMEOUT_S)
                return self
            except RuntimeError as e:
                last_error = e
                self.kill()
                # Only a lost race for a port is worth another try.
                if not re.search(r"address (already )?in use|bind", self.stderr(), re.I):
                    break
        raise RuntimeError("weftd did not start: %s\n--- weftd stderr ---\n%s"
                           % (last_error, self.stderr()))

    def _wait_serving(self, timeout):
        deadline = time.monotonic() + timeout
        status = "no answer"
        # weftd prints "weftd: ready" once it serves; the health check below
        # is what counts, this only avoids probing a port nobody listens on.
        early = min(deadline, time.monotonic() + 5)
        while (time.monotonic() < early and self.proc.poll() is None
               and "weftd: ready" not in self.stderr()):
            time.sleep(0.02)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("weftd exited with status %d" % self.proc.returncode)
            # A fresh channel per attempt: a channel that saw "connection
            # refused" keeps failing fast for a while.
            self._close_channel()
            try:
                status = self.health(timeout=0.5, wait_for_ready=True)
                if status == "SERVING":
                    return
            except grpc.RpcError as e:
                status = e.code().name
            time.sleep(0.05)
        raise RuntimeError("health not SERVING after %ds (last: %s)" % (timeout, status))

    def channel(self):
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.addr)
        return self._channel

    def _close_channel(self):
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def health(self, service="", timeout=5, wait_for_ready=None):
        """grpc.health.v1 Check over TCP; returns the status name."""
        stub = health_pb2_grpc.HealthStub(self.channel())
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout,
                              wait_for_ready=wait_for_ready)
        return health_status_name(response.status)

    def stderr(self):
        try:
            with open(self.stderr_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def signal(self, signum):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def wait(self, timeout):
        """Waits for exit; returns the exit status or None on timeout."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        self._close_channel()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


class WeftdTestCase(unittest.TestCase):
    """Starts a fresh weftd for every test and stops it afterwards."""

    SIM_DEVICES = 2
    EXTRA_FLAGS = ()

    def setUp(self):
        self.workdir = scratch_dir()
        self.weftd = Weftd(self.workdir, self.SIM_DEVICES, self.EXTRA_FLAGS)
        self.addCleanup(self._dump_log)
        self.weftd.start()

    def tearDown(self):
        self.weftd.kill()

    def _failed(self):
        """True once this test (or one of its subtests) has failed or errored."""
        outcome = getattr(self, "_outcome", None)
        if outcome is None:
            return False
        pending = getattr(outcome, "errors", None)  # Python <= 3.10 reports late
        if pending is not None:
            return any(exc_info for _, exc_info in pending)
        result = outcome.result
        return any(getattr(test, "test_case", test) is self
                   for test, _ in list(result.failures) + list(result.errors))

    def _dump_log(self):
        log = self.weftd.stderr()
        outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
        if outputs:
            with open(os.path.join(outputs, self.id().split(".")[-1] + ".weftd.log"), "w") as f:
                f.write(log)
        if self._failed():
            sys.stderr.write("\n--- weftd stderr (%s) ---\n%s--- end ---\n" % (self.id(), log))
        shutil.rmtree(self.workdir, ignore_errors=True)

    def write_file(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def weftctl(self, *args, addr=None, timeout=60):
        """Runs weftctl against this weftd; returns the CompletedProcess."""
        argv = [WEFTCTL, "--addr=" + (addr or self.weftd.addr)] + [str(a) for a in args]
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            self.fail("weftctl %s timed out after %ss\nstdout: %s\nstderr: %s"
                      % (" ".join(args), timeout, e.stdout, e.stderr))

    def weftctl_ok(self, *args, **kwargs):
        result = self.weftctl(*args, **kwargs)
        self.assertEqual(result.returncode, 0, describe(result))
        return result


def describe(result):
    return "%s -> exit %d\nstdout:\n%s\nstderr:\n%s" % (
        " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(result.args)),
        result.returncode, result.stdout, result.stderr)


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    """Polls predicate() until it returns a true value; fails after timeout."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, value))


def main(name):
    """Runs the tests of the calling module and prints a one-line summary."""
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    print("%s: %d passed, %d failed, %d skipped"
          % (name, passed, failed, len(result.skipped)), flush=True)
    sys.exit(0 if result.wasSuccessful() else 1)
