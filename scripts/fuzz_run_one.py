#!/usr/bin/python3
"""Runs every function of one .synk file on random inputs (scripts/fuzz-compiler.py --run): binds
each symbolic dimension to a random size from 1 to 6, draws values of each input's dtype (small
integers, so that many are valid indices and labels), calls each function on RANKS ranks, once
plainly and once with random call options (batch, num_slices, output_subset), and
prints one line per function: `ok NAME`, `user NAME: message` (a synk.UsageError, UserError or a
RankError from data the program rejects) or `finding NAME: ...` (an InternalError, or an exception
that is not synk's). A crash shows as the process's signal, a hang as its timeout.

With SAVE, every output of every call is written to SAVE (a .npz; under mpirun by node 0 only),
for scripts/fuzz-compiler.py --nodes, which compares a run on 2 nodes of 1 rank with one on 1 node
of 2 ranks.

    fuzz_run_one.py FILE SEED RANKS [SAVE]
"""
import os
import re
import sys

import numpy as np
import synk


def split_top_level(text):
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c == "["
        depth -= c == "]"
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def random_value(dtype, shape, rng):
    if dtype in ("f32", "f64"):
        return (rng.standard_normal(shape) * 2).astype(np.float32 if dtype == "f32" else np.float64)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.integers(0, 4, shape).astype(np.int32 if dtype == "i32" else np.int64)


def arguments(signature, rng):
    params = re.match(r"[\w.]+\((.*)\) ->", signature).group(1)
    sizes, args = {}, []
    for p in split_top_level(params):
        m = re.match(r"(?:(\w+) )?(\w+): (\w+)(?:\[(.*)\])?$", p)
        if not m:
            raise SystemExit(f"finding signature: cannot read parameter {p!r} of {signature!r}")
        dtype, dims = m.group(3), m.group(4)
        shape = []
        for d in split_top_level(dims or ""):
            if d.isdigit():
                shape.append(int(d))
            else:
                shape.append(sizes.setdefault(d, int(rng.integers(1, 7))))
        args.append(random_value(dtype, tuple(shape), rng))
    return args


def call_options(f, args, rng):
    """Random call options: rows of the scattered inputs (a count, a range or an index list, now and
    then with an index past the end), a number of slices and an output subset."""
    options = {}
    rows = min((len(a) for a in args if getattr(a, "ndim", 0) > 0), default=0)
    choice = rng.integers(0, 5)
    if choice == 1:
        options["batch"] = int(rng.integers(0, rows + 1))
    elif choice == 2 and rows > 0:
        start = int(rng.integers(0, rows))
        options["batch"] = slice(start, int(rng.integers(start, rows + 1)))
    elif choice == 3:
        high = rows + int(rng.random() < 0.1)
        options["batch"] = [int(i) for i in rng.integers(0, high, rng.integers(0, 9))] if high else []
    if rng.random() < 0.5:
        options["num_slices"] = int(rng.integers(1, 5))
    if f.output_names and rng.random() < 0.3:
        options["output_subset"] = list(rng.permutation(f.output_names)[: rng.integers(1, len(f.output_names) + 1)])
    return options


NODE = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))   # under mpirun: the node this leader leads


def say(line):
    """Prints one line; under mpirun the other nodes print only findings (lines of two leaders
    would interleave)."""
    if NODE == 0 or line.startswith("finding"):
        print(line if NODE == 0 else f"{line} (node {NODE})", flush=True)


def record(saved, name, call, outputs):
    """Keeps a call's outputs (a value, a tuple of them, or a named tuple) under NAME/CALL/INDEX."""
    values = outputs if isinstance(outputs, tuple) else (outputs,)
    for i, v in enumerate(values):
        saved[f"{name}/{call}/{i}"] = np.asarray(v)


def main():
    path, seed, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    save = sys.argv[4] if len(sys.argv) > 4 else None
    saved = {}
    rng = np.random.default_rng(seed)
    try:
        module = synk.load(path)
    except synk.UserError as e:
        say(f"user (compile): {str(e).splitlines()[0]}")
        return
    synk.fork(ranks)
    for name in module.function_names:
        try:
            f = module.function(name)
            args = arguments(f.signature, rng)
            options = call_options(f, args, rng)   # drawn first: a failing call must not shift the draws
            record(saved, name, "plain", f(*args))
            record(saved, name, "options", f(*args, **options))
            say(f"ok {name}")
        except synk.InternalError as e:
            say(f"finding {name}: InternalError: {e}")
        except (synk.UsageError, synk.UserError, synk.RankError) as e:
            if "internal error" in str(e).lower():
                say(f"finding {name}: {type(e).__name__} with an internal error: {e}")
            else:
                say(f"user {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        except Exception as e:  # noqa: BLE001 - anything else is not synk's contract
            say(f"finding {name}: {type(e).__name__}: {e}")
    if save and NODE == 0:
        np.savez(save, **saved)


if __name__ == "__main__":
    main()
