#!/usr/bin/env python3
"""Data-parallel training of a 784-256-256-10 ReLU MLP on Fashion-MNIST with synk from Python:
the same model (examples/fashion_mnist/mlp.synk), optimizer, batch, data and validation as the
C++ example examples/fashion_mnist (see its README), so it reaches the same accuracy.

Each step is one call of the training step `train` that mlp.synk declares with `minimize`: the
gradient function over a shuffled index `batch` of the training set (a synk.Data in shared
memory; each rank gathers its own rows), one all_reduce(avg) of the flat gradient, the update
function. With --device-data the training set is scattered once into the sliceable shared
variables and each step picks every rank's rows with batch_s instead. Every epoch ends with one
call of `evaluate` over the whole validation set with num_slices; the run ends with the test
accuracy and the parameters saved as .npy files.

  PYTHONPATH=build/python python3 python/examples/fashion_mnist.py --ranks 2 --epochs 10

Exit status: 0 success; 1 an error (missing or damaged data, a failed call) or a failed
--require-accuracy check; 2 a bad command line; 77 when numpy or the synk package is missing.
"""
import argparse
import gzip
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.join(HERE, "..", "..", "examples", "fashion_mnist", "mlp.synk")
PIXELS = 784
PARAMETERS = ("w1", "b1", "w2", "b2", "w3", "b3")
OPTIMIZERS = ("sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adadelta", "adam", "adamax")


class DataError(Exception):
    """A missing or damaged data file; the message names the file."""


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got '{text}'")
    return value


def at_least(minimum):
    def check(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got '{text}'")
        return value
    return check


def fraction(text):
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1], e.g. 0.86 for 86%, got '{text}'")
    return value


