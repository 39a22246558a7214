"""bfloat16 on an xhal device: stored as bfloat16 (two bytes an element), computed in f32 and
rounded once, as PyTorch's CPU computes it; the elementwise kernels read and write it
themselves and every other operator with an xhal kernel runs on f32 copies made on the
device, so none of this crosses to the CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xhal.torch

BF16 = torch.bfloat16


def same(got, expected, exact=False):
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if exact:
        # Bit for bit, NaNs included.
        bits = {BF16: torch.int16, torch.float32: torch.int32}.get(got.dtype)
        assert torch.equal(got.view(bits), expected.view(bits)) if bits else torch.equal(got, expected)
    else:
        # The CPU and the device round the same f32 result, which may differ by a step of f32.
        torch.testing.assert_close(got, expected, rtol=1.6e-2, atol=1e-3, equal_nan=True)


@pytest.fixture
def no_fallback():
    xhal.torch.reset_fallback_counts()
    yield
    assert xhal.torch.fallback_counts() == {}


def test_conversion_rounds_as_pytorch_does(dev, no_fallback):
    # Ties to even, NaN of either sign to 0x7fc0, infinities, negative zero, subnormals, and
    # the largest f32 (which rounds to infinity).
    special = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, -3e-39,
                            3.4028235e38, 1.00390625, 1.01171875, -2.99609375])
    values = torch.cat([special, torch.randn(4099) * 1e3])
    same(values.to(dev).to(BF16), values.to(BF16), exact=True)
    same(values.to(BF16).to(dev).float(), values.to(BF16).float(), exact=True)
    # Into a view of another's memory: the elements beside it keep their value.
    memory = torch.full((9,), 7.0, dtype=BF16)
    on = memory.to(dev)
    on[1:6].copy_(values[:5].to(dev))
    memory[1:6].copy_(values[:5])
    same(on, memory, exact=True)


def test_elementwise_and_comparisons_on_the_device(dev, no_fallback):
    torch.manual_seed(0)
    x, y = torch.randn(33, 17, dtype=BF16), torch.randn(33, 17, dtype=BF16)
    a, b = x.to(dev), y.to(dev)
    same(a + b, x + y, exact=True)
    same(a * 3 - b, x * 3 - y, exact=True)
    same(a.exp(), x.exp())
    same(a.t().sigmoid(), x.t().sigmoid())
    same(a > b, x > y, exact=True)
    same(torch.where(a > 0, a, b), torch.where(x > 0, x, y), exact=True)
    same(a.float() + 1, x.float() + 1, exact=True)
    in_place = a.clone()
    in_place.add_(b, alpha=2)
    same(in_place, x + 2 * y, exact=True)


def test_other_operators_run_in_f32_on_the_device(dev, no_fallback):
    torch.manual_seed(0)
    x, w = torch.randn(8, 32, dtype=BF16), torch.randn(16, 32, dtype=BF16)
    a, v = x.to(dev), w.to(dev)
    same(a @ v.T, x @ w.T)
    same(F.linear(a, v), F.linear(x, w))
    same(a.sum(1), x.sum(1))
    same(a.sum(1, dtype=torch.float32), x.sum(1, dtype=torch.float32))
    same(a.softmax(-1), x.softmax(-1))
    same(F.layer_norm(a, (32,)), F.layer_norm(x, (32,)))
    values, indices = a.sort(dim=1, stable=True)
    expected_values, expected_indices = x.sort(dim=1, stable=True)
    same(values, expected_values, exact=True)
    same(indices, expected_indices, exact=True)
    out = torch.empty(0, dtype=BF16, device=dev)
    torch.mm(a, v.T, out=out)
    same(out, x @ w.T)


def test_a_bfloat16_model_trains_as_on_the_cpu(dev, no_fallback):
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.LayerNorm(24), nn.Linear(24, 3)).to(BF16)
    model = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.LayerNorm(24), nn.Linear(24, 3)).to(BF16)
    model.load_state_dict(cpu_model.state_dict())
    model.to(dev)
    x, target = torch.randn(10, 12, dtype=BF16), torch.randint(0, 3, (10,))
    for m, inputs, labels in ((cpu_model, x, target), (model, x.to(dev), target.to(dev))):
        F.cross_entropy(m(inputs).float(), labels).backward()
    for (name, expected), got in zip(cpu_model.named_parameters(), model.parameters()):
        assert got.dtype == BF16 and got.device.type == "xhal", name
        torch.testing.assert_close(got.grad.cpu(), expected.grad, rtol=3e-2, atol=1e-2, msg=name)


def test_floating_semantics_hold_for_bfloat16(dev, no_fallback):
    x = torch.tensor([1.0, float("nan"), float("inf"), -2.5, 0.25], dtype=BF16)
    on = x.to(dev)
    same(on.isnan(), x.isnan(), exact=True)
    same(on.isfinite(), x.isfinite(), exact=True)
    same(torch.nansum(on), torch.nansum(x), exact=True)
    same(torch.logit(on), torch.logit(x))


def test_convolution(dev, no_fallback):
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 9, dtype=BF16), torch.randn(4, 3, 3, dtype=BF16), torch.randn(4, dtype=BF16)
    same(F.conv1d(x.to(dev), w.to(dev), b.to(dev), padding=1), F.conv1d(x, w, b, padding=1))
    same(F.conv_transpose1d(x.to(dev), w.transpose(0, 1).contiguous().to(dev)),
         F.conv_transpose1d(x, w.transpose(0, 1).contiguous()))


def test_batch_norm_updates_its_running_statistics(dev, no_fallback):
    torch.manual_seed(0)
    cpu_norm = nn.BatchNorm1d(5).to(BF16)
    norm = nn.BatchNorm1d(5).to(BF16).to(dev)
    x = torch.randn(8, 5, 3, dtype=BF16) * 3 + 1
    same(norm(x.to(dev)), cpu_norm(x))
    same(norm.running_mean, cpu_norm.running_mean)
    same(norm.running_var, cpu_norm.running_var)
    assert int(norm.num_batches_tracked) == 1
