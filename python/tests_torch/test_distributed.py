"""torch.distributed across two processes on loopback, with xhal tensors on Gloo: the
collectives give what CPU tensors give, and a data-parallel training step of the MLP agrees
with the same step in one process."""

import copy
import os
import socket

import torch
import torch.multiprocessing as mp

from models import MLP, mlp_batches

WORLD = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, port, results, state):
    import torch.distributed as dist
    import torch.nn.functional as F

    import xhal.torch.distributed  # noqa: F401

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(rank=rank, world_size=WORLD)
    dev = torch.device("xhal:0")
    out = {"backend": dist.get_backend_config()}

    t = torch.arange(4.0, device=dev) * (rank + 1)
    dist.all_reduce(t)
    out["all_reduce"] = t.cpu()
    m = torch.full((3,), float(rank), device=dev)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out["all_reduce_max"] = m.cpu()
    b = torch.full((2, 2), float(rank + 10), device=dev)
    dist.broadcast(b, src=1)
    out["broadcast"] = b.cpu()
    gathered = [torch.empty(3, device=dev) for _ in range(WORLD)]
    dist.all_gather(gathered, torch.full((3,), float(rank), device=dev))
    out["all_gather"] = [g.cpu() for g in gathered]
    cpu = torch.ones(2) * rank
    dist.all_reduce(cpu)
    out["cpu_all_reduce"] = cpu
    r = torch.full((2,), float(rank + 1), device=dev)
    dist.reduce(r, dst=0)
    out["reduce"] = r.cpu()
    scattered = torch.empty(2, device=dev)
    dist.reduce_scatter(scattered, [torch.full((2,), float(rank * 10 + k), device=dev) for k in range(WORLD)])
    out["reduce_scatter"] = scattered.cpu()
    if rank == 0:
        dist.send(torch.arange(3.0, device=dev) + 100, dst=1)
    else:
        received = torch.empty(3, device=dev)
        dist.recv(received, src=0)
        out["recv"] = received.cpu()

    # One data-parallel step: each rank takes half the batch, gradients are averaged.
    model = MLP()
    model.load_state_dict(state)
    model.to(dev)
    x, y = mlp_batches(1, batch=16)[0]
    half = slice(rank * 8, rank * 8 + 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.cross_entropy(model(x[half].to(dev)), y[half].to(dev))
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= WORLD
    opt.step()
    out["parameters"] = {k: v.cpu() for k, v in model.state_dict().items()}
    dist.barrier()
    dist.destroy_process_group()
    results[rank] = out


def test_collectives_and_a_data_parallel_step(dev):
    torch.manual_seed(0)
    model = MLP()
    state = copy.deepcopy(model.state_dict())
    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    mp.start_processes(worker, args=(free_port(), results, state), nprocs=WORLD, start_method="spawn")

    for rank in range(WORLD):
        r = results[rank]
        assert "xhal-gloo" in r["backend"], r["backend"]
        assert torch.equal(r["all_reduce"], torch.arange(4.0) * 3)
        assert torch.equal(r["all_reduce_max"], torch.full((3,), 1.0))
        assert torch.equal(r["broadcast"], torch.full((2, 2), 11.0))
        assert all(torch.equal(g, torch.full((3,), float(i))) for i, g in enumerate(r["all_gather"]))
        assert torch.equal(r["cpu_all_reduce"], torch.ones(2))
        # Sum over ranks of rank * 10 + k, for this rank's k.
        assert torch.equal(r["reduce_scatter"], torch.full((2,), float(10 + 2 * rank)))
    assert torch.equal(results[0]["reduce"], torch.full((2,), 3.0))
    assert torch.equal(results[1]["recv"], torch.arange(3.0) + 100)

    # The same step in one process on the whole batch (the mean of the two halves' means).
    import torch.nn.functional as F

    x, y = mlp_batches(1, batch=16)[0]
    single = MLP()
    single.load_state_dict(state)
    opt = torch.optim.SGD(single.parameters(), lr=0.1)
    F.cross_entropy(single(x), y).backward()
    opt.step()
    for name, expected in single.state_dict().items():
        for rank in range(WORLD):
            torch.testing.assert_close(results[rank]["parameters"][name], expected, rtol=1e-4, atol=1e-5)
