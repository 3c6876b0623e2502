#!/usr/bin/env bash
# Runs a Python test file (first argument, relative to the workspace root of
# the runfiles tree) with Debian's interpreter, which has python3-grpcio and
# python3-protobuf. Bazel starts tests in that workspace directory.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-weft}"
fi
test_file="$1"
shift
exec /usr/bin/python3 -u "${test_file}" "$@"
