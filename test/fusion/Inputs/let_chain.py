"""Writes a .synk function of N lets, each used once (test/fusion/long-let-chain.test), and x = ones
as X.npy: let_chain.py N OUT.synk X.npy. Plain Python (lit's interpreter may have no numpy)."""
import struct
import sys

n, out, x = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lines = ["fn f(bcast x: f32[2]) {", "  let a0 = x;"]
lines += [f"  let a{i} = a{i - 1} * 1.0001 + x;" for i in range(1, n + 1)]
lines += [f"  out z: none = a{n};", "}"]
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"   # .npy 1.0: the data starts at a multiple of 64
with open(x, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<2f", 1.0, 1.0))
