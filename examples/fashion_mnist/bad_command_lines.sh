#!/usr/bin/env bash
# Bad command lines of fashion_mnist (a CTest test): each must exit with the status its README
# gives (2 for a bad command line, 1 for a bad model file) and a message naming what was wrong,
# before any training. Cases that need the data set are skipped, with a note, when it is absent.
# Usage: bad_command_lines.sh FASHION_MNIST_BINARY DATA_DIR SCRATCH_DIR
set -u
binary=$1
data=$2
scratch=$3
mkdir -p "$scratch"
: > "$scratch/a-file"
mkdir -p "$scratch/a-dir.synk"
passed=0
failed=0

# expect STATUS REGEX ARGS...: runs the binary with ARGS; the exit status must be STATUS and
# stderr must match REGEX (grep -E).
expect() {
  local status=$1 regex=$2
  shift 2
  local err defaults=(--epochs 1)
  [[ " $* " == *" --out "* ]] || defaults+=(--out "")
  err=$(timeout 120 "$binary" "${defaults[@]}" "$@" 2>&1 >/dev/null)
  local got=$?
  if [[ $got -eq $status ]] && grep -qE -- "$regex" <<<"$err"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: fashion_mnist $*: exit $got (want $status), stderr:"
    echo "$err" | sed 's/^/    /'
    echo "    (want a line matching: $regex)"
  fi
}

expect 2 "--lr: must be a number > 0, got '-1'" --lr -1
expect 2 "--lr: must be a number > 0, got '0'" --lr 0
expect 2 "--momentum: must be a number in \[0, 1\), got '1.5'" --momentum 1.5
expect 2 "--optimizer: .*foo" --optimizer foo
expect 2 "--require-accuracy: must be a fraction in \(0, 1\]" --require-accuracy 30
expect 2 "--seed: must be an integer from 0 to 2\^64 - 1, got '-1'" --seed -1
expect 2 "--batch: must be an integer >= 1, got '0'" --batch 0
expect 2 "--ranks: must be an integer >= 0, got '-1'" --ranks -1
expect 2 "--shift: must be an integer from 0 to 8, got '9'" --shift 9
expect 2 "--warmup: must be a number >= 0, got '-1'" --warmup -1
expect 2 "--warmup 1 must be fewer epochs than --epochs 1" --warmup 1
expect 2 "--shift moves the images of the index-batch mode; it cannot be combined with --device-data" --shift 2 --device-data
expect 2 "--out '/proc/synk-nope': cannot create the directory" --out /proc/synk-nope
expect 2 "--out '$scratch/a-file' exists and is not a directory" --out "$scratch/a-file"
expect 1 "the model '$scratch/a-dir.synk' is a directory" --data "$data" --model "$scratch/a-dir.synk"
expect 1 "cannot read the model '$scratch/missing.synk': No such file or directory" --data "$data" --model "$scratch/missing.synk"
if [[ -f $data/train-images-idx3-ubyte.gz ]]; then
  expect 2 "--holdout 60000 leaves no training images" --data "$data" --holdout 60000
  expect 2 "--limit 2000 asks for more training images than the 1000 there are after --holdout 59000" \
    --data "$data" --holdout 59000 --limit 2000
  expect 2 "--limit 70000 asks for more training images than the 55000 there are after --holdout 5000" --data "$data" --limit 70000
  expect 2 "--holdout: must be an integer >= 1, got '0'" --data "$data" --holdout 0
  # The bounds the messages name are accepted: --warmup 0 (off) trains.
  expect 0 "" --data "$data" --warmup 0 --limit 300 --holdout 100
else
  echo "note: $data has no Fashion-MNIST files; the --holdout/--limit cases are skipped"
fi
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
