"""The PyTorch device's operators against torch's own CPU device on the same cores, in one run.

First the device's own limits, measured by a small probe through xhal alone
(python/benches/probe/limits.wgsl): float32 fused multiply-adds per second with no memory
traffic, and the bandwidth of a 64 MiB copy. Matrix products are also given as a share of the
first, memory-bound operators as a share of the second.

Matrix products `a @ b` of square float32 matrices: milliseconds per product on xhal:0 and on
torch's CPU (with as many threads as cores), the throughput of each in GFLOP/s, and xhal's
throughput as a share of torch CPU's. Then the other operators of a model (a sum and
elementwise arithmetic over 4M floats, softmax, log-softmax and layer norm rows with backward passes, a ResNet-shaped
convolution, a copy as the memory probe), 3x3 convolution layers from a ResNet's first stage to
its last and a small CNN's, forward and with both gradients, and training steps of four small models (an MLP, a
transformer block, a decoder language model and a CNN, AdamW), each as a ratio of torch CPU's
time to xhal's (above 1: xhal is faster). Every result is checked against torch's.

On an OpenCL device, `--raw-opencl BINARY` also times the hand-written OpenCL C product of
python/benches/raw/matmul.cl through the OpenCL API alone (python/benches/raw/opencl_matmul.c,
built by `make bench-torch-ops`) at the same sizes, the best that driver does without xhal,
and gives xhal's throughput as a share of it. On a Vulkan device, `--raw-vulkan BINARY
--raw-vulkan-spirv FILE` does the same with the same design in GLSL (python/benches/raw/matmul.comp,
compiled by glslang) run through the Vulkan API alone (backends/vulkan/examples/raw_matmul.rs).

    XHAL_TORCH_BUILD_DIR=target/torch-extension XHAL_DEVICE=cpu .venv/bin/python \\
        python/benches/torch_ops.py [--sizes 256,512,1024,2048] [--skip-models] [--json] \\
        [--raw-opencl target/raw_opencl_matmul] \\
        [--raw-vulkan target/release/examples/raw_matmul --raw-vulkan-spirv target/raw_matmul.spv]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
from torch import nn

import xhal
import xhal.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests_torch"))
import models  # noqa: E402  (the tests' models: MLP, TransformerBlock)


def timed(run, synchronize, budget_s=1.0, most=20, rounds=3):
    """Seconds per call: one call to warm up, then `rounds` rounds of as many calls as fit a
    share of `budget_s` (1 to `most`), and the best round's mean. The best round, as timeit
    reports, because this machine's other work only ever adds time, to either side."""
    run()
    synchronize()
    start = time.perf_counter()
    run()
    synchronize()
    once = time.perf_counter() - start
    repeats = max(1, min(most, int(budget_s / rounds / max(once, 1e-6))))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        synchronize()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def device_limits(label):
    """What the device reaches, measured by a small probe (python/benches/probe/limits.wgsl)
    through xhal alone: float32 fused multiply-adds per second with no memory traffic, and the
    bytes a second a copy of 64 MiB reads and writes. The operators' figures are shares of these."""
    import numpy as np

    print(f"torch_ops: the device's limits (probe/limits.wgsl on {label})", file=sys.stderr)
    device = xhal.device(label)
    source = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe", "limits.wgsl")).read()
    steps = 4096
    module = device.load_wgsl(source, overrides={"CHAINS_STEPS": steps})
    invocations = 64 * 256
    sums = device.zeros((invocations,), np.float32)
    peak_s = timed(lambda: module["fma_peak"](sums=sums, invocations=invocations), device.synchronize, most=10)
    vectors = 16 * 1024 * 1024 // 4  # vec4s: 64 MiB
    source_array = device.full((vectors, 4), 1.0, np.float32)
    copied = device.zeros((vectors, 4), np.float32)
    groups = (vectors + 64 * 16 - 1) // (64 * 16)  # COPY_RUNS runs of 64 a workgroup
    workgroups = (min(groups, 65535), (groups + 65534) // 65535, 1)
    copy_s = timed(lambda: module["copy"](source_array, copied, count=vectors, workgroups=workgroups),
                   device.synchronize, most=10)
    if not (copied.numpy() == 1.0).all() or not np.isfinite(sums.numpy()).all():
        raise SystemExit("torch_ops: the probe's kernels computed wrong results")
    return {
        "fma_gflops": invocations * steps * 8 * 4 * 2 / peak_s / 1e9,
        "copy_gbytes_per_s": 2 * vectors * 16 / copy_s / 1e9,
    }


def matrix_products(sizes, limits):
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
            "share_of_fma_peak": flop / xhal_s / 1e9 / limits["fma_gflops"],
            "max_error_relative_to_max": error,
        })
    return rows


