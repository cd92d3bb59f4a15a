#!/usr/bin/env python3
"""An independent model of philox.h in plain Python (integers and exactly rounded conversions).

It is where the header's fixed-point constants come from, and it prints the golden values that
philox_test.cpp checks, so that the C++ text is compared with a second implementation written from
the description in philox.h rather than with itself. Standard library only.

  python3 reference_model.py constants   derive the constants and check that philox.h has them
  python3 reference_model.py golden      print the golden values (C++ initialisers)
  python3 reference_model.py accuracy    worst errors of the fixed-point log and sin/cos
"""
import math
import random
import re
import struct
import sys
from decimal import Decimal, getcontext
from pathlib import Path

getcontext().prec = 60
M64 = (1 << 64) - 1
M32 = (1 << 32) - 1


# ---- Constants -------------------------------------------------------------------------------

def log_poly_q31(degree=12):
    """Q(t) = ln(1 + t) / t on [sqrt(1/2) - 1, sqrt(2) - 1]: Chebyshev interpolation (near-minimax)
    converted to powers of t, lowest first, in Q31. Doubles are ample: the target is ~1e-11."""
    a, b = math.sqrt(0.5) - 1, math.sqrt(2) - 1
    mid, half = (a + b) / 2, (b - a) / 2
    n = degree + 1
    xs = [math.cos(math.pi * (j + 0.5) / n) for j in range(n)]
    fs = [math.log1p(mid + half * x) / (mid + half * x) for x in xs]
    cheb = [(2.0 / n) * sum(f * math.cos(k * math.pi * (j + 0.5) / n) for j, f in enumerate(fs))
            for k in range(n)]
    cheb[0] /= 2
    tk = [[1.0], [0.0, 1.0]]
    for k in range(2, n):
        tk.append([0.0] + [2 * v for v in tk[k - 1]])
        for i, v in enumerate(tk[k - 2]):
            tk[k][i] -= v
    in_x = [0.0] * n
    for k in range(n):
        for i, v in enumerate(tk[k]):
            in_x[i] += cheb[k] * v
    in_t = [0.0] * n
    for i, v in enumerate(in_x):   # x = (t - mid) / half
        for j in range(i + 1):
            in_t[j] += v * math.comb(i, j) * (-mid) ** (i - j) / half ** i
    return [round(v * 2**31) for v in in_t]


def trig_q31():
    pi = Decimal("3.14159265358979323846264338327950288419716939937510582097494")
    h = pi / 2
    sin = [int((((-1) ** k) * h ** (2 * k + 1) / math.factorial(2 * k + 1) * 2**31).to_integral_value())
           for k in range(6)]
    cos = [int((((-1) ** k) * h ** (2 * k) / math.factorial(2 * k) * 2**31).to_integral_value())
           for k in range(7)]
    return sin, cos


LOG_Q = log_poly_q31()
SIN_Q, COS_Q = trig_q31()
LN2_Q56 = int((Decimal(2).ln() * 2**56).to_integral_value())
SQRT2_Q32 = int((Decimal(2).sqrt() * 2**32).to_integral_value(rounding="ROUND_CEILING"))


# ---- Philox and the mapping ---------------------------------------------------------------------

def philox(ctr, key, rounds=10):
    c, k0, k1 = list(ctr), key[0], key[1]
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
    return c


def block(seed, salt, step, row, blk):
    k = seed ^ ((salt * 0x9E3779B97F4A7C15) & M64)
    high = ((blk >> 32) & 0xFF) | ((row >> 32) & 0xFF) << 8 | ((step >> 32) & 0xFFFF) << 16
    return philox([blk & M32, row & M32, step & M32, high], [k & M32, k >> 32])


# ---- Exactly rounded float32 ------------------------------------------------------------------

