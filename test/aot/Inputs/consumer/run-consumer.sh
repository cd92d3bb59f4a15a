#!/bin/bash
# CTest "aot_install_consumer" (and "aot_build_tree_consumer", --build-tree): installs the synk build BUILD_DIR into a temporary prefix, then
# configures, builds and runs this directory as a user's project would (find_package(synk),
# synk_add_module). Checks: the apps (AOT, JIT, JIT through 0.1's include paths) match a float64 reference on 1 and 2 ranks; the AOT app
# prints exactly what the JIT app prints; the AOT app needs no LLVM; editing the .synk file, or
# touching a .npy file its load() builds in, re-runs synkc on the next build.
# With --build-tree, the same project uses the build directory itself, uninstalled
# (-Dsynk_DIR=BUILD_DIR), and the checks after the first build are skipped; instead, a project
# linking synk::jit without COMPONENTS jit must fail to configure with a message that says so, and
# one that declares an old cmake_minimum_required must configure.
# Usage: run-consumer.sh BUILD_DIR [CMAKE] [--build-tree]
set -euo pipefail
build_dir=$(cd "$1" && pwd)
cmake=${2:-cmake}
mode=${3:-install}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/synk-consumer-XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ "$mode" = --build-tree ]; then
  where=(-Dsynk_DIR="$build_dir")
else
  "$cmake" --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
  where=(-DCMAKE_PREFIX_PATH="$work/prefix")
fi
cp -r "$here/." "$work/src"
"$cmake" -S "$work/src" -B "$work/build" -G Ninja "${where[@]}" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" -j2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }

seed=$((RANDOM + 1))
for ranks in 1 2; do
  "$work/build/aot_app" $ranks $seed > "$work/aot$ranks.txt" || { cat "$work/aot$ranks.txt"; exit 1; }
  "$work/build/jit_app" $ranks $seed > "$work/jit$ranks.txt" || { cat "$work/jit$ranks.txt"; exit 1; }
  "$work/build/jit_app_old_paths" $ranks $seed > "$work/old$ranks.txt" || { cat "$work/old$ranks.txt"; exit 1; }
  diff "$work/aot$ranks.txt" "$work/jit$ranks.txt"
  diff "$work/aot$ranks.txt" "$work/old$ranks.txt"
  cat "$work/aot$ranks.txt"
done
if readelf -d "$work/build/aot_app" | grep -E 'NEEDED.*(libLLVM|libclang)'; then
  echo "aot_app needs LLVM at run time"; exit 1
fi
if [ "$mode" = --build-tree ]; then
  # synk::jit without COMPONENTS jit in a CXX-only project: CMake's error names what to add, where
  # the linker would have said "cannot find -lclang-cpp".
  mkdir -p "$work/nojit"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(nojit LANGUAGES CXX)\nfind_package(synk REQUIRED)\nadd_executable(app main.cpp)\ntarget_link_libraries(app PRIVATE synk::jit)\n' \
    > "$work/nojit/CMakeLists.txt"
  echo 'int main() {}' > "$work/nojit/main.cpp"
  if "$cmake" -S "$work/nojit" -B "$work/nojit/build" -G Ninja "${where[@]}" > "$work/nojit.log" 2>&1; then
    echo "synk::jit without COMPONENTS jit configured"; exit 1
  fi
  grep -q 'synk::jit_needs__find_package_synk_COMPONENTS_jit' "$work/nojit.log" || { cat "$work/nojit.log"; exit 1; }
  # A project that declares an old CMake (3.2: IN_LIST is not an operator there) still configures:
  # the package sets its own policies (its IN_LIST tests once failed in such a project).
  mkdir -p "$work/nomin"
  printf 'cmake_minimum_required(VERSION 3.2)\nproject(nomin LANGUAGES CXX)\nfind_package(synk REQUIRED)\nadd_executable(app main.cpp)\ntarget_link_libraries(app PRIVATE synk::runtime)\n' \
    > "$work/nomin/CMakeLists.txt"
  echo 'int main() {}' > "$work/nomin/main.cpp"
  "$cmake" -S "$work/nomin" -B "$work/nomin/build" -G Ninja "${where[@]}" > "$work/nomin.log" 2>&1 ||
    { echo "a project declaring cmake_minimum_required(VERSION 3.2) did not configure"; cat "$work/nomin.log"; exit 1; }
  echo "consumer project on the build tree: OK (seed $seed)"
  exit 0
fi

# An edit of the .synk file re-runs synkc (a new function appears in the header).
printf '\nfn extra(scatter x: f32[n, 3]) {\n  out s: sum = sum(x, axis=0);\n}\n' >> "$work/src/model.synk"
"$cmake" --build "$work/build" -j2 > "$work/rebuild.log"
grep -q 'synkc: compiling' "$work/rebuild.log" || { echo "editing model.synk did not re-run synkc"; exit 1; }
grep -q 'synk::Function extra();' "$work/build/synk_modules/model/model.h" || { echo "the header was not regenerated"; exit 1; }
# A load() file is built into the archive, and (through synkc's depfile) touching it re-runs synkc.
cp "$here/../loaded_w.npy" "$work/src/bias.npy"
printf '\nshared bias: f32[2, 3] = load("bias.npy");\nfn biased(bcast x: f32[3]) {\n  out y: none = bias @ x;\n}\n' \
  >> "$work/src/model.synk"
"$cmake" --build "$work/build" -j2 > "$work/rebuild2.log"
grep -q 'synk::Function biased();' "$work/build/synk_modules/model/model.h" || { echo "load() module not rebuilt"; exit 1; }
grep -q 'bias.npy' "$work/build/synk_modules/model/libmodel_synk.a.d" || { echo "the depfile lacks bias.npy"; exit 1; }
sleep 1 && touch "$work/src/bias.npy"
"$cmake" --build "$work/build" -j2 > "$work/rebuild3.log"
grep -q 'synkc: compiling' "$work/rebuild3.log" || { cat "$work/rebuild3.log"; echo "touching bias.npy did not re-run synkc"; exit 1; }
echo "consumer project: OK (seed $seed)"