def raw_products(api, command, rows):
    """Adds to each matrix product row the raw `api` product's time at the same size, from
    `command` (a program and its first arguments) that prints a JSON line per size."""
    print(f"torch_ops: the raw {api} product ({os.path.basename(command[-1])})", file=sys.stderr)
    done = subprocess.run(command + [str(row["n"]) for row in rows], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"torch_ops: {command[0]} failed ({done.returncode}): {done.stderr.strip()}")
    raw = {figure["n"]: figure for figure in map(json.loads, done.stdout.splitlines())}
    key = api.lower()
    for row in rows:
        row["raw_api"] = api
        row[f"raw_{key}_ms"] = raw[row["n"]]["ms"]
        row[f"raw_{key}_gflops"] = raw[row["n"]]["gflops"]
        row[f"throughput_vs_raw_{key}"] = raw[row["n"]]["ms"] / row["xhal_ms"]


RAW_KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")


# Bytes each memory-bound operator reads and writes, for its share of the probe's bandwidth.
MEMORY_BYTES = {
    "x.sum(), 4M float32": 4 * 4 * 1024 * 1024,
    "x * 2 + 1, 4M": 2 * 4 * 4 * 1024 * 1024,
    "x + y, 4M": 3 * 4 * 4 * 1024 * 1024,
    "x.mul_(1.0), 4M in place": 2 * 4 * 4 * 1024 * 1024,
    "x.clone(), 4M (memory probe)": 2 * 4 * 4 * 1024 * 1024,
}


def operators(limits):
    """The other operators of a model, each timed on xhal:0 and torch CPU and checked."""
    generator = torch.Generator().manual_seed(1)
    big = torch.randn(4 * 1024 * 1024, generator=generator)
    other = torch.randn(4 * 1024 * 1024, generator=generator)
    rows = torch.randn(256, 1024, generator=generator)
    row_gradient = torch.randn(256, 1024, generator=generator)
    vocabulary = torch.randn(32, 50257, generator=generator)
    norm_weight, norm_bias = torch.randn(1024, generator=generator), torch.randn(1024, generator=generator)
    _, norm_mean, norm_rstd = torch.ops.aten.native_layer_norm(rows, [1024], norm_weight, norm_bias, 1e-5)
    image = torch.randn(8, 64, 56, 56, generator=generator)
    norm = nn.LayerNorm(1024)
    conv = nn.Conv2d(64, 64, 3, padding=1)
    xhal_norm = nn.LayerNorm(1024).to("xhal:0")
    xhal_norm.load_state_dict(norm.state_dict())
    xhal_conv = nn.Conv2d(64, 64, 3, padding=1).to("xhal:0")
    xhal_conv.load_state_dict(conv.state_dict())
    cases = [
        ("x.sum(), 4M float32", lambda t: t[0].sum(), (big,), 1e-3),
        ("x * 2 + 1, 4M", lambda t: t[0] * 2 + 1, (big,), 1e-6),
        ("x + y, 4M", lambda t: t[0] + t[1], (big, other), 1e-6),
        ("x.mul_(1.0), 4M in place", lambda t: t[0].mul_(1.0), (big,), 1e-6),
        ("x.clone(), 4M (memory probe)", lambda t: t[0].clone(), (big,), 0),
        ("softmax, 256x1024", lambda t: t[0].softmax(-1), (rows,), 1e-6),
        ("softmax backward, 256x1024",
         lambda t: torch.ops.aten._softmax_backward_data(t[0], t[1], -1, torch.float32),
         (row_gradient, rows.softmax(-1)), 1e-6),
        ("log_softmax, 32x50257 (a vocabulary)", lambda t: t[0].log_softmax(-1), (vocabulary,), 1e-6),
        ("layer norm, 256x1024", None, (rows,), 1e-4),
        ("layer norm backward, 256x1024",
         lambda t: torch.ops.aten.native_layer_norm_backward(t[0], t[1], [1024], t[2], t[3], t[4], t[5],
                                                             [True, True, True])[0],
         (row_gradient, rows, norm_mean, norm_rstd, norm_weight, norm_bias), 1e-4),
        ("conv2d 64->64 3x3, 8x64x56x56", None, (image,), 1e-3),
    ]
    results = []
    for name, run, inputs, tolerance in cases:
        print(f"torch_ops: {name}", file=sys.stderr)
        on_device = tuple(t.to("xhal:0") for t in inputs)
        if name == "layer norm, 256x1024":
            cpu_run, xhal_run = (lambda t: norm(t[0])), (lambda t: xhal_norm(t[0]))
        elif name.startswith("conv2d"):
            cpu_run, xhal_run = (lambda t: conv(t[0])), (lambda t: xhal_conv(t[0]))
        else:
            cpu_run = xhal_run = run
        with torch.no_grad():
            expected = cpu_run(inputs)
            got = xhal_run(on_device).cpu()
            error = (got - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)
            xhal_s = timed(lambda: xhal_run(on_device), torch.xhal.synchronize)
            cpu_s = timed(lambda: cpu_run(inputs), lambda: None)
        results.append({"operation": name, "xhal_ms": xhal_s * 1e3, "torch_cpu_ms": cpu_s * 1e3,
                        "speed_vs_torch_cpu": cpu_s / xhal_s, "max_error_relative_to_max": error,
                        "checked": error <= tolerance})
        if name in MEMORY_BYTES:
            results[-1]["xhal_gbytes_per_s"] = MEMORY_BYTES[name] / xhal_s / 1e9
            results[-1]["share_of_copy_bandwidth"] = MEMORY_BYTES[name] / xhal_s / 1e9 / limits["copy_gbytes_per_s"]
    return results


