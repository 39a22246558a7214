"""A tour of the PyTorch device's services, written from docs/pytorch.md: seeded random numbers
compared across two xhal devices, mixed-precision training with a GradScaler, a checkpoint
saved and resumed, a training step captured and replayed as a graph, a profile with device
time per operator, and fully_shard over two processes.

    XHAL_TORCH_BUILD_DIR=target/torch-extension .venv/bin/python examples/python/torch_services.py

Prints one line per service and exits 0 when each did what the docs say, 1 otherwise.
"""

import io
import os
import socket
import sys

import torch
import torch.multiprocessing as mp

import xhal.torch


def model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)


def random_numbers():
    devices = xhal.torch.devices()
    torch.manual_seed(1234)
    first = torch.rand(1000, device="xhal:0").cpu()
    if len(devices) < 2:
        return f"one xhal device ({devices[0]['label']}): compared with itself only", True
    torch.manual_seed(1234)
    second = torch.rand(1000, device="xhal:1").cpu()
    same = torch.equal(first, second)
    return f"torch.rand(1000) after manual_seed(1234) on {devices[0]['label']} and {devices[1]['label']}: " + (
        "identical bits" if same else "DIFFERENT"), same


def mixed_precision(device):
    net = model(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("xhal")
    x, y = torch.randn(64, 16, device=device), torch.randn(64, 4, device=device)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        with torch.autocast("xhal", dtype=torch.bfloat16):
            out = net(x)
            loss = torch.nn.functional.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    ok = out.dtype == torch.bfloat16 and losses[-1] < losses[0]
    return f"autocast bfloat16 + GradScaler: loss {losses[0]:.4f} -> {losses[-1]:.4f}, outputs {out.dtype}", ok


def checkpoint(device):
    net = model(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    x, y = torch.randn(8, 16, device=device), torch.randn(8, 4, device=device)

    def step(n, o):
        o.zero_grad()
        torch.nn.functional.mse_loss(n(x), y).backward()
        o.step()

    step(net, optimizer)
    buffer = io.BytesIO()
    torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, map_location=device)
    resumed = model(device)
    resumed.load_state_dict(saved["model"])
    resumed_optimizer = torch.optim.Adam(resumed.parameters(), lr=0.01)
    resumed_optimizer.load_state_dict(saved["optimizer"])
    step(net, optimizer)
    step(resumed, resumed_optimizer)
    same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(net.parameters(), resumed.parameters()))
    return "torch.save / torch.load of a model and Adam, resumed step " + ("equal" if same else "DIFFERENT"), same


def graph(device):
    net = model(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    x, y = torch.randn(32, 16, device=device), torch.randn(32, 4, device=device)

    def step():
        optimizer.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(net(x), y).backward()
        optimizer.step()

    reference = model(device)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    step()  # warm up: the optimizer makes its state
    reference_optimizer.zero_grad()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    reference_optimizer.step()
    stream = torch.Stream(device=device)
    stream.wait_stream(torch.accelerator.current_stream())
    captured = torch.accelerator.Graph()
    with stream, captured:
        step()
    for _ in range(3):
        captured.replay()
        reference_optimizer.zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(reference(x), y).backward()
        reference_optimizer.step()
    torch.accelerator.synchronize()
    same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(net.parameters(), reference.parameters()))
    return "torch.accelerator.Graph: 3 replays of a captured SGD step " + (
        "equal eager steps bit for bit" if same else "DIFFER from eager steps"), same


def profiler(device):
    from torch.profiler import ProfilerActivity, profile

    net = model(device)
    x = torch.randn(64, 16, device=device)
    net(x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        net(x).sum().backward()
        torch.accelerator.synchronize()
    timed = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    names = ", ".join(sorted({e.key for e in timed})[:4])
    return f"torch.profiler: {len(timed)} operators with device time ({names}...)", bool(timed)


def fully_shard_worker(rank, port, results):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    import xhal.torch.distributed  # noqa: F401 - the "xhal-gloo" backend

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(rank=rank, world_size=2)
    net = model("xhal:0")
    fully_shard(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    torch.manual_seed(rank)
    x, y = torch.randn(16, 16, device="xhal:0"), torch.randn(16, 4, device="xhal:0")
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    results[rank] = losses
    dist.destroy_process_group()


def sharded():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.get_context("spawn").Manager().dict()
    mp.start_processes(fully_shard_worker, args=(port, results), nprocs=2, start_method="spawn")
    ok = all(results[r][-1] < results[r][0] for r in range(2))
    return "fully_shard over 2 processes: losses " + "; ".join(
        f"rank {r} {results[r][0]:.3f} -> {results[r][-1]:.3f}" for r in range(2)), ok


def main():
    device = torch.device("xhal:0")
    print(f"xhal:0 is {xhal.torch.devices()[0]['label']} ({torch.xhal.get_device_name()})")
    failed = 0
    for name, run in [("random numbers", random_numbers), ("mixed precision", lambda: mixed_precision(device)),
                      ("checkpoints", lambda: checkpoint(device)), ("graphs", lambda: graph(device)),
                      ("profiler", lambda: profiler(device)), ("sharded training", sharded)]:
        line, ok = run()
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
