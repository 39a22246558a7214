"""The operators with xhal kernels give the CPU's answers, with broadcasting and any strides,
and run without falling back; misuse raises PyTorch's usual errors."""

import pytest
import torch
import torch.nn.functional as F

import xhal.torch


def both(*tensors):
    return [t.to("xhal:0") for t in tensors], list(tensors)


def close(got, expected, rtol=1e-5, atol=1e-5):
    assert got.device.type == "xhal"
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol, atol=atol)


def no_fallbacks():
    counts = xhal.torch.fallback_counts()
    assert counts == {}, f"fell back: {counts}"


BINARY = [
    lambda a, b: a + b,
    lambda a, b: torch.add(a, b, alpha=-2.5),
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a / (b.abs() + 1),
    torch.maximum,
    torch.minimum,
    lambda a, b: a * 3 + 1.5,
]


@pytest.mark.parametrize("op", range(len(BINARY)))
@pytest.mark.parametrize("layout", ["same", "broadcast", "transposed", "sliced"])
def test_binary(dev, op, layout):
    g = torch.Generator().manual_seed(op)
    a = torch.randn(6, 5, generator=g)
    b = {"same": torch.randn(6, 5, generator=g), "broadcast": torch.randn(5, generator=g),
         "transposed": torch.randn(5, 6, generator=g).t(), "sliced": torch.randn(6, 10, generator=g)[:, ::2]}[layout]
    (da, db), _ = both(a, b)
    if layout == "transposed":
        db = b.t().contiguous().to(dev).t()
    if layout == "sliced":
        db = b.contiguous().to(dev)
    close(BINARY[op](da, db), BINARY[op](a, b))
    no_fallbacks()


@pytest.mark.parametrize("name", ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                                  "reciprocal", "relu", "gelu", "silu"])
def test_unary(dev, name):
    x = torch.linspace(-4, 4, 37)
    if name in ("log", "sqrt", "rsqrt", "reciprocal"):
        x = x.abs() + 0.1
    f = getattr(torch, name, None) or getattr(F, name)
    close(f(x.to(dev)), f(x), rtol=2e-5, atol=2e-6)
    close(f(x.to(dev).reshape(37, 1).t()), f(x.reshape(37, 1).t()), rtol=2e-5, atol=2e-6)
    no_fallbacks()


def test_int32_arithmetic(dev):
    a = torch.arange(-10, 10, dtype=torch.int32)
    b = torch.arange(20, dtype=torch.int32).flip(0)
    close(a.to(dev) + b.to(dev) * 3, a + b * 3)
    close(torch.maximum(a.to(dev), b.to(dev)), torch.maximum(a, b))
    no_fallbacks()


def test_reductions(dev):
    x = torch.randn(4, 5, 6)
    for dims, keep in [((1,), False), ((0, 2), True), ((-1,), False), (None, False)]:
        close(x.to(dev).sum(dim=dims, keepdim=keep), x.sum(dim=dims, keepdim=keep), rtol=1e-5, atol=1e-5)
        close(x.to(dev).mean(dim=dims, keepdim=keep), x.mean(dim=dims, keepdim=keep), rtol=1e-5, atol=1e-5)
    close(x.to(dev).transpose(0, 2).sum(1), x.transpose(0, 2).sum(1), atol=1e-5)
    no_fallbacks()


def test_matrix_products(dev):
    g = torch.Generator().manual_seed(3)
    a, b, bias = torch.randn(7, 9, generator=g), torch.randn(9, 4, generator=g), torch.randn(4, generator=g)
    close(a.to(dev) @ b.to(dev), a @ b, rtol=1e-4, atol=1e-5)
    close(b.to(dev).t() @ a.to(dev).t(), b.t() @ a.t(), rtol=1e-4, atol=1e-5)
    close(torch.addmm(bias.to(dev), a.to(dev), b.to(dev), beta=0.5, alpha=2), torch.addmm(bias, a, b, beta=0.5, alpha=2),
          rtol=1e-4, atol=1e-5)
    x, y = torch.randn(3, 5, 6, generator=g), torch.randn(3, 6, 2, generator=g)
    close(torch.bmm(x.to(dev), y.to(dev)), torch.bmm(x, y), rtol=1e-4, atol=1e-5)
    close(torch.matmul(x.to(dev), y.to(dev)), torch.matmul(x, y), rtol=1e-4, atol=1e-5)
    no_fallbacks()