# ResNet-shaped 3x3 layers from the first stage to the last (fewer positions, more channels),
# and a small CNN's two layers: N, C, H (= W), O.
CONVOLUTION_LAYERS = [(8, 64, 56, 64), (8, 128, 28, 128), (8, 256, 14, 256), (8, 256, 7, 256), (8, 512, 4, 512),
                      (16, 3, 32, 16), (16, 16, 16, 32)]


def convolution_layers():
    """Each 3x3 convolution layer's forward, and forward plus both gradients, on xhal:0 and torch
    CPU; the output and the gradients checked against the CPU's."""
    results = []
    for batch, channels, size, out_channels in CONVOLUTION_LAYERS:
        name = f"conv2d {batch}x{channels}x{size}x{size} -> {out_channels}, 3x3"
        print(f"torch_ops: {name}", file=sys.stderr)
        torch.manual_seed(4)
        cpu_layer = nn.Conv2d(channels, out_channels, 3, padding=1)
        xhal_layer = nn.Conv2d(channels, out_channels, 3, padding=1).to("xhal:0")
        xhal_layer.load_state_dict(cpu_layer.state_dict())
        x = torch.randn(batch, channels, size, size)
        x_on_device = x.to("xhal:0")
        figures = {}
        answers = {}
        for where, layer, data, synchronize in (("xhal", xhal_layer, x_on_device, torch.xhal.synchronize),
                                                ("cpu", cpu_layer, x, lambda: None)):
            def forward():
                with torch.no_grad():
                    return layer(data)

            def forward_backward():
                leaf = data.detach().requires_grad_()
                layer.zero_grad(set_to_none=False)
                layer(leaf).square().sum().backward()
                return leaf.grad

            input_grad = forward_backward()
            answers[where] = [forward(), input_grad, layer.weight.grad, layer.bias.grad]
            figures[where] = (timed(forward, synchronize), timed(forward_backward, synchronize))
        error = max((got.cpu() - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)
                    for got, expected in zip(answers["xhal"], answers["cpu"]))
        results.append({"layer": name, "forward_xhal_ms": figures["xhal"][0] * 1e3,
                        "forward_torch_cpu_ms": figures["cpu"][0] * 1e3,
                        "training_xhal_ms": figures["xhal"][1] * 1e3, "training_torch_cpu_ms": figures["cpu"][1] * 1e3,
                        "forward_speed_vs_torch_cpu": figures["cpu"][0] / figures["xhal"][0],
                        "training_speed_vs_torch_cpu": figures["cpu"][1] / figures["xhal"][1],
                        "max_error_relative_to_max": error, "checked": error <= 1e-3})
    return results


