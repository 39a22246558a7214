"""Mixed precision, in the manner of OpenReg's autocast tests: torch.autocast("xhal") casts as
PyTorch's policies for the device's autocast key say, GradScaler's kernels run on the device,
a model trains with both, and activation checkpointing works."""

import pytest
import torch
import torch.utils.checkpoint

import xhal.torch

LOW = [torch.float16, torch.bfloat16]


def test_supported_dtypes():
    assert torch.xhal.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.amp.is_autocast_available("xhal")
    assert torch.xhal.is_bf16_supported()


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_cast_policies(dev, dtype):
    a = torch.randn(8, 8, device=dev)
    b = torch.randn(8, 8, device=dev)
    linear = torch.nn.Linear(8, 4).to(dev)
    with torch.autocast("xhal", dtype=dtype):
        assert torch.is_autocast_enabled("xhal") and torch.get_autocast_dtype("xhal") == dtype
        # Lower precision: matrix products, linear layers, convolutions.
        assert (a @ b).dtype == dtype
        assert torch.mm(a, b).dtype == dtype
        assert linear(a).dtype == dtype
        conv = torch.nn.Conv2d(2, 3, 3).to(dev)
        assert conv(torch.randn(1, 2, 5, 5, device=dev)).dtype == dtype
        # float32: reductions and functions that lose range or accuracy, norms and losses.
        low = (a @ b)
        assert torch.softmax(low, -1).dtype == torch.float32
        assert low.exp().dtype == torch.float32
        assert low.sum().dtype == torch.float32
        assert torch.nn.functional.layer_norm(low, (8,)).dtype == torch.float32
        assert torch.nn.functional.mse_loss(low, b).dtype == torch.float32
        # Promotion of mixed inputs to the widest.
        assert torch.addcmul(a, low, low).dtype == torch.float32
        # Everything else runs in its inputs' dtype.
        assert (low + low).dtype == dtype and torch.relu(low).dtype == dtype
    assert (a @ b).dtype == torch.float32
    with torch.autocast("xhal", dtype=dtype, enabled=False):
        assert (a @ b).dtype == torch.float32


def test_autocast_results_match_the_cpu(dev):
    torch.manual_seed(0)
    a = torch.randn(16, 32)
    b = torch.randn(32, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = a @ b
    with torch.autocast("xhal", dtype=torch.bfloat16):
        got = a.to(dev) @ b.to(dev)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu(), expected, atol=0.1, rtol=2e-2)


def test_binary_cross_entropy_is_refused_under_autocast(dev):
    p = torch.rand(4, device=dev)
    with torch.autocast("xhal", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, p)


def test_grad_scaler_kernels(dev):
    grads = [torch.tensor([2.0, 4.0], device=dev), torch.tensor([1.0, 8.0], device=dev).t()]
    found = torch.zeros(1, device=dev)
    inv = torch.full((1,), 0.5, device=dev)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 0.0
    assert grads[0].cpu().tolist() == [1.0, 2.0] and grads[1].cpu().tolist() == [0.5, 4.0]
    bad = [torch.tensor([1.0, float("inf")], device=dev), torch.tensor([float("nan")], dtype=torch.bfloat16, device=dev)]
    torch._amp_foreach_non_finite_check_and_unscale_(bad, found, inv)
    assert found.item() == 1.0

    scale = torch.full((1,), 1024.0, device=dev)
    tracker = torch.zeros(1, dtype=torch.int32, device=dev)
    torch._amp_update_scale_(scale, tracker, torch.ones(1, device=dev), 2.0, 0.5, 3)
    assert scale.item() == 512.0 and tracker.item() == 0
    for step in range(3):
        torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=dev), 2.0, 0.5, 3)
    assert scale.item() == 1024.0 and tracker.item() == 0
    torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=dev), 2.0, 0.5, 3)
    assert tracker.item() == 1
    huge = torch.full((1,), 3e38, device=dev)
    tracker.fill_(2)
    torch._amp_update_scale_(huge, tracker, torch.zeros(1, device=dev), 2.0, 0.5, 3)
    assert huge.item() == pytest.approx(3e38) and tracker.item() == 0  # growing would overflow
    with pytest.raises(RuntimeError, match="1-element float"):
        torch._amp_update_scale_(torch.ones(2, device=dev), tracker, found, 2.0, 0.5, 3)
    assert xhal.torch.fallback_counts() == {}


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_training_with_autocast_and_a_grad_scaler(dev, dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("xhal", init_scale=2.0**16)
    x = torch.randn(64, 16, device=dev)
    target = torch.randn(64, 4, device=dev)
    losses = []
    for _ in range(12):
        optimizer.zero_grad()
        with torch.autocast("xhal", dtype=dtype):
            loss = torch.nn.functional.mse_loss(model(x), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert scaler.get_scale() > 0
    # An overflowing step is skipped and backs the scale off.
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scale = scaler.get_scale()
    optimizer.zero_grad()
    with torch.autocast("xhal", dtype=dtype):
        loss = model(x).sum() * float("inf")
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == scale * 0.5
    assert all(torch.equal(a, p.detach().cpu()) for a, p in zip(before, model.parameters()))
    assert xhal.torch.fallback_counts() == {}


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_activation_checkpointing(dev, reentrant):
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Dropout(0.3), torch.nn.Linear(8, 8))
    block = block.to(dev)
    x = torch.randn(5, 8, device=dev, requires_grad=True)
    torch.manual_seed(1)
    plain = block(x).sum()
    plain.backward()
    expected = [x.grad.cpu().clone()] + [p.grad.cpu().clone() for p in block.parameters()]
    x.grad = None
    block.zero_grad()
    torch.manual_seed(1)
    # The recomputation in the backward pass draws the same dropout mask: checkpoint saves
    # and restores the xhal generator's state.
    checkpointed = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant).sum()
    checkpointed.backward()
    got = [x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]
    assert torch.equal(plain.detach().cpu(), checkpointed.detach().cpu())
    for a, b in zip(expected, got):
        torch.testing.assert_close(a, b)
    with torch.autocast("xhal", dtype=torch.bfloat16):
        y = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
    assert y.dtype == torch.bfloat16
