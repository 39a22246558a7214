"""The PyTorch device's operators against torch's own CPU device on the same cores, in one run.

Matrix products `a @ b` of square float32 matrices: milliseconds per product on xhal:0 and on
torch's CPU (with as many threads as cores), the throughput of each in GFLOP/s, and xhal's
throughput as a share of torch CPU's. Every product is checked against torch's.

    XHAL_TORCH_BUILD_DIR=target/torch-extension XHAL_DEVICE=cpu .venv/bin/python \\
        python/benches/torch_ops.py [--sizes 256,512,1024,2048] [--json]
"""

import argparse
import json
import os
import sys
import time

import torch

import xhal.torch


def timed(run, synchronize, budget_s=1.0, most=20):
    """Seconds per call: one call to warm up, then as many as fit `budget_s` (1 to `most`)."""
    run()
    synchronize()
    start = time.perf_counter()
    run()
    synchronize()
    once = time.perf_counter() - start
    repeats = max(1, min(most, int(budget_s / max(once, 1e-6))))
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    synchronize()
    return (time.perf_counter() - start) / repeats


def matrix_products(sizes):
    rows = []
    for n in sizes:
        print(f"torch_ops: a @ b, {n}x{n} float32", file=sys.stderr)
        generator = torch.Generator().manual_seed(n)
        a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
        xa, xb = a.to("xhal:0"), b.to("xhal:0")
        xhal_s = timed(lambda: xa @ xb, torch.xhal.synchronize)
        cpu_s = timed(lambda: a @ b, lambda: None)
        expected = a @ b
        error = ((xa @ xb).cpu() - expected).abs().max().item() / expected.abs().max().item()
        flop = 2 * n**3
        rows.append({
            "n": n,
            "xhal_ms": xhal_s * 1e3,
            "torch_cpu_ms": cpu_s * 1e3,
            "xhal_gflops": flop / xhal_s / 1e9,
            "torch_cpu_gflops": flop / cpu_s / 1e9,
            "throughput_vs_torch_cpu": cpu_s / xhal_s,
            "max_error_relative_to_max": error,
        })
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024,2048", help="square sizes, comma-separated")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    figures = {
        "device": xhal.torch.devices()[0]["label"],
        "device_name": xhal.torch.devices()[0]["name"],
        "torch_threads": torch.get_num_threads(),
        "matrix_products": matrix_products([int(size) for size in arguments.sizes.split(",")]),
    }
    if arguments.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"device {figures['device']} ({figures['device_name']}), torch CPU on {figures['torch_threads']} threads")
    for row in figures["matrix_products"]:
        print(f"a @ b {row['n']}x{row['n']}: xhal {row['xhal_ms']:.2f} ms ({row['xhal_gflops']:.1f} GFLOP/s), "
              f"torch CPU {row['torch_cpu_ms']:.2f} ms ({row['torch_cpu_gflops']:.1f} GFLOP/s): "
              f"{row['throughput_vs_torch_cpu']:.2f}x torch CPU's throughput, error {row['max_error_relative_to_max']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