class DecoderLM(nn.Module):
    """A decoder-only language model from torch.nn's transformer layers with a causal mask."""

    def __init__(self, vocabulary=128, width=64, heads=4, layers=2, length=32):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocabulary)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.layers(x, mask=self.mask, is_causal=True))


class SmallCNN(nn.Module):
    """A CNN for 32x32 images: two convolution stages, pooling, a linear head."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(32 * 16, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def training_steps(steps=4, rounds=12):
    """Seconds per AdamW step of each model on xhal:0 and on torch CPU, with the losses: the best
    of `rounds` rounds of `steps` steps, each round timing xhal:0 then torch CPU, so that both
    sides see the same moments of a shared machine (its step times move by a fifth between
    seconds)."""
    generator = torch.Generator().manual_seed(2)
    cases = [
        ("MLP (models.py)", lambda: models.MLP(), (torch.randn(16, 32, generator=generator),
                                                   torch.randint(0, 10, (16,), generator=generator))),
        ("transformer block (models.py)", lambda: models.TransformerBlock(),
         models.token_batches(1, batch=4, length=8, vocabulary=50)[0]),
        ("decoder LM, 2 layers of width 64", lambda: DecoderLM(),
         models.token_batches(1, batch=8, length=32, vocabulary=128)[0]),
        ("CNN, 16x3x32x32", lambda: SmallCNN(), (torch.randn(16, 3, 32, 32, generator=generator),
                                                 torch.randint(0, 10, (16,), generator=generator))),
    ]
    results = []
    for name, make, (inputs, targets) in cases:
        print(f"torch_ops: training step, {name}", file=sys.stderr)
        torch.manual_seed(3)
        reference = make()
        timings = {}
        losses = {}
        steppers = {}
        for where in ("xhal:0", "cpu"):
            model = make().to(where)
            model.load_state_dict(reference.state_dict())
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            x, y = inputs.to(where), targets.to(where)

            def step(model=model, optimizer=optimizer, x=x, y=y):
                optimizer.zero_grad()
                logits = model(x)
                loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                loss.backward()
                optimizer.step()
                return loss.item()

            losses[where] = [step() for _ in range(2)]
            steppers[where] = step
            timings[where] = float("inf")
        for _ in range(rounds):
            for where, step in steppers.items():
                start = time.perf_counter()
                for _ in range(steps):
                    step()
                timings[where] = min(timings[where], (time.perf_counter() - start) / steps)
        parameters = sum(p.numel() for p in reference.parameters())
        results.append({"model": name, "parameters": parameters, "xhal_ms": timings["xhal:0"] * 1e3,
                        "torch_cpu_ms": timings["cpu"] * 1e3, "xhal_vs_torch_cpu_time": timings["xhal:0"] / timings["cpu"],
                        "first_losses_xhal": losses["xhal:0"], "first_losses_torch_cpu": losses["cpu"],
                        "checked": all(abs(a - b) <= 1e-3 * max(1.0, abs(b))
                                       for a, b in zip(losses["xhal:0"], losses["cpu"]))})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024,2048", help="square sizes, comma-separated")
    parser.add_argument("--skip-models", action="store_true", help="leave out the training steps")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--raw-opencl", metavar="BINARY",
                        help="on an OpenCL device, also time python/benches/raw/matmul.cl with this program")
    parser.add_argument("--raw-vulkan", metavar="BINARY",
                        help="on a Vulkan device, also time a SPIR-V product (--raw-vulkan-spirv) with this program")
    parser.add_argument("--raw-vulkan-spirv", metavar="FILE",
                        help="python/benches/raw/matmul.comp compiled to SPIR-V, for --raw-vulkan")
    arguments = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    figures = {
        "device": xhal.torch.devices()[0]["label"],
        "device_name": xhal.torch.devices()[0]["name"],
        "torch_threads": torch.get_num_threads(),
    }
    limits = figures["limits"] = device_limits(figures["device"])
    figures |= {
        "matrix_products": matrix_products([int(size) for size in arguments.sizes.split(",")], limits),
        "operators": operators(limits),
        "convolution_layers": convolution_layers(),
        "training_steps": [] if arguments.skip_models else training_steps(),
    }
    if arguments.raw_vulkan and not arguments.raw_vulkan_spirv:
        parser.error("--raw-vulkan needs --raw-vulkan-spirv, the compiled python/benches/raw/matmul.comp")
    if arguments.raw_opencl and figures["device"].startswith("opencl"):
        raw_products("OpenCL", [arguments.raw_opencl, os.path.join(RAW_KERNELS, "matmul.cl")], figures["matrix_products"])
    if arguments.raw_vulkan and figures["device"].startswith("vulkan"):
        raw_products("Vulkan", [arguments.raw_vulkan, arguments.raw_vulkan_spirv], figures["matrix_products"])
    checked = figures["operators"] + figures["convolution_layers"] + figures["training_steps"]
    failed = [row.get("operation", row.get("layer", row.get("model"))) for row in checked if not row["checked"]]
    if arguments.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"device {figures['device']} ({figures['device_name']}), torch CPU on {figures['torch_threads']} threads")
        print(f"the device's limits (probe/limits.wgsl): {limits['fma_gflops']:.1f} GFLOP/s of float32 fma, "
              f"{limits['copy_gbytes_per_s']:.1f} GB/s copied (read and write)")
        for row in figures["matrix_products"]:
            print(f"a @ b {row['n']}x{row['n']}: xhal {row['xhal_ms']:.2f} ms ({row['xhal_gflops']:.1f} GFLOP/s), "
                  f"torch CPU {row['torch_cpu_ms']:.2f} ms ({row['torch_cpu_gflops']:.1f} GFLOP/s): "
                  f"{row['throughput_vs_torch_cpu']:.2f}x torch CPU's throughput, {row['share_of_fma_peak']:.2f} of the fma "
                  f"peak, error {row['max_error_relative_to_max']:.1e}")
            if "raw_api" in row:
                key = row["raw_api"].lower()
                source = "OpenCL C (matmul.cl)" if key == "opencl" else "GLSL through Vulkan (matmul.comp)"
                print(f"  raw {source} {row[f'raw_{key}_ms']:.2f} ms ({row[f'raw_{key}_gflops']:.1f} GFLOP/s): "
                      f"xhal at {row[f'throughput_vs_raw_{key}']:.2f}x its throughput")
        for row in figures["operators"]:
            memory = (f", {row['xhal_gbytes_per_s']:.1f} GB/s ({row['share_of_copy_bandwidth']:.2f} of the copy probe's)"
                      if "xhal_gbytes_per_s" in row else "")
            print(f"{row['operation']}: xhal {row['xhal_ms']:.3f} ms, torch CPU {row['torch_cpu_ms']:.3f} ms: "
                  f"{row['speed_vs_torch_cpu']:.2f}x torch CPU's speed{memory}, error {row['max_error_relative_to_max']:.1e}")
        for row in figures["convolution_layers"]:
            print(f"{row['layer']}: forward xhal {row['forward_xhal_ms']:.2f} ms, torch CPU "
                  f"{row['forward_torch_cpu_ms']:.2f} ms ({row['forward_speed_vs_torch_cpu']:.2f}x); forward and both "
                  f"gradients xhal {row['training_xhal_ms']:.2f} ms, torch CPU {row['training_torch_cpu_ms']:.2f} ms "
                  f"({row['training_speed_vs_torch_cpu']:.2f}x), error {row['max_error_relative_to_max']:.1e}")
        for row in figures["training_steps"]:
            print(f"training step, {row['model']} ({row['parameters']} parameters): xhal {row['xhal_ms']:.1f} ms, "
                  f"torch CPU {row['torch_cpu_ms']:.1f} ms: {row['xhal_vs_torch_cpu_time']:.1f}x torch CPU's time")
    if failed:
        print(f"torch_ops: results differ from torch CPU's: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