def test_softmax_family(dev):
    x = torch.randn(3, 4, 5) * 4
    for dim in (0, 1, -1):
        close(torch.softmax(x.to(dev), dim), torch.softmax(x, dim), atol=1e-6)
        close(torch.log_softmax(x.to(dev), dim), torch.log_softmax(x, dim), atol=1e-5)
    xd = x.to(dev).requires_grad_()
    xc = x.clone().requires_grad_()
    (torch.softmax(xd, -1) * torch.arange(5.0, device=dev)).sum().backward()
    (torch.softmax(xc, -1) * torch.arange(5.0)).sum().backward()
    close(xd.grad, xc.grad, atol=1e-5)
    no_fallbacks()


def test_losses_embedding_and_layer_norm(dev):
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 4, generator=g)
    target = torch.tensor([0, 3, 1, -100, 2, 3])
    weight = torch.tensor([1.0, 2.0, 0.5, 1.5])
    for reduction in ("mean", "sum", "none"):
        got = F.cross_entropy(logits.to(dev), target.to(dev), weight=weight.to(dev), reduction=reduction)
        close(got, F.cross_entropy(logits, target, weight=weight, reduction=reduction), atol=1e-5)
    table = torch.randn(10, 3, generator=g, requires_grad=True)
    table_d = table.detach().to(dev).requires_grad_()
    ids = torch.tensor([[1, 4, 4], [9, 0, 1]])
    (F.embedding(ids, table) ** 2).sum().backward()
    (F.embedding(ids.to(dev), table_d) ** 2).sum().backward()
    close(table_d.grad, table.grad, atol=1e-5)
    norm = torch.nn.LayerNorm(7)
    norm_d = torch.nn.LayerNorm(7).to(dev)
    norm_d.load_state_dict(norm.state_dict())
    x = torch.randn(3, 2, 7, generator=g, requires_grad=True)
    xd = x.detach().to(dev).requires_grad_()
    (norm(x) * torch.arange(7.0)).sum().backward()
    (norm_d(xd) * torch.arange(7.0, device=dev)).sum().backward()
    close(xd.grad, x.grad, atol=1e-5)
    close(norm_d.weight.grad, norm.weight.grad, atol=1e-5)
    close(norm_d.bias.grad, norm.bias.grad, atol=1e-5)
    counts = xhal.torch.fallback_counts()
    assert not any(("nll" in op or "embedding" in op or "layer_norm" in op or "index_select" in op) for op in counts), counts


def test_optimizer_updates_and_masks(dev):
    a, b, c = torch.randn(5), torch.randn(5), torch.rand(5) + 0.5
    close(torch.addcmul(a.to(dev), b.to(dev), c.to(dev), value=0.3), torch.addcmul(a, b, c, value=0.3))
    close(torch.addcdiv(a.to(dev), b.to(dev), c.to(dev), value=-2), torch.addcdiv(a, b, c, value=-2))
    for w in (0.2, 0.9):
        close(torch.lerp(a.to(dev), b.to(dev), w), torch.lerp(a, b, w))
    mask = torch.tensor([True, False, True, True, False])
    close(a.to(dev).masked_fill(mask.to(dev), -7.0), a.masked_fill(mask, -7.0))
    close(torch.cat([a.to(dev), b.to(dev)[1:]]), torch.cat([a, b[1:]]))
    no_fallbacks()


def test_misuse_raises_the_usual_errors(dev):
    logits = torch.randn(3, 4, device=dev)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(logits, torch.tensor([0, 4, 1], device=dev))
    with pytest.raises(IndexError, match="out of range"):
        F.embedding(torch.tensor([11], device=dev), torch.randn(10, 3, device=dev))
    with pytest.raises(RuntimeError):
        torch.mm(torch.randn(2, 3, device=dev), torch.randn(4, 2, device=dev))
    assert logits.sum().isfinite().item()


def test_kernels_of_the_same_shape_differ_by_dtype(dev):
    # The same copy into the same strided destination, first from int32 and then from float32:
    # the second must not reuse the first's kernel, which reads int32 elements.
    destination = torch.zeros(6, 2, device=dev)[:, 0]
    destination.copy_(torch.arange(6, dtype=torch.int32).to(dev))
    assert destination.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    destination.copy_(torch.arange(6.0).to(dev) + 0.5)
    assert destination.cpu().tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
