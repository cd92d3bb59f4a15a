#!/bin/bash
# One command for the GPU machine (docs/gpu.md, "What the first GPU session must do"): with binaries
# built on the CPU machine, it runs every GPU test (the gpu instances of the executor tests, the
# real-GPU process-group test, the ahead-of-time example on the GPU from its built-in CUBINs),
# compute-sanitizer memcheck on the GPU executor tests, and the GPU
# benchmarks (synk's fused kernels against a device-to-device copy, matmul against cuBLAS called
# directly, the fused patterns against PyTorch eager and torch.compile), each under its own time
# limit so that the whole run stays under 10 minutes, and writes one dated Markdown table for
# docs/performance/gpu.md. Every step that cannot run says so and why; a skip is not a failure.
#
# On a machine without a usable GPU it says so after the probe, in seconds, and exits 0 (with
# --emulator it also runs the CUDA tests that need no GPU: NVRTC + ptxas of every kernel and the
# CUDA emulator against the float64 reference).
#
#   scripts/gpu-check.sh [--build DIR] [--out FILE] [--emulator] [--quick] [--skip-if-gpu]
#     --build DIR    the CMake build directory (default: build)
#     --out FILE     the table (default: DIR/gpu-check-<date>.md)
#     --quick        smaller benchmark sizes (a smoke run)
#     --skip-if-gpu  exit 77 at once where a GPU is usable (CTest's no-GPU test uses it)
# Exit status: 0 when every step that ran passed; 1 when one failed or the binaries do not start
# here; 2 for a bad command line; 77 with --skip-if-gpu on a GPU machine.
set -u

build=build
out=""
emulator=0
quick=0
skip_if_gpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --emulator) emulator=1; shift ;;
    --quick) quick=1; shift ;;
    --skip-if-gpu) skip_if_gpu=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$build/bench/cuda_fused_bench" ]; then
  echo "gpu-check: no $build/bench/cuda_fused_bench: build synk first (cmake --build $build), or give --build DIR" >&2
  exit 2
fi
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
today=$(date -u +%Y-%m-%d)
[ -n "$out" ] || out="$build/gpu-check-$today.md"
logs=$(mktemp -d "${TMPDIR:-/tmp}/synk-gpu-check.XXXXXX")
trap 'rm -rf "$logs"' EXIT

rows=()     # "| step | status | seconds | figures |" lines of the table
failed=0

# run NAME LIMIT_S COMMAND...: runs one step under `timeout`, keeps its output, adds a row.
# The step's figures come from `figures_of NAME` (RESULT lines, summaries) when it passed.
run() {
  local name=$1 limit=$2
  shift 2
  local log="$logs/$name.log" start end status
  echo "== $name: $*"
  start=$(date +%s)
  timeout --signal=INT --kill-after=10 "$limit" "$@" > "$log" 2>&1
  status=$?
  end=$(date +%s)
  tail -n 5 "$log" | sed 's/^/   /'
  local verdict
  if grep -q "^skipped:" "$log"; then
    verdict="skipped: $(grep -m1 '^skipped:' "$log" | cut -c10-)"
  elif [ $status -eq 0 ]; then
    verdict=passed
  elif [ $status -eq 124 ] || [ $status -eq 137 ]; then
    verdict="FAILED: over its ${limit} s limit"
    failed=1
  else
    verdict="FAILED (exit $status; see the log lines above)"
    failed=1
  fi
  rows+=("| $name | $verdict | $((end - start)) | $(figures_of "$name" "$log") |")
}

skip() {   # skip NAME WHY
  echo "== $1: skipped: $2"
  rows+=("| $1 | skipped: $2 | 0 | |")
}

figures_of() {
  local log=$2
  case "$1" in
    ctest-*) grep -m1 -E "tests passed|tests failed" "$log" ;;
    memcheck) grep -m1 -E "ERROR SUMMARY" "$log" ;;
    fused-bench) awk '/^RESULT/ {printf "%s %s GB/s; ", $2, $4}' "$log" ;;
    matmul-bench) awk '/^RESULT/ {printf "%s synk %s ms, cuBLAS %s ms; ", $2, $3, $4}' "$log" ;;
    torch-bench) grep -E "eager|compile" "$log" | tr '\n' ';' | cut -c1-400 ;;
  esac
}

