"""Writes a .synk function of N lets, each used once (test/fusion/long-let-chain.test), and x = ones
as X.npy: let_chain.py N OUT.synk X.npy"""
import sys

import numpy as np

n, out, x = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lines = ["fn f(bcast x: f32[2]) {", "  let a0 = x;"]
lines += [f"  let a{i} = a{i - 1} * 1.0001 + x;" for i in range(1, n + 1)]
lines += [f"  out z: none = a{n};", "}"]
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
np.save(x, np.ones(2, dtype="float32"))
