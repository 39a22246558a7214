"""What an xhal tensor must mean what a CPU tensor means: reductions of 0-dimensional tensors,
conjugate and negative views of complex tensors, views that alias, empty products, and a
model's parameters keeping their identity (and their ties) when it moves."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xhal.torch


@pytest.mark.parametrize("reduce", [
    lambda x: x.sum(dim=0), lambda x: x.mean(dim=0), lambda x: x.amax(dim=0), lambda x: x.amin(dim=-1),
    lambda x: x.logsumexp(dim=0), lambda x: x.sum(dim=0, keepdim=True), lambda x: x.prod(dim=0),
    lambda x: x.max(dim=0).values, lambda x: x.argmax(dim=0), lambda x: torch.nanmean(x, dim=0),
])
def test_reductions_of_a_0_dim_tensor_with_a_dim(dev, reduce):
    x = torch.tensor(1.5)
    got = reduce(x.to(dev))
    assert got.shape == reduce(x).shape
    torch.testing.assert_close(got.cpu(), reduce(x))


def test_a_repeated_reduction_dim_is_pytorch_s_error(dev):
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.ones(2, 3, device=dev).sum(dim=(0, 0))


def test_cosine_similarity_of_0_dim_inputs(dev):
    a, b = torch.tensor(2.0), torch.tensor(3.0)
    torch.testing.assert_close(F.cosine_similarity(a.to(dev), b.to(dev), dim=0).cpu(), F.cosine_similarity(a, b, dim=0))


def test_conjugate_and_negative_views(dev):
    z = torch.randn(6, dtype=torch.complex64)
    on = z.to(dev)
    assert torch.equal(on.conj().resolve_conj().cpu(), z.conj())
    assert torch.equal(on.conj().cpu(), z.conj())
    assert torch.equal(on._neg_view().cpu(), -z)
    into = torch.zeros(6, dtype=torch.complex64, device=dev)
    into.conj().copy_(z)
    assert torch.equal(into.cpu(), z.conj())
    torch.testing.assert_close(torch.fft.ifft(on).cpu(), torch.fft.ifft(z))
    torch.testing.assert_close(torch.fft.hfft(on).cpu(), torch.fft.hfft(z))


def test_views_alias_their_base(dev):
    z = torch.randn(4, dtype=torch.complex64).to(dev)
    real = torch.view_as_real(z)
    real[0, 0] = 100.0
    assert z.cpu()[0].real == 100.0 and real.data_ptr() == z.data_ptr()
    back = torch.view_as_complex(real)
    back[1] = 7 + 0j
    assert real.cpu()[1, 0] == 7.0
    x = torch.arange(8.0).to(dev)
    windows = x.unfold(0, 2, 2)
    windows[0, 0] = -1
    assert x.cpu()[0] == -1


def test_irfft_gradient(dev):
    x = torch.randn(5, dtype=torch.complex64)
    cpu = x.clone().requires_grad_()
    on = x.to(dev).requires_grad_()
    torch.fft.irfft(cpu).sum().backward()
    torch.fft.irfft(on).sum().backward()
    torch.testing.assert_close(on.grad.cpu(), cpu.grad)


def test_products_with_an_empty_inner_dimension(dev):
    a, b, bias = torch.randn(3, 0), torch.randn(0, 4), torch.randn(4)
    assert torch.equal((a.to(dev) @ b.to(dev)).cpu(), torch.zeros(3, 4))
    torch.testing.assert_close(torch.addmm(bias.to(dev), a.to(dev), b.to(dev), beta=2).cpu(), torch.addmm(bias, a, b, beta=2))
    assert torch.equal(torch.bmm(torch.randn(2, 3, 0, device=dev), torch.randn(2, 0, 5, device=dev)).cpu(), torch.zeros(2, 3, 5))


class TiedLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def test_moving_a_model_keeps_its_parameters_and_their_ties(dev):
    model = TiedLanguageModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    weight = model.embed.weight
    model.to(dev)
    assert model.embed.weight is weight and model.head.weight is model.embed.weight
    assert weight.device.type == "xhal" and len(list(model.parameters())) == 1
    before = weight.detach().cpu().clone()
    model(torch.tensor([1, 2, 3], device=dev)).sum().backward()
    optimizer.step()
    assert model.head.weight is model.embed.weight
    assert not torch.equal(weight.detach().cpu(), before)
    model.to("cpu")
    assert weight.device.type == "cpu" and model.head.weight is weight


def test_a_tied_model_trains_like_on_the_cpu(dev):
    torch.manual_seed(0)
    cpu = TiedLanguageModel()
    on = TiedLanguageModel()
    on.load_state_dict(cpu.state_dict())
    on.to(dev)
    tokens = torch.randint(0, 10, (16,))
    for model, where in ((cpu, "cpu"), (on, dev)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(5):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(tokens.to(where)), tokens.to(where))
            loss.backward()
            optimizer.step()
    torch.testing.assert_close(on.embed.weight.detach().cpu(), cpu.embed.weight.detach(), atol=1e-5, rtol=1e-5)


def test_loading_a_state_dict_into_a_recurrent_module_still_works(dev):
    # nn.LSTM keeps weak references to its parameters, which PyTorch's swap of parameters on
    # conversion refuses; xhal keeps parameters in place instead, so loading is unaffected.
    source = nn.LSTM(3, 4)
    target = nn.LSTM(3, 4)
    target.load_state_dict(source.state_dict())
    target.to(dev).load_state_dict(source.state_dict())


# --- Cases the operator sweep found ------------------------------------------------------------


def test_clamp_with_a_nan_bound_is_nan(dev):
    x = torch.tensor([1.0, 5.0, -3.0, float("nan")])
    low = torch.tensor([float("nan"), 0.0, 0.0, 0.0])
    high = torch.tensor([2.0, float("nan"), -1.0, 1.0])
    expected = torch.clamp(x, low, high)
    torch.testing.assert_close(torch.clamp(x.to(dev), low.to(dev), high.to(dev)).cpu(), expected, equal_nan=True)


def test_threshold_of_integers(dev):
    x = torch.arange(-5, 6, dtype=torch.int32)
    assert torch.equal(F.threshold(x.to(dev), 1, 42).cpu(), F.threshold(x, 1, 42))


def test_float64_interpolation(dev):
    if torch.float64 not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{dev} has no float64 kernels")
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    for mode, corners in (("nearest", None), ("bilinear", True), ("bilinear", False)):
        got = F.interpolate(x.to(dev), size=(3, 5), mode=mode, align_corners=corners)
        torch.testing.assert_close(got.cpu(), F.interpolate(x, size=(3, 5), mode=mode, align_corners=corners))


def test_integer_scatter_mean_rounds_down(dev):
    source = torch.tensor([[-7, 3, -2, 5]])
    index = torch.tensor([[0, 0, 1, 1]])
    start = torch.tensor([[1, 0]])
    expected = start.scatter_reduce(1, index, source, "mean", include_self=True)
    got = start.to(dev).scatter_reduce(1, index.to(dev), source.to(dev), "mean", include_self=True)
    assert torch.equal(got.cpu(), expected)


def complex_extremes():
    """Complex values with a NaN or an infinity in one part, the other, both or neither."""
    nan, inf = float("nan"), float("inf")
    real = torch.tensor([1.0, nan, 2.0, inf, -inf, nan, 0.5, 3.0])
    imag = torch.tensor([2.0, 1.0, nan, 0.0, 1.0, inf, -inf, nan])
    return torch.complex(real, imag)


@pytest.mark.parametrize("test", ["isnan", "isinf", "isfinite", "isposinf", "isneginf"])
def test_complex_tests_see_both_parts(dev, test):
    z = complex_extremes()
    if test in ("isposinf", "isneginf"):
        # Refused on the CPU, and on xhal with the same error.
        with pytest.raises(TypeError, match="does not support complex inputs"):
            getattr(torch, test)(z)
        with pytest.raises(TypeError, match="does not support complex inputs"):
            getattr(torch, test)(z.to(dev))
        return
    assert torch.equal(getattr(torch, test)(z.to(dev)).cpu(), getattr(torch, test)(z))


def test_complex_nan_to_num_replaces_each_part(dev):
    z = complex_extremes()
    expected = torch.nan_to_num(z, nan=7.0, posinf=8.0, neginf=-9.0)
    assert torch.equal(torch.nan_to_num(z.to(dev), nan=7.0, posinf=8.0, neginf=-9.0).cpu(), expected)


def test_comparison_with_a_complex_scalar(dev):
    z = torch.tensor([1 + 2j, 3 - 1j, 1 + 2j], dtype=torch.complex64)
    assert torch.equal(torch.eq(z.to(dev), 1 + 2j).cpu(), torch.eq(z, 1 + 2j))
    assert torch.equal(torch.ne(z.to(dev), 1 + 2j).cpu(), torch.ne(z, 1 + 2j))


def test_complex_addbmm_and_a_complex_base_of_pow(dev):
    torch.manual_seed(0)
    self, a, b = torch.randn(2, 3, dtype=torch.complex64), torch.randn(4, 2, 5, dtype=torch.complex64), \
        torch.randn(4, 5, 3, dtype=torch.complex64)
    expected = torch.addbmm(self, a, b, beta=1 + 2j, alpha=2 + 3j)
    got = torch.addbmm(self.to(dev), a.to(dev), b.to(dev), beta=1 + 2j, alpha=2 + 3j)
    torch.testing.assert_close(got.cpu(), expected)
    exponent = torch.tensor([0.5, 2.0, -1.0])
    torch.testing.assert_close(torch.pow(1 + 1j, exponent.to(dev)).cpu(), torch.pow(1 + 1j, exponent))


def test_integer_addbmm_takes_integer_factors(dev):
    self, a, b = torch.ones(2, 3, dtype=torch.int64), torch.ones(4, 2, 5, dtype=torch.int64), torch.ones(4, 5, 3, dtype=torch.int64)
    expected = torch.addbmm(self, a, b, beta=0.6, alpha=1.5)
    got = torch.addbmm(self.to(dev), a.to(dev), b.to(dev), beta=0.6, alpha=1.5)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


def test_float16_norm_does_not_overflow(dev):
    x = torch.tensor(8.5, dtype=torch.float16)
    torch.testing.assert_close(torch.linalg.vector_norm(x.to(dev), ord=6).cpu(), torch.linalg.vector_norm(x, ord=6))


def test_unfold_of_a_0_dim_tensor_backward(dev):
    x = torch.tensor(2.5, requires_grad=True)
    on = x.detach().to(dev).requires_grad_()
    (x.unfold(0, 1, 1) * 3).sum().backward()
    (on.unfold(0, 1, 1) * 3).sum().backward()
    torch.testing.assert_close(on.grad.cpu(), x.grad)


def test_rms_norm_backward_in_a_dtype_without_kernels(dev):
    # The CPU has no kernel for the fused RMS norm's backward to fall back to: it is computed
    # from its formula.
    missing = [d for d in (torch.float16, torch.float64) if d not in xhal.torch.native_dtypes(dev)]
    if not missing:
        pytest.skip(f"{dev} has float16 and float64 kernels; the formula serves dtypes without them")
    x, w = torch.randn(3, 4, dtype=missing[0], requires_grad=True), torch.randn(4, dtype=missing[0], requires_grad=True)
    on_x, on_w = x.detach().to(dev).requires_grad_(), w.detach().to(dev).requires_grad_()
    F.rms_norm(x, (4,), w).pow(2).sum().backward()
    F.rms_norm(on_x, (4,), on_w).pow(2).sum().backward()
    torch.testing.assert_close(on_x.grad.cpu(), x.grad, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(on_w.grad.cpu(), w.grad, rtol=2e-3, atol=2e-3)


def test_integer_convolution_runs_on_the_cpu(dev):
    x, w = torch.randint(-3, 4, (1, 2, 5)), torch.randint(-3, 4, (3, 2, 2))
    xhal.torch.reset_fallback_counts()
    got = F.conv1d(x.to(dev), w.to(dev), stride=2)
    assert got.device.type == "xhal" and torch.equal(got.cpu(), F.conv1d(x, w, stride=2))
    assert xhal.torch.fallback_counts() == {"aten::convolution_overrideable": 1}


@pytest.mark.parametrize("activation", [F.hardtanh, F.relu6, F.hardshrink, F.softshrink])
def test_the_gradient_at_a_nan_is_0_as_in_the_cpu_s_vectorized_loop(dev, activation):
    # 64 elements: the CPU's vectorized loop covers them all (its scalar loop, for a shorter
    # tensor, passes the gradient of a NaN instead).
    x = torch.linspace(-8, 8, 64)
    x[::5] = float("nan")
    x.requires_grad_()
    on = x.detach().to(dev).requires_grad_()
    activation(x).sum().backward()
    activation(on).sum().backward()
    assert (x.grad[::5] == 0).all()
    torch.testing.assert_close(on.grad.cpu(), x.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_hardswish_gradient_at_its_ends(dev, dtype):
    # PyTorch's ends: 0 at -3 itself and the whole gradient at 3 itself; NaN passes it through.
    x = torch.tensor([-4.0, -3.0, -2.984375, 0.0, 2.984375, 3.0, 4.0, float("nan")], dtype=dtype)
    grad = torch.full_like(x, 2.0)
    expected = torch.ops.aten.hardswish_backward(grad, x)
    got = torch.ops.aten.hardswish_backward(grad.to(dev), x.to(dev)).cpu()
    assert torch.equal(got, expected)
