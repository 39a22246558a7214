"""What the xhal PyTorch device costs, against torch's own CPU device in the same process:
a tiny operation, a training step of the tests' MLP on each backend, and the share of
operations that fell back to the CPU. `make bench-torch` runs it; `--json` for machines.

Each backend runs in a child process (XHAL_DEVICE chooses xhal:0 per process), and each
child times torch's CPU device too, so every ratio compares figures from one process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def best_per_call(fn, calls, repeats, sync):
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def child(steps: int) -> dict:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import xhal.torch

    sys.path.insert(0, str(ROOT / "python" / "tests_torch"))
    from models import MLP, mlp_batches

    dev = torch.device("xhal:0")
    label = xhal.torch.devices()[0]["label"]
    out = {"device": label}

    def sync_xhal():
        torch.xhal.synchronize()

    # A tiny operation: 16-element add into an existing output.
    for where, sync in (("cpu", lambda: None), ("xhal", sync_xhal)):
        a = torch.randn(16, device=dev if where == "xhal" else "cpu")
        b = torch.randn(16, device=a.device)
        c = torch.empty(16, device=a.device)
        for _ in range(200):
            torch.add(a, b, out=c)
        out[f"tiny_add_{where}_us"] = best_per_call(lambda: torch.add(a, b, out=c), 2000, 5, sync) * 1e6

    # A training step of the MLP (batch 64, SGD): forward, backward, update, loss.item().
    batches = mlp_batches(steps + 3, batch=64)
    for where in ("cpu", "xhal"):
        device = dev if where == "xhal" else torch.device("cpu")
        torch.manual_seed(0)
        model = MLP().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = [(x.to(device), y.to(device)) for x, y in batches]

        def step(x, y):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        for x, y in data[:3]:
            step(x, y)
        times = []
        for x, y in data[3:]:
            start = time.perf_counter()
            step(x, y)
            times.append(time.perf_counter() - start)
        times.sort()
        out[f"mlp_step_{where}_ms"] = times[len(times) // 2] * 1e3

    # The share of operations that fell back during one training step.
    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            return func(*args, **(kwargs or {}))

    model = MLP().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = batches[0][0].to(dev), batches[0][1].to(dev)
    xhal.torch.reset_fallback_counts()
    with Count() as counter:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    out["ops_per_step"] = counter.ops
    out["fallbacks_per_step"] = sum(xhal.torch.fallback_counts().values())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cpu,vulkan,opencl,wgpu", help="comma-separated xhal backends")
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per device")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.steps)))
        return 0

    results = []
    for backend in args.backends.split(","):
        print(f"torch bench: {backend} ...", file=sys.stderr, flush=True)
        env = dict(os.environ, XHAL_DEVICE=f"{backend}:*")
        run = subprocess.run(
            [sys.executable, __file__, "--child", "--steps", str(args.steps)], env=env, capture_output=True, text=True
        )
        if run.returncode != 0:
            print(f"torch bench: {backend} failed:\n{run.stderr}", file=sys.stderr)
            return 1
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| device | tiny add, xhal | tiny add, torch CPU | ratio | MLP step, xhal | MLP step, torch CPU | ratio | ops fell back |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['device']} | {r['tiny_add_xhal_us']:.1f} µs | {r['tiny_add_cpu_us']:.1f} µs | "
            f"{r['tiny_add_xhal_us'] / r['tiny_add_cpu_us']:.1f}x | {r['mlp_step_xhal_ms']:.2f} ms | "
            f"{r['mlp_step_cpu_ms']:.2f} ms | {r['mlp_step_xhal_ms'] / r['mlp_step_cpu_ms']:.1f}x | "
            f"{r['fallbacks_per_step']} of {r['ops_per_step']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
