#!/bin/bash
# Packs what the GPU machine needs into .gpu/ (git-ignored; name it in the device tool's `carry`):
# the CUDA test executables, the GPU benchmarks and the ahead-of-time example (its GPU code built
# in) of a build, stripped, with every shared library
# `ldd` lists except the C and C++ runtimes, as one .gpu/pack.tar.xz (xz -9: ~62 MB for the
# LLVM, clang-cpp, oneDNN, OpenBLAS, z3 and ICU libraries the test executables link), and
# .gpu/run.sh, which unpacks it under /tmp on the GPU machine, finds NVRTC / cuBLAS, and runs the
# GPU tests, compute-sanitizer memcheck and the benchmarks (docs/gpu.md, "Getting binaries there").
#   scripts/gpu-pack.sh [build-dir]     then, on the device:  bash .gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bins=(compiler/cuda/compiler_cuda_cuda_exec_test compiler/cuda/compiler_cuda_cuda_runtime_test
      compiler/cuda/compiler_cuda_cuda_group_test bench/cuda_fused_bench bench/cuda_matmul_bench
      examples/aot/example_aot_intro)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .gpu
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu-pack: no $build/$b (build synk with CUDA first)" >&2; exit 1; }
  cp "$build/$b" "$stage/bin/" && strip "$stage/bin/$(basename "$b")"
done
for b in "${bins[@]}"; do ldd "$build/$b"; done | awk '/=>/ {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' | xargs -I{} cp -L {} "$stage/lib/"
tar -C "$stage" -cf - bin lib | xz -9 -T0 > .gpu/pack.tar.xz

cat > .gpu/run.sh <<'RUN'
#!/bin/bash
# On the GPU machine, from the repository root: unpack .gpu/pack.tar.xz and run the GPU checks.
set -u
T=/tmp/synkpack; mkdir -p $T; tar -xJf .gpu/pack.tar.xz -C $T
wheels=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)
for d in /usr/local/cuda/targets/x86_64-linux/lib $wheels/nvidia/cu13/lib; do [ -e "$d/libnvrtc.so.13" ] && export SYNK_CUDA_LIB_DIR=$d; done
L="$T/lib:/usr/local/cuda/targets/x86_64-linux/lib:${SYNK_CUDA_LIB_DIR:-}"
step() { local lim=$1; shift; echo "== $*"; LD_LIBRARY_PATH=$L timeout "$lim" "$@" 2>&1 | tail -25; echo "exit ${PIPESTATUS[0]}"; }
cd $T/bin
step 200 ./compiler_cuda_cuda_runtime_test
step 200 ./compiler_cuda_cuda_exec_test --gtest_filter='*gpu*'
step 150 ./compiler_cuda_cuda_group_test
step 60 ./example_aot_intro 2 gpu
step 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 ./compiler_cuda_cuda_exec_test --gtest_filter='*gpu*'
step 120 ./cuda_fused_bench 1024 20
step 120 ./cuda_matmul_bench 20
LD_LIBRARY_PATH=$L timeout 150 python3 "$OLDPWD/bench/cuda_torch.py" ./cuda_fused_bench 1024 20 2>&1 | tail -12
RUN
chmod +x .gpu/run.sh
echo "gpu-pack: $(du -h .gpu/pack.tar.xz | cut -f1) in .gpu/pack.tar.xz; on the device: bash .gpu/run.sh (carry: .gpu)"
