#!/usr/bin/env python3
"""Measures the GPU's two ceilings with torch: bf16 matmul TFLOP/s and copy bandwidth.

Usage: matmul_tflops.py --figures FILE [--size 8192] [--repeats 20]

The reference the H3 benchmarks are compared with in the same run
(scripts/gpu/check.sh: TFLOP/s against a bf16 matmul measured in the same
run). As the device notes advise (METHOD.md): random inputs
(zeros run faster), a warm-up, CUDA events around each repeat, the median;
the product [n, n] x [n, n] in bfloat16 counts 2 n^3 FLOP. The copy moves a
4 GiB float32 tensor device to device and counts bytes read plus written.

Writes {device, torch, bf16_matmul_tflops, matmul_size, copy_gb_per_s, ...}
to --figures. Exit status: 0 measured; 4 no CUDA device (skipped); 1 an
error; 2 bad command line.
"""

import argparse
import json
import statistics
import sys


def timed_ms(fn, repeats):
    import torch
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--figures", required=True)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=20)
    o = p.parse_args()
    if o.size < 256 or o.repeats < 1:
        p.error("--size must be at least 256 and --repeats at least 1")
    figures = {}
    code = 0
    try:
        import torch
        figures["torch"] = torch.__version__
        if not torch.cuda.is_available():
            figures["reason"] = "torch sees no CUDA device"
            code = 4
        else:
            figures["device"] = torch.cuda.get_device_name()
            n = o.size
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            for _ in range(3):
                torch.mm(a, b)
            ms = timed_ms(lambda: torch.mm(a, b), o.repeats)
            figures.update({"matmul_size": n, "matmul_ms_median": ms,
                            "bf16_matmul_tflops": 2 * n**3 / (ms / 1e3) / 1e12})
            src = torch.randn(1 << 30, device="cuda")  # 4 GiB of float32
            dst = torch.empty_like(src)
            dst.copy_(src)
            ms = timed_ms(lambda: dst.copy_(src), max(3, o.repeats // 4))
            figures["copy_gb_per_s"] = 2 * src.numel() * 4 / (ms / 1e3) / 1e9
    except Exception as e:
        figures["reason"] = f"{type(e).__name__}: {e}"
        code = 1
    with open(o.figures, "w") as f:
        json.dump(figures, f, indent=1)
    print("matmul_tflops: " + json.dumps(figures), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