# --- The probe: the same one every synk binary makes (gpu/driver.h) ---
probe=$("$build/bench/cuda_fused_bench" 1 1 2>&1 | head -n 3)
gpu=1
case "$probe" in
  skipped:*) gpu=0 ;;
  device:*) ;;
  *) echo "gpu-check: the binaries in $build do not start here: $probe"
     echo "  (a machine with another image needs the shared libraries ldd lists; docs/gpu.md, \"Getting binaries there\")"
     exit 1 ;;
esac
if [ $gpu -eq 1 ] && [ $skip_if_gpu -eq 1 ]; then
  echo "skipped: a GPU is usable here; run scripts/gpu-check.sh by hand"
  exit 77
fi
reason=${probe#skipped: no CUDA GPU (}
reason=${reason%)}
device="no usable GPU ($reason)"
if [ $gpu -eq 1 ]; then
  device=$(echo "$probe" | sed -n 's/^device: //p' | head -n 1)
  command -v nvidia-smi > /dev/null && device="$device; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
fi
echo "gpu-check $today: $device"

if [ $gpu -eq 0 ]; then
  for step in ctest-gpu aot-gpu memcheck fused-bench matmul-bench torch-bench mlp-gpu; do
    skip "$step" "no usable GPU ($reason)"
  done
else
  # the gpu instances of the executor tests, the real-GPU group test, the probe and loaders
  run ctest-gpu 300 ctest --test-dir "$build" --output-on-failure --timeout 300 -R '/gpu|CudaGroup|CudaRuntime'
  # the ahead-of-time artifact (examples/aot): the CUBIN for this GPU from the binary, no NVRTC
  if [ -x "$build/examples/aot/example_aot_intro" ]; then
    run aot-gpu 60 "$build/examples/aot/example_aot_intro" 2 gpu
  else
    skip aot-gpu "no $build/examples/aot/example_aot_intro (build the examples)"
  fi
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
  if [ -n "$sanitizer" ]; then
    run memcheck 240 "$sanitizer" --tool memcheck --error-exitcode 1 \
      "$build/compiler/cuda/compiler_cuda_cuda_exec_test" --gtest_filter='*gpu*'
  else
    skip memcheck "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
  fi
  if [ $quick -eq 1 ]; then mib=64; reps=5; else mib=1024; reps=20; fi
  run fused-bench 120 "$build/bench/cuda_fused_bench" "$mib" "$reps"
  run matmul-bench 120 "$build/bench/cuda_matmul_bench" "$reps"
  run torch-bench 180 python3 "$here/bench/cuda_torch.py" "$build/bench/cuda_fused_bench" "$mib" "$reps"
  skip mlp-gpu "bench/train_torch.py has no --device cuda yet: run fashion_mnist --backend gpu by hand"
fi
if [ $emulator -eq 1 ]; then
  run ctest-emulator 900 ctest --test-dir "$build" --output-on-failure --timeout 600 \
    -R 'CudaCodegen|/emulator|CudaRuntime|CudaGroup'
else
  skip ctest-emulator "not asked for (--emulator runs NVRTC + ptxas and the CUDA emulator; CI runs them anyway)"
fi

{
  echo "### GPU check, $today"
  echo
  echo "Device: $device. Build: \`$build\`. Command: \`scripts/gpu-check.sh$( [ $quick -eq 1 ] && echo ' --quick')\`."
  echo
  echo "| step | result | s | figures |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} > "$out"
echo
cat "$out"
echo
if [ $gpu -eq 0 ]; then
  echo "gpu-check: no GPU here, so nothing GPU-side ran (summary in $out)"
elif [ $failed -ne 0 ]; then
  echo "gpu-check: FAILED steps above (summary in $out)"
else
  echo "gpu-check: every step that ran passed (summary in $out; add it to docs/performance/gpu.md)"
fi
exit $failed
