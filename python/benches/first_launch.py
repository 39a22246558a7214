"""What the PyTorch device's first call of an operator costs: the kernel's load and compile.

Each of 34 unary operators is called once on a 100-element float32 tensor of `xhal:0` (the
device XHAL_DEVICE picks) in a fresh process, so each call loads and compiles its elementwise
kernel (one `switch OP` over every operator, specialised by overrides); then the same calls
again, which find their kernels compiled. torch's CPU device runs the same calls in the same
process as the peer. Prints milliseconds per call; `--json` prints them as JSON.

    XHAL_TORCH_BUILD_DIR=target/torch-extension XHAL_DEVICE=cpu XHAL_CPU_MODE=interpret \
        .venv/bin/python python/benches/first_launch.py
"""

import json
import sys
import time

import torch

import xhal.torch  # noqa: F401 - registers the xhal device

OPERATORS = [
    "sin", "cos", "tan", "exp", "log", "tanh", "sigmoid", "asin", "acos", "atan", "sinh", "cosh",
    "log1p", "expm1", "sqrt", "rsqrt", "erf", "erfc", "floor", "ceil", "round", "trunc", "sign",
    "neg", "reciprocal", "exp2", "log2", "log10", "asinh", "acosh", "atanh", "frac", "lgamma",
    "digamma",
]


def per_call_ms(device: str) -> float:
    x = torch.randn(100).to(device)
    start = time.perf_counter()
    for name in OPERATORS:
        getattr(torch, name)(x).cpu()
    return (time.perf_counter() - start) * 1e3 / len(OPERATORS)


def main() -> None:
    torch.randn(100).to("xhal").abs().cpu()  # the device and its copy kernels, outside the timing
    figures = {
        "first_call_ms": per_call_ms("xhal"),
        "again_ms": per_call_ms("xhal"),
        "torch_cpu_first_call_ms": per_call_ms("cpu"),
        "operators": len(OPERATORS),
    }
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures))
        return
    print(f"first call of each of {len(OPERATORS)} operators: {figures['first_call_ms']:.1f} ms "
          f"(again: {figures['again_ms']:.2f} ms; torch CPU: {figures['torch_cpu_first_call_ms']:.3f} ms)")


if __name__ == "__main__":
    main()
