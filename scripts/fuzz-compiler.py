#!/usr/bin/python3
"""Mutation fuzzing of the whole compiler, past the front end that scripts/fuzz-parser.sh covers.

Takes every .synk under examples/ and test/ that `synkc check` accepts, makes small plausible
changes to it (an integer or a dimension replaced, one operation, dtype, identifier, input role or
reduce mode swapped for another, a line dropped or repeated, an axis made negative, a let's value
passed through one more operation) and runs each mutant through `synkc --emit=STAGE` for the later
stages (ir-grad, ir-fused, cpp, cuda by default), where the gradient pass, fusion, the planner and
both code generators run. A user error (exit 1 or 2, with a diagnostic) and success are both fine; a
finding is an internal error (exit 3), a crash (a signal), a hang (over --timeout seconds) or a
message without "error" on a failure. Each finding is written to DIR/finding-N.synk with the command
and its output beside it. With --run, each mutant of a program under 80 lines instead runs: every
function once, on random inputs of the declared dtypes with random sizes, on 1 or 2 ranks
(scripts/fuzz_run_one.py); there a finding is a synk.InternalError, an exception that is not synk's,
a crash or a hang. With --diff, each such mutant's functions are compiled for the CPU and compared
with the float64 reference evaluator on random arguments (compiler_cpu_diff_one_fuzz, the
differential tests' check, with a looser f32 tolerance); a difference, or a user error on one side
only, is a finding. With --grad, each such mutant (widened to f64) has the gradient of every float
output and update with respect to each variable it reads checked against central differences
(compiler_grad_fd_one_fuzz): a derivative that disagrees where the numbers are smooth is a finding.
With --nodes, each such mutant runs as --run does on 1 node of 2 ranks and on 2 nodes of 1 rank
(mpirun, TCP over loopback): different outcomes or different output bits are a finding.
Not part of CI (random, and minutes long); run it after changing a compiler pass:

    scripts/fuzz-compiler.py [--synkc build/tools/synkc/synkc] [--seconds 600] [--seed S] [--out DIR] [--run | --diff | --grad | --nodes]
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ["relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "sum", "mean", "max", "min", "prod",
       "softmax", "log_softmax", "cumsum", "transpose", "reshape", "argmax", "conv2d", "max_pool2d",
       "avg_pool2d", "batch_norm", "concat", "slice", "take", "one_hot", "maximum", "minimum", "where",
       "broadcast_to", "cross_entropy"]
DTYPES = ["f32", "f64", "i32", "i64", "bool", "f16", "bf16"]
MODES = ["avg", "sum", "max", "min", "prod", "gather", "none"]
ROLES = ["scatter", "bcast", "scatter minibatch", "bcast minibatch"]
INTEGERS = ["0", "1", "2", "3", "-1", "-2", "7", "64", "1000000"]


def replace_one(text, rng, pattern, choices, group=0):
    """`text` with one random match of `pattern` (its `group`) replaced by one of `choices`."""
    sites = list(re.finditer(pattern, text))
    if not sites:
        return None
    m = rng.choice(sites)
    return text[:m.start(group)] + rng.choice(choices) + text[m.end(group):]


# Shape-keeping rewrites of a let's value `v` (most need a float of rank 1 or more).
WRAPPERS = ["relu({v})", "tanh({v})", "exp(-abs({v}))", "sqrt(abs({v}))", "-{v}", "{v} * 2", "{v} + {v}",
            "softmax({v}, axis=0)", "log_softmax({v}, axis=-1)", "cumsum({v}, axis=0)", "where({v} > 0, {v}, 0)",
            "{v} - mean({v}, axis=0, keepdims=true)", "maximum({v}, 0.5)", "{v} / (1 + abs({v}))",
            "transpose(transpose({v}))", "{v} * sum({v}, axis=-1, keepdims=true)",
            "cast(cast({v}, f64), f32)", "slice(concat({v}, {v}, axis=0), 0, 1, axis=0)",
            # more of the gradient pass's rules (--grad)
            "{v} ** 2", "softplus({v})", "sin({v}) * cos({v})", "log1p(abs({v}))", "expm1(-abs({v}))",
            "sigmoid({v}) * {v}", "{v} - max({v}, axis=0, keepdims=true)", "{v} * min({v}, axis=-1, keepdims=true)",
            "{v} * prod({v}, axis=0, keepdims=true)", "cumsum({v}, axis=-1, reverse=true)",
            "clip({v}, -0.5, 0.5)", "minimum({v}, {v} * {v})", "{v} / (1 + logsumexp({v}, axis=0, keepdims=true) ** 2)",
            "{v} * var({v}, axis=0, keepdims=true)", "{v} / (1 + norm({v}))",
            "binary_cross_entropy_with_logits({v}, sigmoid({v}))", "squeeze(slice(stack([{v}, {v} * 2], axis=0), 1, 2, axis=0), 0)"]


def wrap_a_let(text, rng):
    """`let a = E;` becomes `let a_fz = E; let a = W(a_fz);` for a random wrapper W."""
    sites = list(re.finditer(r"^(\s*)let ([a-z_][a-z0-9_]*)(\s*:[^=]*)? = ", text, re.M))
    if not sites:
        return None
    m = rng.choice(sites)
    end = text.index(";", m.end()) + 1
    indent, name = m.group(1), m.group(2)
    wrapped = rng.choice(WRAPPERS).format(v=name + "_fz")
    return (text[:m.start()] + f"{indent}let {name}_fz = " + text[m.end():end] + f"\n{indent}let {name} = {wrapped};"
            + text[end:])


def mutate(text, rng):
    """One random change of a kind chosen at random; returns None when the kind has no site."""
    kind = rng.randrange(10)
    if kind == 9:  # a let's value passed through one more operation
        return wrap_a_let(text, rng)
    if kind == 0:  # an integer literal
        return replace_one(text, rng, r"(?<![\w.])\d+(?![\w.])", INTEGERS)
    if kind == 1:  # an operation
        return replace_one(text, rng, r"\b(" + "|".join(OPS) + r")(?=\()", OPS)
    if kind == 2:  # a dtype
        return replace_one(text, rng, r"\b(" + "|".join(DTYPES) + r")\b", DTYPES)
    if kind == 3:  # a reduce mode
        return replace_one(text, rng, r"(?<=: )(" + "|".join(MODES) + r")\b", MODES)
    if kind == 4:  # one identifier for another of the same file
        return replace_one(text, rng, r"\b[a-z_][a-z0-9_]*\b", re.findall(r"\b[a-z_][a-z0-9_]*\b", text) or [""])
    if kind == 8:  # an input's role
        return replace_one(text, rng, r"\b(scatter|bcast)\b", ROLES)
    if kind == 7:  # an axis made negative or past the rank
        return replace_one(text, rng, r"(?<=axis=)\d+|(?<=axes=\[)\d+", ["-1", "-2", "-5", "5", "9"])
    lines = text.split("\n")
    body = [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("//")]
    if not body:
        return None
    i = rng.choice(body)
    if kind == 5:  # a line dropped
        return "\n".join(lines[:i] + lines[i + 1:])
    return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])  # a line repeated


def accepted_seeds(synkc, workdir):
    seeds = []
    for base in ("examples", "test"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, base)):
            for name in sorted(files):
                if not name.endswith(".synk") or name.startswith("."):   # other runs' mutants
                    continue
                path = os.path.join(dirpath, name)
                try:
                    r = subprocess.run([synkc, path, "check"], capture_output=True, text=True, timeout=60,
                                       cwd=workdir)
                except subprocess.TimeoutExpired:
                    continue
                if r.returncode == 0:
                    seeds.append(path)
    return seeds


def run_stage(synkc, path, stage, timeout):
    try:
        r = subprocess.run([synkc, path, f"--emit={stage}"], capture_output=True, text=True,
                           timeout=timeout, cwd=os.path.dirname(path))
    except subprocess.TimeoutExpired:
        return "hang", ""
    out = r.stderr[-4000:]
    if r.returncode < 0:
        return f"signal {-r.returncode}", out
    if r.returncode == 3 or "internal error" in r.stderr:
        return "internal error", out
    if r.returncode not in (0, 1, 2):
        return f"exit {r.returncode}", out
    if r.returncode != 0 and "error" not in r.stderr:
        return "failure without a diagnostic", out
    return None, out


python_path = [os.path.join(ROOT, "build/python")]   # where --run imports synk from (main() sets it)
run_one = [os.path.join(ROOT, "scripts/fuzz_run_one.py")]   # and the runner it starts


def run_helper(command, path, timeout, env=None):
    """Runs a helper that prints a line per function, `finding ...` for a finding, on `path`."""
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=os.path.dirname(path))
    except subprocess.TimeoutExpired:
        return "hang", ""
    out = (r.stdout + r.stderr)[-4000:]
    if r.returncode < 0:
        return f"signal {-r.returncode}", out
    findings = [line for line in r.stdout.splitlines() if line.startswith("finding")]
    if findings:
        return findings[0][:200], out
    if r.returncode != 0:
        return f"exit {r.returncode}", out
    return None, out


def run_program(path, seed, timeout):
    """Every function of `path` on random inputs (scripts/fuzz_run_one.py) on 1 or 2 ranks."""
    env = dict(os.environ, PYTHONPATH=python_path[0])
    return run_helper(["/usr/bin/python3", run_one[0], path, str(seed), str(1 + seed % 2)], path, timeout, env)


MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "btl", "tcp,self",
          "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]


def nodes_program(path, seed, timeout, out):
    """Every function of `path` on random inputs on 1 node of 2 ranks and on 2 nodes (mpirun, TCP
    over loopback) of 1 rank: the same lines and the same output bits, or a finding."""
    env = dict(os.environ, PYTHONPATH=python_path[0])
    runs = []
    for launcher, ranks in (([], "2"), (MPIRUN, "1")):
        save = os.path.join(out, f"nodes-{ranks}.npz")
        if os.path.exists(save):
            os.unlink(save)
        what, text = run_helper(launcher + ["/usr/bin/python3", run_one[0], path, str(seed), ranks, save], path,
                                timeout, env)
        if what is not None:
            return f"{what} on {'2 nodes' if launcher else '1 node'}", text
        lines = sorted(set(line for line in text.splitlines() if re.match(r"(ok|user) ", line)))
        runs.append((lines, np.load(save) if os.path.exists(save) else None, text))
    (lines1, saved1, text1), (lines2, saved2, text2) = runs
    if lines1 != lines2:
        return "different outcomes on 2 nodes", f"1 node:\n{text1}\n2 nodes:\n{text2}"
    if saved1 is None or saved2 is None:
        return None, text1
    for key in saved1.files:
        a, b = saved1[key], saved2[key] if key in saved2.files else None
        if b is None or a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=True):
            return f"different bits on 2 nodes: {key}", f"1 node: {a!r}\n2 nodes: {b!r}"
    return None, text1


def helper_program(helper, path, seed, timeout):
    """--diff's and --grad's helpers: compiler_cpu_diff_one_fuzz, compiler_grad_fd_one_fuzz."""
    return run_helper([helper, path, str(seed)], path, timeout)


def main():
    # A kill (pkill, a batch system's time limit) ends the run as Ctrl-C does: the mutant beside its
    # seed is removed on the way out, not left in the tree.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--synkc", default=os.path.join(ROOT, "build/tools/synkc/synkc"))
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--stages", default="ir-grad,ir-fused,cpp,cuda")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--run", action="store_true",
                    help="run each mutant's functions on random inputs instead (programs under 80 lines)")
    ap.add_argument("--diff", action="store_true",
                    help="compare each mutant's compiled functions with the float64 reference on random "
                         "arguments instead (build/compiler/cpu/compiler_cpu_diff_one_fuzz)")
    ap.add_argument("--grad", action="store_true",
                    help="check each mutant's gradients against central differences instead "
                         "(build/compiler/grad/compiler_grad_fd_one_fuzz)")
    ap.add_argument("--nodes", action="store_true",
                    help="run each mutant's functions on 1 node of 2 ranks and on 2 nodes of 1 rank (mpirun) "
                         "and compare the outputs' bits instead")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/fuzz-compiler"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # A copy, so that rebuilding the tree during a run does not pull the compiler from under it.
    args.synkc_source = os.path.abspath(args.synkc)
    synkc = os.path.join(args.out, "synkc")
    shutil.copy2(args.synkc, synkc)
    args.synkc = synkc
    helper = None
    for wanted, built in ((args.diff, "compiler/cpu/compiler_cpu_diff_one_fuzz"),
                          (args.grad, "compiler/grad/compiler_grad_fd_one_fuzz")):
        if wanted:
            helper = os.path.join(args.out, os.path.basename(built))
            shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(args.synkc_source))), built),
                         helper)
    if args.run or args.nodes:  # the Python package too, for the same reason
        shutil.rmtree(os.path.join(args.out, "python"), ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, "build/python"), os.path.join(args.out, "python"))
        shutil.copy2(os.path.join(ROOT, "scripts/fuzz_run_one.py"), args.out)
        run_one[0] = os.path.join(args.out, "fuzz_run_one.py")
    python_path[0] = os.path.join(args.out, "python")
    rng = random.Random(args.seed)
    seeds = accepted_seeds(args.synkc, args.out)
    if args.run or args.diff or args.grad or args.nodes:
        seeds = [p for p in seeds if len(open(p).read().splitlines()) < 80]
    print(f"fuzz-compiler: seed {args.seed}, {len(seeds)} accepted programs, stages {args.stages}")
    stages = args.stages.split(",")
    deadline = time.time() + args.seconds
    runs = findings = passed_check = 0
    seen = set()
    while time.time() < deadline:
        seed_path = rng.choice(seeds)
        text = open(seed_path).read()
        for _ in range(rng.choice([1, 1, 2, 3])):
            mutant = mutate(text, rng)
            text = mutant if mutant is not None else text
        # Mutants live beside their seed so that load("...") of .npy files and helpers resolve.
        path = os.path.join(os.path.dirname(seed_path), f".fuzz-{os.getpid()}.synk")
        with open(path, "w") as f:
            f.write(text)
        try:
            if helper:
                stage = "grad" if args.grad else "diff"
                what, out = helper_program(helper, path, rng.randrange(1 << 30), args.timeout)
            elif args.nodes:
                stage = "nodes"
                what, out = nodes_program(path, rng.randrange(1 << 30), args.timeout, args.out)
            elif args.run:
                stage = "run"
                what, out = run_program(path, rng.randrange(1 << 30), args.timeout)
            else:
                stage = rng.choice(stages)
                what, out = run_stage(args.synkc, path, stage, args.timeout)
        finally:
            os.unlink(path)
        runs += 1
        if runs % 500 == 0:
            print(f"fuzz-compiler: {runs} mutants, {findings} findings", flush=True)
        if what is None:
            passed_check += "error" not in out and "user" not in out
            continue
        signature = (re.sub(r"\d+", "N", what), re.sub(r"\d+", "N", out.strip().split("\n")[-1])[:160])
        if signature in seen:
            continue
        seen.add(signature)
        findings += 1
        stem = os.path.join(args.out, f"finding-{findings}")
        with open(stem + ".synk", "w") as f:
            f.write(text)
        with open(stem + ".txt", "w") as f:
            f.write(f"{what}: {stage} (mutant of {os.path.relpath(seed_path, ROOT)})\n{out}")
        print(f"finding {findings}: {what} at --emit={stage} ({os.path.relpath(seed_path, ROOT)}): "
              f"{signature[1]}", flush=True)
    print(f"fuzz-compiler: {runs} mutants, {passed_check} without an error, {findings} distinct findings"
          f" in {args.out}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
