#!/usr/bin/env bash
# Installs what is missing and runs every test: `bazel test //...`, a check
# that the C++ sources follow .clang-format, then a clang build of
# everything with -Wthread-safety -Werror. Exits non-zero on
# any failure and ends with a line "N passed, N failed".
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/install_deps.sh || exit 1

log=$(mktemp)
trap 'rm -f "${log}"' EXIT

bazel_flags=(--color=no --curses=no)
test_flags=()
# Tests that need a real GPU only run where one is visible.
if ! nvidia-smi -L >/dev/null 2>&1; then
  test_flags+=(--test_tag_filters=-requires-gpu)
fi

echo "== bazel test //..."
bazel test "${bazel_flags[@]}" "${test_flags[@]}" //... 2>&1 | tee "${log}"
test_rc=${PIPESTATUS[0]}

echo "== clang-format --dry-run   (the tree follows .clang-format)"
format_failed=0
while IFS= read -r file; do
  if ! clang-format --dry-run --Werror "${file}" >/dev/null 2>&1; then
    echo "not formatted: ${file} (run: clang-format -i ${file})"
    format_failed=1
  fi
done < <(git ls-files '*.cc' '*.h' | grep -v '^third_party/')

echo "== bazel build --config=clang //...   (thread-safety analysis)"
bazel build "${bazel_flags[@]}" --config=clang //...
clang_rc=$?

# One line per test target in bazel's summary, e.g.
#   //tests:e2e_python_test      PASSED in 12.0s
#   //scheduler:planner_test     (cached) PASSED in 0.4s
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(PASSED|FLAKY)' "${log}")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|REMOTE FAILURE)' "${log}")

status=0
if [[ ${test_rc} -ne 0 ]]; then
  echo "bazel test failed (exit ${test_rc})"
  status=1
  # A build or analysis error can fail the run before any test is reported.
  if [[ ${failed} -eq 0 ]]; then
    failed=1
  fi
fi
if [[ ${clang_rc} -ne 0 ]]; then
  echo "clang thread-safety build failed (exit ${clang_rc})"
  status=1
  failed=$((failed + 1))
fi
if [[ ${format_failed} -ne 0 ]]; then
  echo "clang-format check failed"
  status=1
  failed=$((failed + 1))
fi
echo "${passed} passed, ${failed} failed"
exit ${status}
