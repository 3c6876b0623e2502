#!/usr/bin/env bash
# Runs client_test.py with Debian's interpreter (python3-grpcio,
# python3-protobuf); Bazel starts tests in the runfiles workspace directory.
set -euo pipefail
exec /usr/bin/python3 -u client/python/client_test.py "$@"
