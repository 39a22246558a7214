"""What the PyTorch device's services cost, each against its peer in the same run:

- graphs: a training step of a small MLP captured with torch.accelerator.Graph and replayed,
  against the same step run eagerly: host time per step (queuing the work) and wall time per
  step (until the device is done);
- random numbers: torch.rand and torch.randn of 4M float32 on the device, against torch's CPU;
- the profiler: the eager step under torch.profiler with device activities, against without;
- stream priorities: short operations (softmaxes) on a stream of priority 0 and on one of the
  device's most urgent priority while another stream runs matrix products, against the same
  operations on an idle device;
- sharded training: a fully_shard training step of a transformer block over two processes on
  xhal tensors (staged through host memory to Gloo), against the same program on CPU tensors
  with Gloo.

    XHAL_TORCH_BUILD_DIR=target/torch-extension XHAL_DEVICE=cpu .venv/bin/python \\
        python/benches/torch_services.py [--json]
"""

import json
import os
import socket
import sys
import time

import torch
import torch.multiprocessing as mp

import xhal.torch  # noqa: F401 - registers the xhal device

STEPS = 30


def mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10)).to(device)


def make_step(model, x, y):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        optimizer.zero_grad(set_to_none=False)
        # mse_loss: cross_entropy checks its targets on the host, which a capture refuses.
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def timed(run, steps):
    """Host milliseconds per step (until the calls return) and wall milliseconds per step
    (until the device is done)."""
    torch.xhal.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        run()
    queued = time.perf_counter()
    torch.xhal.synchronize()
    done = time.perf_counter()
    return (queued - start) * 1e3 / steps, (done - start) * 1e3 / steps


def graphs():
    dev = torch.device("xhal:0")
    x = torch.randn(32, 64, device=dev)
    y = torch.randn(32, 10, device=dev)
    eager_step = make_step(mlp(dev), x, y)
    graph_step = make_step(mlp(dev), x, y)
    for _ in range(3):
        eager_step()
        graph_step()
    graph = torch.accelerator.Graph()
    with torch.Stream(device=dev), graph:
        graph_step()
    eager_host, eager_wall = timed(eager_step, STEPS)
    replay_host, replay_wall = timed(graph.replay, STEPS)
    return {
        "eager_host_ms": eager_host,
        "eager_wall_ms": eager_wall,
        "replay_host_ms": replay_host,
        "replay_wall_ms": replay_wall,
        "host_ratio": replay_host / eager_host,
        "wall_ratio": replay_wall / eager_wall,
    }


def random_numbers():
    n = 1 << 22
    out = {}
    for name, draw in (("rand", torch.rand), ("randn", torch.randn)):
        draw(n, device="xhal")
        torch.xhal.synchronize()
        start = time.perf_counter()
        for _ in range(5):
            draw(n, device="xhal")
        torch.xhal.synchronize()
        device_ms = (time.perf_counter() - start) * 1e3 / 5
        draw(n)
        start = time.perf_counter()
        for _ in range(5):
            draw(n)
        cpu_ms = (time.perf_counter() - start) * 1e3 / 5
        out[name] = {"xhal_ms": device_ms, "torch_cpu_ms": cpu_ms, "ratio": device_ms / cpu_ms}
    return out


def profiler():
    from torch.profiler import ProfilerActivity, profile

    dev = torch.device("xhal:0")
    step = make_step(mlp(dev), torch.randn(32, 64, device=dev), torch.randn(32, 10, device=dev))
    for _ in range(3):
        step()
    _, plain = timed(step, STEPS)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        _, profiled = timed(step, STEPS)
    return {"plain_ms": plain, "profiled_ms": profiled, "ratio": profiled / plain}


def stream_priorities():
    """30 softmaxes queued on a stream and waited for, per softmax, on an idle device and while
    another stream runs 60 matrix products, at priority 0 and at the most urgent; the median of
    three rounds of each."""
    dev = torch.device("xhal:0")
    products = torch.randn(256, 256, device=dev)
    x = torch.randn(256, 1024, device=dev)
    background = torch.xhal.Stream()

    def per_softmax(priority, busy):
        stream = torch.xhal.Stream(priority=priority)
        stream.wait_stream(torch.xhal.current_stream())
        with torch.xhal.stream(stream):
            torch.softmax(x, 1)
            stream.synchronize()
        if busy:
            background.wait_stream(torch.xhal.current_stream())
            with torch.xhal.stream(background):
                for _ in range(60):
                    products @ products
            time.sleep(0.05)  # the products are running
        with torch.xhal.stream(stream):
            start = time.perf_counter()
            for _ in range(30):
                torch.softmax(x, 1)
            stream.synchronize()
            elapsed = time.perf_counter() - start
        background.synchronize()
        return elapsed * 1e3 / 30

    def median(priority, busy):
        runs = sorted(per_softmax(priority, busy) for _ in range(3))
        return runs[1]

    urgent = torch.xhal.stream_priority_range()[1]
    idle = median(0, False)
    plain = median(0, True)
    hurried = median(urgent, True)
    return {"priority_range": torch.xhal.stream_priority_range(), "idle_ms": idle, "busy_plain_ms": plain,
            "busy_urgent_ms": hurried, "plain_over_idle": plain / idle, "urgent_over_idle": hurried / idle}


