#!/usr/bin/env bash
# Installs what is missing, builds weftd and weftctl, and runs weftd in the
# foreground with its defaults (simulated GPUs when no GPU is visible). Once
# the daemon is ready, a short demo runs beside it and prints to this
# terminal. Extra arguments go to weftd, e.g. tools/run.sh --sim_devices=4.
# Stop with Ctrl-C (weftd drains and exits).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/install_deps.sh
bazel build //server:weftd //client:weftctl

bin=$(bazel info bazel-bin 2>/dev/null)
weftd="${bin}/server/weftd"
weftctl="${bin}/client/weftctl"

# The demo talks to the TCP address weftd listens on.
addr="127.0.0.1:50051"
for arg in "$@"; do
  case "${arg}" in
    --listen=?*) addr="${arg#--listen=}" ;;
  esac
done

demo() {
  local deadline=$((SECONDS + 60))
  until "${weftctl}" --addr="${addr}" --timeout=1s devices >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      echo "demo: weftd did not answer on ${addr}; skipping the demo" >&2
      return 0
    fi
    sleep 0.5
  done
  echo
  echo "== weftctl devices"
  "${weftctl}" --addr="${addr}" devices
  echo
  echo "== weftctl submit examples/vector_pipeline.json --watch"
  local out job
  out=$("${weftctl}" --addr="${addr}" submit examples/vector_pipeline.json --watch 2>&1) || true
  printf '%s\n' "${out}"
  job=$(printf '%s\n' "${out}" | sed -n 's/^job \([^ ]*\).*/\1/p' | head -n 1)
  if [[ -z "${job}" ]]; then
    echo "demo: no job id in the output above; skipping read" >&2
    return 0
  fi
  echo
  echo "== weftctl read ${job} total   (expected: 4608)"
  "${weftctl}" --addr="${addr}" read "${job}" total || true
  echo
  echo "Try it yourself in another terminal:"
  echo "  bazel-bin/client/weftctl submit examples/fork_join.json --watch"
  echo "weftd keeps running; Ctrl-C stops it."
}

demo &
exec "${weftd}" "$@"
