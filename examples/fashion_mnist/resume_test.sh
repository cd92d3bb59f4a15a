#!/bin/sh
# A run resumed from a checkpoint equals the uninterrupted run bit for bit: 3 epochs straight
# against 1 epoch with --checkpoint, then --resume to epoch 3 (with the data as scattered inputs and
# with --device-data, and with --shift 2: its translations depend on seed and epoch alone),
# comparing the saved parameters byte for byte; a run with a warm-up and a cosine stopped after
# epoch 1 (--stop-after) and resumed ends where the straight run ends; a resume with other options is refused with a
# message naming the option; a checkpoint written before --shift existed resumes as --shift 0.
# Usage: resume_test.sh FASHION_MNIST WORKDIR
set -eu
app=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
common="--limit 3000 --holdout 500 --seed 7"
for extra in "" "--device-data" "--shift 2"; do
  tag=$(echo "plain$extra" | tr -d ' -')
  "$app" --ranks 2 $common --batch 100 --epochs 3 $extra --out "$work/$tag.straight" > "$work/$tag.straight.log"
  "$app" --ranks 2 $common --batch 100 --epochs 1 $extra --checkpoint "$work/$tag.ckpt" --out "" > "$work/$tag.first.log"
  "$app" --ranks 2 $common --batch 100 --epochs 3 $extra --resume "$work/$tag.ckpt" --out "$work/$tag.resumed" > "$work/$tag.resumed.log"
  grep -q "resumed from" "$work/$tag.resumed.log" || { echo "FAILED: $tag: no 'resumed from' line"; exit 1; }
  for f in "$work/$tag.straight"/*.npy; do
    cmp "$f" "$work/$tag.resumed/$(basename "$f")" || { echo "FAILED: $tag: $(basename "$f") differs"; exit 1; }
  done
  echo "$tag: $(ls "$work/$tag.straight" | wc -l) parameter files identical after resuming"
done
# A schedule (warm-up, then a cosine over all 3 epochs) continues where it stopped: the first run
# stops after epoch 1 of 3, and the resumed one reads the learning rate's step from the checkpoint.
sched="--cosine --warmup 0.5"
"$app" --ranks 2 $common --batch 100 --epochs 3 $sched --out "$work/cosine.straight" > "$work/cosine.straight.log"
"$app" --ranks 2 $common --batch 100 --epochs 3 $sched --stop-after 1 --checkpoint "$work/cosine.ckpt" --out "" \
  > "$work/cosine.first.log"
grep -q "(1 epoch," "$work/cosine.first.log" || { echo "FAILED: --stop-after 1 ran another count"; exit 1; }
"$app" --ranks 2 $common --batch 100 --epochs 3 $sched --resume "$work/cosine.ckpt" --out "$work/cosine.resumed" \
  > "$work/cosine.resumed.log"
for f in "$work/cosine.straight"/*.npy; do
  cmp "$f" "$work/cosine.resumed/$(basename "$f")" || { echo "FAILED: cosine: $(basename "$f") differs"; exit 1; }
done
echo "cosine: $(ls "$work/cosine.straight" | wc -l) parameter files identical after resuming"
if "$app" --ranks 2 $common --batch 100 --epochs 4 $sched --resume "$work/cosine.ckpt" --out "" > "$work/bad.log" 2>&1; then
  echo "FAILED: a cosine resumed over another --epochs was accepted"; exit 1
fi
grep -q "saved with cosine_epochs 3, this run has 4" "$work/bad.log" || { echo "FAILED: epochs message"; cat "$work/bad.log"; exit 1; }
# Another batch size cannot continue the same run.
if "$app" --ranks 2 $common --batch 50 --epochs 3 --resume "$work/plain.ckpt" --out "" > "$work/bad.log" 2>&1; then
  echo "FAILED: a resume with another --batch was accepted"; exit 1
fi
grep -q "saved with batch 100, this run has 50" "$work/bad.log" || { echo "FAILED: message"; cat "$work/bad.log"; exit 1; }
# A checkpoint from before --shift (no "shift" in its metadata) continues a run without it.
grep -v '"shift": "0"' "$work/plain.ckpt/manifest.json" | sed 'N;s/,\n *}/\n }/;P;D' > "$work/old-manifest.json"
grep -q shift "$work/old-manifest.json" && { echo "FAILED: the test could not remove shift"; exit 1; }
cp "$work/old-manifest.json" "$work/plain.ckpt/manifest.json"
"$app" --ranks 2 $common --batch 100 --epochs 2 --resume "$work/plain.ckpt" --out "" > "$work/old.log" 2>&1 ||
  { echo "FAILED: a checkpoint without shift was refused"; cat "$work/old.log"; exit 1; }
if "$app" --ranks 2 $common --batch 100 --epochs 2 --shift 1 --resume "$work/plain.ckpt" --out "" > "$work/bad.log" 2>&1; then
  echo "FAILED: a resume with another --shift was accepted"; exit 1
fi
grep -q "saved with shift 0, this run has 1" "$work/bad.log" || { echo "FAILED: shift message"; cat "$work/bad.log"; exit 1; }
echo "resume: passed"