def sharded_worker(rank, port, device, results):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import xhal.torch.distributed  # noqa: F401

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend="xhal-gloo" if device == "xhal" else "gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.0,
                                             batch_first=True).to(device)
    fully_shard(model, mesh=init_device_mesh(device, (2,)))
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 16, 128, device=device)

    def step():
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()

    for _ in range(2):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(5):
        step()
    if device == "xhal":
        torch.xhal.synchronize()
    dist.barrier()
    step_ms = (time.perf_counter() - start) * 1e3 / 5

    # The collectives of one step alone: FSDP2 gathers the parameters twice (forward, and
    # again for backward) and reduce-scatters the gradients once.
    numel = sum(p.numel() for p in model.parameters()) * 2  # the whole, from the shards
    whole = torch.empty(numel, device=device)
    shard = torch.ones(numel // 2, device=device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(5):
        dist.all_gather_into_tensor(whole, shard)
        dist.all_gather_into_tensor(whole, shard)
        dist.reduce_scatter_tensor(shard, whole)
    if device == "xhal":
        torch.xhal.synchronize()
    dist.barrier()
    results[rank] = (step_ms, (time.perf_counter() - start) * 1e3 / 5, numel)
    dist.destroy_process_group()


def sharded():
    out = {}
    manager = mp.get_context("spawn").Manager()
    for device in ("xhal", "cpu"):
        results = manager.dict()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(sharded_worker, args=(port, device, results), nprocs=2, start_method="spawn")
        out[f"{device}_step_ms"] = max(r[0] for r in results.values())
        out[f"{device}_collectives_ms"] = max(r[1] for r in results.values())
        out["parameters"] = results[0][2]
    out["ratio"] = out["xhal_step_ms"] / out["cpu_step_ms"]
    out["collectives_ratio"] = out["xhal_collectives_ms"] / out["cpu_collectives_ms"]
    return out


def main():
    figures = {
        "device": xhal.torch.devices()[0]["label"],
        "graphs": graphs(),
        "random": random_numbers(),
        "profiler": profiler(),
        "stream_priorities": stream_priorities(),
        "fully_shard_2_processes": sharded(),
    }
    if "--json" in sys.argv:
        print(json.dumps(figures, indent=2))
        return
    g = figures["graphs"]
    print(f"device {figures['device']}")
    print(f"graphs: MLP step host {g['eager_host_ms']:.3f} ms eager, {g['replay_host_ms']:.3f} ms replayed "
          f"({g['host_ratio']:.3f}x); wall {g['eager_wall_ms']:.3f} ms eager, {g['replay_wall_ms']:.3f} ms replayed "
          f"({g['wall_ratio']:.2f}x)")
    for name, r in figures["random"].items():
        print(f"random: {name} 4M float32 {r['xhal_ms']:.2f} ms, torch CPU {r['torch_cpu_ms']:.2f} ms "
              f"({r['ratio']:.2f}x)")
    p = figures["profiler"]
    print(f"profiler: MLP step {p['plain_ms']:.3f} ms, profiled {p['profiled_ms']:.3f} ms ({p['ratio']:.2f}x)")
    q = figures["stream_priorities"]
    print(f"stream priorities {tuple(q['priority_range'])}: softmax 256x1024 {q['idle_ms']:.2f} ms each on an idle device; "
          f"beside matrix products {q['busy_plain_ms']:.2f} ms at priority 0 ({q['plain_over_idle']:.2f}x), "
          f"{q['busy_urgent_ms']:.2f} ms at the most urgent ({q['urgent_over_idle']:.2f}x)")
    s = figures["fully_shard_2_processes"]
    print(f"fully_shard, 2 processes: step {s['xhal_step_ms']:.1f} ms on xhal tensors, {s['cpu_step_ms']:.1f} ms "
          f"on CPU tensors with Gloo ({s['ratio']:.2f}x); its collectives ({s['parameters']} parameters gathered "
          f"twice, reduce-scattered once) {s['xhal_collectives_ms']:.2f} ms staged, {s['cpu_collectives_ms']:.2f} ms "
          f"on CPU tensors ({s['collectives_ratio']:.2f}x)")


if __name__ == "__main__":
    main()