def f32(x):
    """Round a double to float32 (round to nearest even), as the hardware does."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f32_of_int(n):
    """int64 -> float32 with one rounding (float(n) would round to 53 bits first)."""
    neg, n = n < 0, abs(n)
    if n.bit_length() > 24:
        drop = n.bit_length() - 24
        q, r = n >> drop, n & ((1 << drop) - 1)
        halfway = 1 << (drop - 1)
        if r > halfway or (r == halfway and q & 1):
            q += 1
        n = q << drop
    return -float(n) if neg else float(n)


# ---- The fixed-point Box-Muller -----------------------------------------------------------------

def rshift_round(v, s):
    return (v + (1 << (s - 1))) >> s


def minus2log_q56(u):
    x = 2 * u + 1
    e = x.bit_length() - 1
    m = x << (32 - e)
    big = m >= SQRT2_Q32
    t33 = m - 2**33 if big else 2 * m - 2**33
    n = 33 - e - big
    t = t33 >> 1
    p = LOG_Q[-1]
    for c in reversed(LOG_Q[:-1]):
        p = c + rshift_round(p * t, 32)
    assert abs(p * t33) < 2**63
    return 2 * (n * LN2_Q56 - rshift_round(p * t33, 8))


def sincos_q31(u):
    quadrant, f = u >> 30, u & (2**30 - 1)
    upper = f > 2**29
    x = ((2**30 - f) if upper else f) << 1
    x2 = rshift_round(x * x, 31)
    s = SIN_Q[-1]
    for c in reversed(SIN_Q[:-1]):
        s = c + rshift_round(s * x2, 31)
    s = rshift_round(s * x, 31)
    c = COS_Q[-1]
    for k in reversed(COS_Q[:-1]):
        c = k + rshift_round(c * x2, 31)
    if upper:
        c, s = s, c
    return [(c, s), (-s, c), (-c, -s), (s, -c)][quadrant]


def normal2_f32(u1, u2):
    c, s = sincos_q31(u2)
    # sqrt: a correctly rounded double sqrt of a float, rounded to float, is the float sqrt.
    r = f32(math.sqrt(f32_of_int(minus2log_q56(u1)) * 2.0**-56))
    return f32(r * (f32_of_int(c) * 2.0**-31)), f32(r * (f32_of_int(s) * 2.0**-31))


def normal2_f64(u1, u2):
    c, s = sincos_q31(u2)
    r = math.sqrt(float(minus2log_q56(u1)) * 2.0**-56)
    return r * (c * 2.0**-31), r * (s * 2.0**-31)


# ---- Commands -------------------------------------------------------------------------------------

def constants():
    print("log Q(t), Q31, lowest first:", LOG_Q)
    print("sin, Q31:", SIN_Q)
    print("cos, Q31:", COS_Q)
    print("ln2 Q56: 0x%X   sqrt2 Q32 (ceil): %d" % (LN2_Q56, SQRT2_Q32))
    header = Path(__file__).with_name("philox.h").read_text()
    literals = set(re.findall(r"(-?(?:0x[0-9A-F]+|\d+))ll", header))
    wanted = [str(v) for v in LOG_Q + SIN_Q + COS_Q + [SQRT2_Q32]] + ["0x%X" % LN2_Q56]
    missing = [w for w in wanted if w not in literals]
    print("philox.h has them all" if not missing else "MISSING from philox.h: %s" % missing)
    return 1 if missing else 0


NORMAL_INPUTS = [(0, 0), (0xFFFFFFFF, 0x40000000), (0x80000000, 0x20000000), (0x12345678, 0x9ABCDEF0),
                 (0xB504F333, 0xE0000001), (1, 0xFFFFFFFF), (0x7FFFFFFF, 0x60000000)]
STREAM = (0x0123456789ABCDEF, 7, 3)                         # seed, salt, step
BLOCKS = [(5, 0), (5, 1), ((1 << 39) + 5, (1 << 39) + 1)]   # (row, block)
HIGH_STEP = (1 << 47) + 3


def golden():
    print("// normal2 (u1, u2) -> f32 bits, f64 bits")
    for u1, u2 in NORMAL_INPUTS:
        a, b = normal2_f32(u1, u2)
        c, d = normal2_f64(u1, u2)
        print("  {0x%08Xu, 0x%08Xu, 0x%08Xu, 0x%08Xu, 0x%016Xull, 0x%016Xull}," %
              (u1, u2, f32_bits(a), f32_bits(b), f64_bits(c), f64_bits(d)))
    seed, salt, step = STREAM
    print("// blocks of seed 0x%X salt %d step %d; the last one at step 2^47 + 3" % STREAM)
    for i, (row, blk) in enumerate(BLOCKS):
        w = block(seed, salt, HIGH_STEP if i == len(BLOCKS) - 1 else step, row, blk)
        print("  {%s}," % ", ".join("0x%08Xu" % v for v in w))
    return 0


def accuracy():
    rng = random.Random(1)
    worst_log = worst_rel = worst_trig = 0.0
    for u in [0, 1, 2, M32, M32 - 1, 2**31 - 1, 2**31, 0xB504F333] + [rng.getrandbits(32) for _ in range(200000)]:
        w = Decimal(2**33 - 2 * u - 1) / Decimal(2**33)       # 1 - U, exact
        exact = float(-2 * (1 - w).ln())
        got = minus2log_q56(u) / 2**56
        worst_log = max(worst_log, abs(got - exact))
        worst_rel = max(worst_rel, abs(got - exact) / exact)
    for u in [0, 1, 2**29, 2**29 + 1, 2**30 - 1, 2**30, 2**31, 3 * 2**30, M32] + [rng.getrandbits(32) for _ in range(200000)]:
        c, s = sincos_q31(u)
        th = 2 * math.pi * u / 2**32
        worst_trig = max(worst_trig, abs(c / 2**31 - math.cos(th)), abs(s / 2**31 - math.sin(th)))
    print("-2 ln U: worst absolute error %.3g, worst relative %.3g" % (worst_log, worst_rel))
    print("cos/sin: worst absolute error %.3g" % worst_trig)
    return 0


if __name__ == "__main__":
    commands = {"constants": constants, "golden": golden, "accuracy": accuracy}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    sys.exit(commands[sys.argv[1]]())
