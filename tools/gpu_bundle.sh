#!/usr/bin/env bash
# Builds the CUDA tests and benchmarks, weftd and weftctl, and packs them
# with the shared libraries they need (all but the C and C++ runtimes and
# the CUDA driver and NVRTC, which a GPU machine with a CUDA 13 toolkit
# has) into one folder, to run on a GPU machine that has no Bazel:
#
#   tools/gpu_bundle.sh [DIR]       # default DIR: gpu-bundle
#   DIR/run.sh [OUT]                # on the GPU machine; logs to OUT
#
# run.sh runs every CUDA test, the CUDA benchmarks, and weftd with
# --backend=cuda on the examples, printing each example's outputs (compare
# them with a simulated weftd's). The binaries are built here, so both
# machines need the same processor architecture and a glibc at least as
# new as this one's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir="${1:-gpu-bundle}"

tests=(cuda_status_test gpu_uuid_test launch_args_test allocation_table_test
  nvrtc_compiler_test module_cache_test cuda_backend_test cuda_graph_test
  cuda_device_control_test)
benches=(cuda_launch_bench cuda_control_bench cuda_transfer_bench
  cuda_makespan_bench)
targets=()
for t in "${tests[@]}" "${benches[@]}"; do targets+=("//runtime/cuda:${t}"); done
targets+=(//server:weftd //client:weftctl)
bazel build -c opt "${targets[@]}"
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

rm -rf "${dir}"
mkdir -p "${dir}/bin" "${dir}/lib" "${dir}/examples"
paths=()
for t in "${tests[@]}" "${benches[@]}"; do paths+=("${bin}/runtime/cuda/${t}"); done
paths+=("${bin}/server/weftd" "${bin}/client/weftctl")
for p in "${paths[@]}"; do
  install -m 0755 "${p}" "${dir}/bin/"
  # Libraries resolved here, through the binary's own search path.
  ldd "${p}" | awk '/=> \// {print $3}'
done | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libnvrtc[^/]*)\.so' |
  while read -r lib; do install -m 0644 "${lib}" "${dir}/lib/"; done
strip "${dir}"/bin/* "${dir}"/lib/* 2>/dev/null || true
cp examples/*.json examples/*.cu examples/*.textproto "${dir}/examples/"

cat >"${dir}/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs the bundled CUDA tests, benchmarks and examples; logs go to $1.
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${1:-logs}"
mkdir -p "${out}"
nvrtc=$(find /usr/local /opt /usr/lib -name 'libnvrtc.so.13*' 2>/dev/null | head -n 1)
export LD_LIBRARY_PATH="${PWD}/lib:${nvrtc:+$(dirname "${nvrtc}"):}/usr/local/cuda/lib64"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0
for t in cuda_status_test gpu_uuid_test launch_args_test allocation_table_test \
  nvrtc_compiler_test module_cache_test cuda_backend_test cuda_graph_test \
  cuda_device_control_test; do
  if timeout 300 "bin/${t}" >"${out}/${t}.log" 2>&1; then
    echo "${t}: $(grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test' "${out}/${t}.log" | tr '\n' ' ')"
  else
    status=1
    echo "${t}: FAILED"
    grep -E '^\[  FAILED|Failure' "${out}/${t}.log" | head -n 20
  fi
done
for b in cuda_launch_bench cuda_control_bench cuda_transfer_bench cuda_makespan_bench; do
  echo "== ${b}"
  timeout 600 "bin/${b}" 2>&1 | tee "${out}/${b}.log"
done

echo "== weftd --backend=cuda on the examples"
addr=127.0.0.1:50197
bin/weftd --backend=cuda --listen="${addr}" --unix_socket=/tmp/weftd-bundle.sock \
  --metrics_listen=127.0.0.1:9497 >"${out}/weftd.log" 2>&1 &
weftd=$!
ctl=(bin/weftctl --addr="${addr}" --timeout=60s)
for _ in $(seq 100); do "${ctl[@]}" devices >/dev/null 2>&1 && break; sleep 0.2; done
if ! kill -0 "${weftd}" 2>/dev/null; then
  echo "weftd did not start:"
  tail -n 5 "${out}/weftd.log"
  exit 1
fi
"${ctl[@]}" devices
example() {  # name file buffers... -- flags...
  local name=$1 file=$2
  shift 2
  local buffers=()
  while (($#)) && [[ $1 != -- ]]; do buffers+=("$1"); shift; done
  (($#)) && shift
  local result job
  result=$(timeout 120 "${ctl[@]}" submit "${file}" --watch --progress=lines "$@" 2>&1) || status=1
  job=$(printf '%s\n' "${result}" | sed -n 's/^job \([^ ]*\).*/\1/p' | head -n 1)
  echo "${name}: $(printf '%s\n' "${result}" | tail -n 1)"
  for b in "${buffers[@]}"; do
    echo "  ${b}: $(timeout 30 "${ctl[@]}" read "${job}" "${b}" | head -n 8 | tr '\n' ' ')"
  done
}
example vector_pipeline examples/vector_pipeline.json total
example vector_pipeline_graphs examples/vector_pipeline.json total -- --launch_mode=graphs
example vector_pipeline_streams examples/vector_pipeline.json total -- --launch_mode=streams
example user_kernel examples/user_kernel.json y total
example cg_host examples/conjugate_gradient.json rs x -- --control_mode=host
example cg_device examples/conjugate_gradient.json rs x -- --control_mode=device
example halve_or_step examples/halve_or_step.json x n -- --control_mode=host
example halve_or_step_device examples/halve_or_step.json x n -- --control_mode=device
kill -INT "${weftd}"
wait "${weftd}" || status=1
exit "${status}"
EOF
chmod +x "${dir}/run.sh"
du -sh "${dir}"
