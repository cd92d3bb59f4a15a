#!/usr/bin/env python3
"""The fused patterns of bench/cuda_fused.cpp in PyTorch, eager and torch.compile, on the same GPU
and sizes, and the ratio of synk's time to each (below 1.0: synk is faster). The goal of issue 5
is to beat eager on every fused pattern.

    python3 bench/cuda_torch.py [path/to/cuda_fused_bench] [MiB per array, default 1024] [reps, default 20]

Without the synk binary it prints PyTorch's figures only. Prints "skipped: ..." and exits 0 where
there is no PyTorch or no CUDA GPU.
"""
import re
import subprocess
import sys


def main():
    try:
        import torch
    except ImportError as e:
        print(f"skipped: no PyTorch ({e})")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA GPU (torch.cuda.is_available() is False)")
        return 0
    synk_bin = sys.argv[1] if len(sys.argv) > 1 else None
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    n = mib * 1024 * 1024 // 4
    dev = torch.device("cuda")
    x = torch.full((n,), 0.186, device=dev, dtype=torch.float32)
    y = torch.full((n,), 0.186, device=dev, dtype=torch.float32)

    # Same cases and names as cuda_fused.cpp (spaces become underscores in its RESULT lines).
    cases = [
        ("pointwise z = x * y + 1", lambda x, y: x * y + 1.0, (x, y), 12),
        ("pointwise sigmoid(x) * tanh(y) + exp(-x*x)",
         lambda x, y: torch.sigmoid(x) * torch.tanh(y) + torch.exp(-x * x), (x, y), 12),
        ("pointwise+reduce sum(x * y)", lambda x, y: (x * y).sum(), (x, y), 8),
        ("pointwise+reduce max(abs(x - y))", lambda x, y: (x - y).abs().max(), (x, y), 8),
        ("row reduce sum(x * y, axis=1) [n,1024]", lambda x, y: (x * y).sum(dim=1),
         (x.view(-1, 1024), y.view(-1, 1024)), 8),
        ("column reduce sum(x * x, axis=0) [n,256]", lambda x: (x * x).sum(dim=0), (x.view(-1, 256),), 4),
        ("softmax rows [n,1024]", lambda x: torch.softmax(x, dim=-1), (x.view(-1, 1024),), 8),
    ]

    def median_ms(fn, args):
        fn(*args)
        fn(*args)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]

    synk = {}
    if synk_bin:
        out = subprocess.run([synk_bin, str(mib), str(reps)], capture_output=True, text=True, check=True).stdout
        print(out)
        for m in re.finditer(r"^RESULT (\S+) (\S+) (\S+)$", out, re.M):
            synk[m.group(1)] = float(m.group(2))

    copy_ms = median_ms(lambda a, b: b.copy_(a), (x, y))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, {mib} MiB per array, median of {reps}")
    print(f"torch copy: {copy_ms:.3f} ms, {2 * n * 4 / (copy_ms * 1e6):.1f} GB/s")
    print(f"{'case':<44} {'eager ms':>9} {'compile ms':>10} {'synk ms':>9} {'synk/eager':>10} {'synk/compile':>12}")
    for name, fn, args, bytes_per in cases:
        eager = median_ms(fn, args)
        try:
            compiled = median_ms(torch.compile(fn), args)
        except Exception as e:  # torch.compile needs a working Triton; say so instead of failing
            print(f"  (torch.compile failed for {name}: {e})")
            compiled = float("nan")
        s = synk.get(name.replace(" ", "_"))
        ratio_e = f"{s / eager:.3f}" if s else "-"
        ratio_c = f"{s / compiled:.3f}" if s else "-"
        print(f"{name:<44} {eager:>9.3f} {compiled:>10.3f} {(f'{s:.3f}' if s else '-'):>9} {ratio_e:>10} {ratio_c:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