def momentum_value(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got '{text}'")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="fashion_mnist.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=at_least(0), default=0, help="processes; 0: one per CPU core (or GPU)")
    p.add_argument("--backend", choices=("cpu", "gpu", "auto"), default="cpu")
    p.add_argument("--epochs", type=at_least(0), default=10)
    p.add_argument("--batch", type=at_least(1), default=256, help="global batch size (split over the ranks)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="replace the optimizer mlp.synk declares")
    p.add_argument("--lr", type=positive_float, help="learning rate (replaces the declared optimizer's)")
    p.add_argument("--momentum", type=momentum_value, help="momentum (momentum and nesterov)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="directory of the gzipped IDX files")
    p.add_argument("--model", default=DEFAULT_MODEL, help="the model's .synk file")
    p.add_argument("--out", default="fashion_mnist_params", help="directory for the parameters; '' to not save")
    p.add_argument("--limit", type=at_least(0), default=0, help="train on the first N images only (0: all)")
    p.add_argument("--seed", type=at_least(0), default=1, help="seed of the shuffles")
    p.add_argument("--require-accuracy", type=fraction, help="exit 1 unless the validation loss fell and the test "
                   "accuracy is at least this fraction")
    p.add_argument("--device-data", action="store_true", help="scatter the training set once into sliceable shared "
                   "variables and pick rows with batch_s")
    return p.parse_args(argv)


def read_idx(path, magic, np):
    """The array of a gzipped IDX file (images: u8 [n, 784]; labels: i64 [n])."""
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file (install the Debian package dataset-fashion-mnist, or pass --data)")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: not a readable gzip file ({e})") from None
    header = 16 if magic == 2051 else 8
    if len(raw) < header or int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{path}: not an IDX file of the expected kind (magic {magic})")
    count = int.from_bytes(raw[4:8], "big")
    if magic == 2051:
        rows, cols = int.from_bytes(raw[8:12], "big"), int.from_bytes(raw[12:16], "big")
        if rows * cols != PIXELS:
            raise DataError(f"{path}: images of {rows}x{cols} pixels, expected 28x28")
    size = count * (PIXELS if magic == 2051 else 1)
    if len(raw) - header != size:
        raise DataError(f"{path}: {len(raw) - header} bytes of data, the header announces {size}")
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if magic == 2051:
        return data.reshape(count, PIXELS)
    if data.size and data.max() > 9:
        raise DataError(f"{path}: a label outside 0..9")
    return data.astype(np.int64)


def read_split(directory, split, np):
    images = read_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"), 2051, np)
    labels = read_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"), 2049, np)
    if len(images) != len(labels):
        raise DataError(f"{directory}: {len(images)} {split} images but {len(labels)} labels")
    return images, labels


def model_text(args):
    """mlp.synk, with its optimizer declaration replaced when --optimizer, --lr or --momentum is given."""
    try:
        with open(args.model) as f:
            text = f.read()
    except OSError as e:
        raise DataError(f"cannot read the model '{args.model}': {e.strerror}") from None
    if args.optimizer is None and args.lr is None and args.momentum is None:
        return text
    rule = args.optimizer or "momentum"
    hyper = [f"lr={args.lr if args.lr is not None else 0.05}"]
    if rule in ("momentum", "nesterov"):
        hyper.append(f"momentum={args.momentum if args.momentum is not None else 0.9}")
    text, count = re.subn(r"optimizer\s+opt\s*=[^;]*;", f"optimizer opt = {rule}({', '.join(hyper)});", text)
    if count != 1:
        raise DataError(f"{args.model}: no 'optimizer opt = ...;' declaration to replace")
    return text


def evaluate(evaluate_fn, images, labels, ranks):
    """Loss and accuracy over a whole set in one call, in slices of at most 2,000 rows per rank."""
    per_rank = (len(images) + ranks - 1) // ranks
    r = evaluate_fn(images, labels, num_slices=max(1, (per_rank + 1999) // 2000))
    return float(r["loss"]), float(r["accuracy"])


def device_plan(synk, np, mod, train, ranks, batch):
    """--device-data: scatter the set once; each rank shuffles its own rows; a step takes the next
    share of every rank's order. Returns the per-rank orders, shares and the steps per epoch."""
    synk.scatter([mod.shared("train_images"), mod.shared("train_labels")], list(train))
    n = len(train[0])
    orders = [np.arange((r + 1) * n // ranks - r * n // ranks) for r in range(ranks)]
    shares = [(r + 1) * batch // ranks - r * batch // ranks for r in range(ranks)]
    steps = min((len(o) // s for o, s in zip(orders, shares) if s > 0), default=0)
    if steps == 0:
        raise DataError(f"--device-data: {n} training images do not give each of {ranks} ranks a share of a "
                        f"batch of {batch}")
    return orders, shares, steps


def train_epoch(args, synk, np, mod, data, ranks, rng, plan):
    """One pass over the training set; returns (mean training loss, seconds)."""
    images, labels = data
    start, loss_sum, rows_done = time.perf_counter(), 0.0, 0
    if args.device_data:
        orders, shares, steps = plan
        step_fn = mod.train_step("train_device")
        for o in orders:
            rng.shuffle(o)
        for step in range(steps):
            per_rank = [o[step * s:(step + 1) * s] for o, s in zip(orders, shares)]
            rows = sum(shares)
            loss_sum += float(step_fn(batch_s=per_rank))
            rows_done += rows
    else:
        step_fn = mod.train_step("train")
        order = rng.permutation(len(images))
        for begin in range(0, len(order), args.batch):
            idx = order[begin:begin + args.batch]
            loss_sum += float(step_fn(images, labels, batch=idx))   # the mean gradient over idx, exactly
            rows_done += len(idx)
    return loss_sum / max(rows_done, 1), time.perf_counter() - start


def check_out_dir(out):
    if not out:
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise DataError(f"--out '{out}' exists and is not a directory")
    os.makedirs(out, exist_ok=True)
    if not os.access(out, os.W_OK | os.X_OK):
        raise DataError(f"--out '{out}': the directory is not writable")


def train(args, synk, np):
    train_images, train_labels = read_split(args.data, "train", np)   # before anything is forked
    test_images, test_labels = read_split(args.data, "t10k", np)
    if args.limit > len(train_images):
        raise DataError(f"--limit {args.limit} asks for more training images than the {len(train_images)} there are")
    if args.limit:
        train_images, train_labels = train_images[:args.limit], train_labels[:args.limit]
    check_out_dir(args.out)
    t0 = time.perf_counter()
    mod = synk.compile(model_text(args), base_dir=os.path.dirname(os.path.abspath(args.model)), name=args.model)
    mod.compile_all()                                  # before the fork: the workers inherit the code
    compile_s = time.perf_counter() - t0
    ranks = synk.fork(args.ranks, backend=args.backend)
    images = synk.data(train_images, name="training images")
    labels = synk.data(train_labels, name="training labels")
    test = (synk.data(test_images, name="test images"), synk.data(test_labels, name="test labels"))
    evaluate_fn = mod.function("evaluate")
    print(f"fashion_mnist.py: MLP 784-256-256-10 (ReLU, f32), global batch {args.batch}, {ranks} rank"
          f"{'' if ranks == 1 else 's'} ({synk.backend().upper()}), {len(train_images)} training images"
          f"{' scattered once (batch_s)' if args.device_data else ''}; compiled in {compile_s:.2f} s", flush=True)
    initial = evaluate(evaluate_fn, *test, ranks)
    print(f"epoch  0  val loss {initial[0]:.4f}  val acc {100 * initial[1]:5.2f}%  (before training)", flush=True)
    rng = np.random.default_rng(args.seed)
    plan = device_plan(synk, np, mod, (images, labels), ranks, args.batch) if args.device_data else None
    last, total = initial, 0.0
    for epoch in range(1, args.epochs + 1):
        loss, seconds = train_epoch(args, synk, np, mod, (images, labels), ranks, rng, plan)
        total += seconds
        last = evaluate(evaluate_fn, *test, ranks)
        print(f"epoch {epoch:2d}  train {seconds:6.2f} s  loss {loss:.4f}  val loss {last[0]:.4f}  "
              f"val acc {100 * last[1]:5.2f}%", flush=True)
    print(f"test loss {last[0]:.4f}  test accuracy {100 * last[1]:.2f}%  ({args.epochs} epochs, {total:.2f} s of "
          f"training, {total / max(args.epochs, 1):.3f} s per epoch)")
    if args.out:
        for p in PARAMETERS:
            np.save(os.path.join(args.out, f"{p}.npy"), mod.shared(p).get_value())
        print(f"parameters saved to {args.out}/{{{','.join(PARAMETERS)}}}.npy")
    synk.close()
    return check_accuracy(args, initial, last)


def check_accuracy(args, initial, last):
    if args.require_accuracy is None:
        return 0
    if not last[0] < initial[0]:
        print(f"fashion_mnist.py: check failed: the validation loss did not decrease ({initial[0]:.4f} -> "
              f"{last[0]:.4f})", file=sys.stderr)
        return 1
    if not last[1] >= args.require_accuracy:
        print(f"fashion_mnist.py: check failed: test accuracy {100 * last[1]:.2f}% < required "
              f"{100 * args.require_accuracy:.2f}%", file=sys.stderr)
        return 1
    print(f"check passed: validation loss {initial[0]:.4f} -> {last[0]:.4f}, test accuracy {100 * last[1]:.2f}% >= "
          f"{100 * args.require_accuracy:.2f}%")
    return 0


def main(argv):
    args = parse_args(argv)
    try:
        import numpy as np
        import synk
    except ImportError as e:
        print(f"SKIPPED: {e} (needs numpy and the synk package: PYTHONPATH=build/python)")
        return 77
    try:
        return train(args, synk, np)
    except (DataError, synk.Error) as e:
        print(f"fashion_mnist.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
