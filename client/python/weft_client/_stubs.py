"""Locates the Python code generated from proto/weft/v1/weft.proto.

The stubs are produced at build time (`bazel build //proto:weft_py_gen`) and
are imported as `weft.v1.weft_pb2` / `weft.v1.weft_pb2_grpc`, so their root
directory has to be on sys.path. This module finds that root when it is not:
from $WEFT_PROTO_PYTHONPATH, inside Bazel runfiles, or under bazel-bin in a
source checkout.
"""

import os
import sys

_ENV_VAR = "WEFT_PROTO_PYTHONPATH"


def _candidate_roots():
    env = os.environ.get(_ENV_VAR)
    if env:
        yield from env.split(os.pathsep)
    # This file is <root>/client/python/weft_client/_stubs.py, where <root> is
    # the source tree or the workspace directory of a Bazel runfiles tree.
    # Runfiles are symlinks, so try the unresolved path first.
    for here in (os.path.abspath(__file__), os.path.realpath(__file__)):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
        yield os.path.join(root, "proto")               # runfiles
        yield os.path.join(root, "bazel-bin", "proto")  # source checkout
    srcdir = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if srcdir:
        yield os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "weft"), "proto")


def _has_stubs(root):
    return os.path.isfile(os.path.join(root, "weft", "v1", "weft_pb2.py"))


def load():
    """Returns the (weft_pb2, weft_pb2_grpc) modules, extending sys.path if needed."""
    try:
        from weft.v1 import weft_pb2, weft_pb2_grpc  # noqa: F401
        return weft_pb2, weft_pb2_grpc
    except ImportError:
        pass
    for root in _candidate_roots():
        if _has_stubs(root):
            if root not in sys.path:
                sys.path.insert(0, root)
            # A namespace package `weft` may already be cached without the
            # new root; drop it so the import below sees the new path.
            for name in ("weft.v1", "weft"):
                mod = sys.modules.get(name)
                if mod is not None and getattr(mod, "__file__", None) is None:
                    del sys.modules[name]
            from weft.v1 import weft_pb2, weft_pb2_grpc
            return weft_pb2, weft_pb2_grpc
    raise ImportError(
        "cannot find the generated weft.v1 Python stubs; build them with "
        "`bazel build //proto:weft_py_gen` or point $%s at the directory "
        "that contains weft/v1/weft_pb2.py" % _ENV_VAR)


weft_pb2, weft_pb2_grpc = load()
