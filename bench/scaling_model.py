#!/usr/bin/python3
"""The scaling model of docs/scaling.md: the speedup of data-parallel training on p devices from
the per-device step time and an alpha-beta model of the ring all-reduce of the gradient, with and
without overlapping the all-reduce with the backward pass. Prints the table the doc shows.

    t_allreduce(p, n) = 2 (p - 1) alpha + 2 (p - 1) / p * n / B        (ring: reduce-scatter + all-gather)
    no overlap:  t_step(p) = t_compute + t_allreduce + t_call
    overlap:     t_step(p) = t_compute + max(0, t_allreduce - f_backward * t_compute) + t_call
    speedup(p) = p * t_step(1) / t_step(p)        (weak scaling: the same images per device)

t_call is synk's own per-step cost outside the kernels (3 calls: gradient, all-reduce, update).
"""

PARAMS = 25_557_032          # ResNet-50 (torchvision), float32 gradient
F_BACKWARD = 2.0 / 3.0       # the backward pass is about two thirds of a step's compute

# device, images per device per step, images/s per device (assumed, see docs/scaling.md),
# ring bus bandwidth B (bytes/s), alpha (s per ring step), t_call (s)
CASES = [
    ("V100 (DGX-1), fp32", 64, 360.0, 130e9, 10e-6, 150e-6),
    ("V100 (DGX-1), fp32, 2 NVLink rings only", 64, 360.0, 50e9, 10e-6, 150e-6),
    ("V100 (DGX-1), mixed precision", 64, 1100.0, 130e9, 10e-6, 150e-6),
    ("H100 (DGX H100), mixed precision", 64, 2800.0, 360e9, 8e-6, 150e-6),
    ("H100 (DGX H100), mixed precision, 256/device", 256, 3000.0, 360e9, 8e-6, 150e-6),
]


def allreduce_s(p, nbytes, bw, alpha):
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bw if p > 1 else 0.0


def main():
    nbytes = 4 * PARAMS
    print(f"ResNet-50: {PARAMS:,} parameters, {nbytes / 1e6:.1f} MB of float32 gradient per step\n")
    print(f"| case | step compute | all-reduce (8) | speedup 8, no overlap | speedup 8, overlap |")
    print(f"| --- | --- | --- | --- | --- |")
    for name, batch, ips, bw, alpha, t_call in CASES:
        t_c = batch / ips
        t_ar = allreduce_s(8, nbytes, bw, alpha)
        one = t_c + t_call
        plain = t_c + t_ar + t_call
        overlap = t_c + max(0.0, t_ar - F_BACKWARD * t_c) + t_call
        print(f"| {name} | {t_c * 1e3:.1f} ms | {t_ar * 1e3:.2f} ms | {8 * one / plain:.2f}x | {8 * one / overlap:.2f}x |")


if __name__ == "__main__":
    main()
