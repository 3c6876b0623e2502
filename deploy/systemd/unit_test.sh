#!/usr/bin/env bash
# The systemd unit is valid (systemd-analyze verify) and starts weftd with
# flags weftd knows.
set -euo pipefail

unit="$1"
weftd="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
dir="${TEST_TMPDIR:-$(mktemp -d)}"

# verify wants ExecStart's binary to exist: point it at the built one.
sed "s|/usr/local/bin/weftd|${weftd}|" "${unit}" > "${dir}/weftd.service"
if ! out=$(systemd-analyze verify --man=no "${dir}/weftd.service" 2>&1); then
  echo "systemd-analyze verify failed:" >&2
  echo "${out}" >&2
  exit 1
fi
if [[ -n "${out}" ]]; then
  echo "systemd-analyze verify warned:" >&2
  echo "${out}" >&2
  exit 1
fi

# Every --flag on ExecStart is one of weftd's.
help=$("${weftd}" --helpfull 2>&1 || true)
exec_start=$(grep '^ExecStart=' "${unit}")
for flag in $(grep -o -- '--[a-z_]*' <<<"${exec_start}"); do
  if ! grep -qE -- "${flag}([^a-z_]|\$)" <<<"${help}"; then
    echo "ExecStart names ${flag}, which weftd does not know" >&2
    exit 1
  fi
done
echo "ok: ${unit} verifies and its flags are weftd's"
