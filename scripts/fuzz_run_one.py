#!/usr/bin/python3
"""Runs every function of one .synk file on random inputs (scripts/fuzz-compiler.py --run): binds
each symbolic dimension to a random size from 1 to 6, draws values of each input's dtype (small
integers, so that many are valid indices and labels), calls each function once on RANKS ranks and
prints one line per function: `ok NAME`, `user NAME: message` (a synk.UsageError, UserError or a
RankError from data the program rejects) or `finding NAME: ...` (an InternalError, or an exception
that is not synk's). A crash shows as the process's signal, a hang as its timeout.

    fuzz_run_one.py FILE SEED RANKS
"""
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


def main():
    path, seed, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(seed)
    try:
        module = synk.load(path)
    except synk.UserError as e:
        print(f"user (compile): {str(e).splitlines()[0]}")
        return
    synk.fork(ranks)
    for name in module.function_names:
        try:
            f = module.function(name)
            f(*arguments(f.signature, rng))
            print(f"ok {name}", flush=True)
        except synk.InternalError as e:
            print(f"finding {name}: InternalError: {e}", flush=True)
        except (synk.UsageError, synk.UserError, synk.RankError) as e:
            if "internal error" in str(e).lower():
                print(f"finding {name}: {type(e).__name__} with an internal error: {e}", flush=True)
            else:
                print(f"user {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        except Exception as e:  # noqa: BLE001 - anything else is not synk's contract
            print(f"finding {name}: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
