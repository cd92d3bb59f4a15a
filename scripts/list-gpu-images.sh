#!/bin/bash
# Lists the GPU images a synkc artifact holds (what `cuobjdump --list-elf` shows for a fatbin; the
# toolkit here has no cuobjdump): every .synk_gpu.<module>.<function>.<arch> section of an archive
# (libNAME.a) or a linked program, with its size and, for a CUBIN, the architecture its ELF header
# names. With --extract DIR each image is also written to DIR/<module>.<function>.<arch>.{cubin,ptx}
# (readelf -h reads a CUBIN; a PTX file is text).
#   scripts/list-gpu-images.sh FILE [--extract DIR]
set -euo pipefail
file=${1:?usage: list-gpu-images.sh FILE [--extract DIR]}
extract=""
[ "${2:-}" = "--extract" ] && extract=${3:?--extract needs a directory}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objects=("$file")
if [ "$(head -c 7 "$file")" = '!<arch>' ]; then   # an archive: the stub objects hold the images
  abs=$(realpath "$file")
  (cd "$work" && ar x "$abs")
  mapfile -t objects < <(ls "$work"/*_stub.o 2> /dev/null || true)
fi
found=0
for object in "${objects[@]}"; do
  for section in $(objdump -h "$object" | awk '$2 ~ /^\.synk_gpu\./ {print $2}'); do
    found=1
    name=${section#.synk_gpu.}
    objcopy -O binary --only-section="$section" "$object" "$work/image"
    bytes=$(stat -c %s "$work/image")
    if [ "$(head -c 4 "$work/image" | tail -c 3)" = "ELF" ]; then
      flags=$(readelf -h "$work/image" | awk '/Flags:/ {print $2}')
      echo "ELF file: $name.cubin, $bytes bytes, $(readelf -h "$work/image" | awk -F': *' '/Machine:/ {print $2}'), sm_$(( (flags >> 8) & 0xff ))"
      [ -n "$extract" ] && mkdir -p "$extract" && cp "$work/image" "$extract/$name.cubin"
    else
      echo "PTX file: $name.ptx, $bytes bytes, $(tr -d '\0' < "$work/image" | grep -m1 '^\.target')"
      [ -n "$extract" ] && mkdir -p "$extract" && tr -d '\0' < "$work/image" > "$extract/$name.ptx"
    fi
  done
done
[ $found -eq 1 ] || echo "no GPU images in $file (built with --cuda-arch=none or without NVRTC, or every kernel is a cuBLAS call)"
