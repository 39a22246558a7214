"""Sharded training on xhal tensors over processes on loopback, through the staged Gloo backend
(xhal.torch.distributed): FSDP2's fully_shard trains a transformer block with the losses of
the same training in one process, DTensor shards a tensor and draws random numbers that equal
the unsharded draw, and torch.distributed.checkpoint saves and loads the sharded state."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

import xhal.torch

STEPS = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transformer_block():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)


def batches():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 6, 32, generator=g), torch.randn(8, 6, 32, generator=g)


def single_process_losses():
    model = transformer_block()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = batches()
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def worker(rank, world, port, checkpoint, results):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    import xhal.torch.distributed  # noqa: F401

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(rank=rank, world_size=world)
    dev = torch.device("xhal:0")
    out = {}

    # FSDP2: each rank trains on its share of the batch; the gradients are reduce-scattered.
    model = transformer_block().to(dev)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = batches()
    share = slice(rank * 8 // world, (rank + 1) * 8 // world)
    x, y = x[share].to(dev), y[share].to(dev)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
    out["losses"] = losses
    out["shard_device"] = str(next(iter(model.parameters())).to_local().device)

    if world == 2:
        # DTensor: a sharded tensor's pieces, and a random draw on a sharded tensor.
        mesh = init_device_mesh("xhal", (world,))
        whole = torch.arange(64.0, device=dev).reshape(8, 8)
        sharded = distribute_tensor(whole, mesh, [Shard(0)])
        out["local"] = sharded.to_local().cpu()
        replicated = distribute_tensor(whole.t().contiguous(), mesh, [Replicate()])
        out["matmul"] = (sharded @ replicated).full_tensor().cpu()
        torch.manual_seed(5)
        noise = distribute_tensor(torch.empty(16, 8, device=dev), mesh, [Shard(0)])
        torch.nn.init.uniform_(noise)
        out["random"] = noise.full_tensor().cpu()

        # Distributed checkpoints: save the sharded state, load it into a fresh sharded model.
        dcp.save({"model": model.state_dict()}, checkpoint_id=checkpoint)
        fresh = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                                 batch_first=True).to(dev)
        fully_shard(fresh)
        state = {"model": fresh.state_dict()}
        dcp.load(state, checkpoint_id=checkpoint)
        fresh.load_state_dict(state["model"])
        out["checkpoint_equal"] = all(
            torch.equal(a.full_tensor().cpu(), b.full_tensor().cpu())
            for a, b in zip(model.parameters(), fresh.parameters())
        )
    dist.barrier()
    dist.destroy_process_group()
    results[rank] = out


def run(world, checkpoint):
    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    mp.start_processes(worker, args=(world, free_port(), str(checkpoint), results), nprocs=world,
                       start_method="spawn")
    return [results[rank] for rank in range(world)]


@pytest.mark.parametrize("world", [2, 4])
def test_fully_shard_trains_as_one_process(dev, tmp_path, world):
    label = xhal.torch.devices()[0]["label"]
    # The staged backend does not depend on the device; CI's time goes to the cpu device (two
    # and four processes) and Vulkan (two).
    if not label.startswith(("cpu", "vulkan")):
        pytest.skip(f"sharded training runs on the cpu and vulkan devices in CI, to keep its time; not {label}")
    if world == 4 and not label.startswith("cpu"):
        pytest.skip(f"four processes run on the cpu device only, to keep CI's time; {label} runs two")
    results = run(world, tmp_path / "checkpoint")
    expected = single_process_losses()
    for r in results:
        assert r["shard_device"] == "xhal:0"
        torch.testing.assert_close(r["losses"], expected, rtol=2e-5, atol=1e-6)
    if world == 2:
        whole = torch.arange(64.0).reshape(8, 8)
        assert torch.equal(results[0]["local"], whole[:4]) and torch.equal(results[1]["local"], whole[4:])
        assert all(torch.equal(r["matmul"], whole @ whole.t()) for r in results)
        # The shards draw what one device draws for the whole tensor at those places.
        assert torch.equal(results[0]["random"], results[1]["random"])
        torch.manual_seed(5)
        torch.testing.assert_close(results[0]["random"], torch.rand(16, 8, device=dev).cpu(), rtol=0, atol=0)
        assert all(r["checkpoint_equal"] for r in results)
