#!/usr/bin/env bash
# Installs the Debian 12 packages Weft needs to build, test and run.
# Idempotent: does nothing (no apt-get at all) when everything is present.
set -euo pipefail

PACKAGES=(
  # Build.
  bazel-bootstrap
  bazel-rules-java
  g++
  clang
  clang-format
  libclang-rt-14-dev
  protobuf-compiler
  protobuf-compiler-grpc
  # Libraries.
  libgrpc++-dev
  libprotobuf-dev
  libabsl-dev
  prometheus-cpp-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  libgoogle-perftools-dev  # tcmalloc, weftd's allocator
  # Python client and end-to-end tests.
  python3
  python3-grpcio
  python3-protobuf
  # Renders `weftctl plan --format=svg` in the end-to-end tests (headless).
  chromium
  # Metrics and tooling.
  prometheus
  curl
  # Checks the systemd unit (systemd-analyze verify).
  systemd
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)
  if [[ "${status}" != "installed" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
