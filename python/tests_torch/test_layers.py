"""The layers real models use run natively on xhal:0, forward and backward, and give the CPU's
answers: convolutions, pooling, upsampling, normalizations (with batch norm's running
statistics), recurrent cells, fused attention, indexing, scans and sorts."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xhal.torch


def no_fallbacks():
    counts = xhal.torch.fallback_counts()
    assert counts == {}, f"fell back: {counts}"


def compare(dev, f, *inputs, atol=1e-4, rtol=1e-4, grad_atol=1e-3):
    """Runs `f` on CPU copies of `inputs` and on xhal:0 copies, forward and backward with one
    cotangent, and asserts that outputs and every floating input's gradient agree."""
    cpu = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    on = [x.detach().to(dev).requires_grad_(x.is_floating_point()) for x in inputs]
    expected = f(*cpu)
    got = f(*on)
    assert got.device.type == "xhal"
    torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol, equal_nan=True)
    if expected.requires_grad:
        cotangent = torch.randn_like(expected)
        expected.backward(cotangent)
        got.backward(cotangent.to(dev))
        for c, o in zip(cpu, on):
            if c.grad is not None:
                torch.testing.assert_close(o.grad.cpu(), c.grad, atol=grad_atol, rtol=grad_atol)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


CONVOLUTIONS = {
    "conv1d strided dilated groups": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
                                      [(2, 4, 9), (6, 2, 3), (6,)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0)), [(2, 3, 8, 7), (5, 3, 3, 2), (5,)]),
    "conv2d depthwise": (lambda x, w: F.conv2d(x, w, padding=1, groups=4), [(2, 4, 6, 6), (4, 1, 3, 3)]),
    # 64 output positions or more: a product per batch element rather than one over the batch.
    "conv2d wide": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(3, 3, 10, 10), (4, 3, 3, 3), (4,)]),
    "conv2d wide groups": (lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), [(2, 4, 12, 9), (6, 2, 3, 3), (6,)]),
    # A small weight over 256 positions: its gradient's product splits the batch into chunks.
    "conv2d batch chunks": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(4, 3, 16, 16), (5, 3, 3, 3), (5,)]),
    "conv2d batch chunks groups": (lambda x, w: F.conv2d(x, w, padding=1, groups=2), [(6, 4, 16, 16), (6, 2, 3, 3)]),
    "conv3d": (lambda x, w: F.conv3d(x, w, padding=1), [(1, 2, 5, 6, 4), (4, 2, 2, 3, 2)]),
    # Unit strides on a CPU device: the input gradient sums rows of x in runs of 64
    # (conv.wgsl's image_rows); rows of one, two and three runs, padding past the reach of the
    # kernel, dilation, and few output positions (the columns laid out over the batch).
    "conv2d rows of several runs": (lambda x, w, b: F.conv2d(x, w, b, padding=(1, 2), dilation=(1, 2)),
                                    [(2, 3, 5, 130), (4, 3, 3, 5), (4,)]),
    "conv1d wide padding dilated": (lambda x, w: F.conv1d(x, w, padding=9, dilation=3), [(2, 3, 64), (4, 3, 5)]),
    "conv3d rows of two runs": (lambda x, w: F.conv3d(x, w, padding=1), [(1, 2, 3, 4, 70), (3, 2, 2, 2, 3)]),
    "conv2d few positions": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(3, 4, 5, 5), (6, 4, 3, 3), (6,)]),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=3, dilation=2), [(2, 3, 7), (3, 2, 4)]),
    "conv_transpose2d output padding groups": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
        [(2, 6, 5, 4), (6, 4, 3, 3), (8,)]),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2), [(1, 2, 3, 3, 2), (2, 3, 2, 2, 2)]),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolutions(dev, name):
    f, shapes = CONVOLUTIONS[name]
    compare(dev, f, *[torch.randn(s) for s in shapes])
    no_fallbacks()


POOLING = {
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2), (2, 3, 11)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    "max_pool2d dilated ceil": (lambda x: F.max_pool2d(x, (2, 3), (2, 1), (1, 1), dilation=2, ceil_mode=True),
                                (2, 3, 9, 8)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), (1, 2, 4, 5, 6)),
    # Windows apart (a stride of at least the window): the backward pass scatters.
    "max_pool2d halving": (lambda x: F.max_pool2d(x, 2), (2, 3, 9, 8)),
    "max_pool2d windows apart, padded": (lambda x: F.max_pool2d(x, 2, 3, 1), (2, 3, 10, 9)),
    # Output rows of 70 and 130: a CPU device scatters them in runs of 64 (scatter_max_runs).
    "max_pool2d windows apart, long rows": (lambda x: F.max_pool2d(x, 2), (2, 3, 4, 140)),
    "max_pool3d windows apart, long rows": (lambda x: F.max_pool3d(x, (1, 2, 1), (2, 2, 1)), (1, 2, 3, 4, 130)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 11)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    "avg_pool2d without padding counted": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 9, 8)),
    "avg_pool2d divisor": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), (2, 3, 9, 8)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 1, 1), (1, 2, 4, 5, 6)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (2, 3, 9, 8)),
    "adaptive_avg_pool2d to 1": (lambda x: F.adaptive_avg_pool2d(x, 1), (2, 3, 9, 8)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), (1, 2, 4, 5, 6)),
    # Windows that tile the input: the backward pass finds each input's window directly.
    "adaptive_avg_pool2d tiling": (lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (2, 3, 16, 12)),
    "adaptive_avg_pool3d tiling": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 2, 4, 6, 6)),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 4), (2, 3, 11)),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (4, 3)), (2, 3, 9, 8)),
}


@pytest.mark.parametrize("name", POOLING)
def test_pooling(dev, name):
    f, shape = POOLING[name]
    compare(dev, f, torch.randn(shape))
    no_fallbacks()


def test_max_pool_indices_are_the_cpu_s(dev):
    x = torch.randn(2, 3, 9, 8)
    values, indices = F.max_pool2d(x.to(dev), 3, 2, 1, return_indices=True)
    expected_values, expected_indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    assert torch.equal(values.cpu(), expected_values) and torch.equal(indices.cpu(), expected_indices)


UPSAMPLING = [
    ("nearest", dict(scale_factor=2)),
    ("nearest", dict(size=(3, 4))),
    ("nearest", dict(scale_factor=(1.7, 0.6))),
    ("nearest-exact", dict(size=(8, 11))),
    ("bilinear", dict(scale_factor=2, align_corners=False)),
    ("bilinear", dict(size=(3, 4), align_corners=False)),
    ("bilinear", dict(size=(9, 13), align_corners=True)),
]


@pytest.mark.parametrize("mode,kwargs", UPSAMPLING)
def test_upsampling_2d(dev, mode, kwargs):
    compare(dev, lambda x: F.interpolate(x, mode=mode, **kwargs), torch.randn(2, 3, 5, 7))
    no_fallbacks()


def test_upsampling_1d_and_3d(dev):
    compare(dev, lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), torch.randn(2, 3, 6))
    compare(dev, lambda x: F.interpolate(x, size=13, mode="nearest"), torch.randn(2, 3, 6))
    compare(dev, lambda x: F.interpolate(x, size=(3, 5, 4), mode="trilinear"), torch.randn(1, 2, 2, 3, 4))
    no_fallbacks()


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("kwargs", [{}, dict(num_layers=2, bidirectional=True, batch_first=True), dict(bias=False)])
def test_recurrent_networks(dev, cls, kwargs):
    cpu = cls(5, 7, **kwargs)
    on = cls(5, 7, **kwargs)
    on.load_state_dict(cpu.state_dict())
    on.to(dev)
    x = torch.randn(3, 4, 5)
    expected, _ = cpu(x)
    got, _ = on(x.to(dev))
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    cotangent = torch.randn_like(expected)
    expected.backward(cotangent)
    got.backward(cotangent.to(dev))
    for p, q in zip(cpu.parameters(), on.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-4)
    no_fallbacks()


def test_recurrent_cells(dev):
    compare(dev, lambda x, h, c, wi, wh: torch.lstm_cell(x, (h, c), wi, wh)[1], torch.randn(3, 4), torch.randn(3, 5),
            torch.randn(3, 5), torch.randn(20, 4), torch.randn(20, 5))
    compare(dev, lambda x, h, wi, wh, bi, bh: torch.gru_cell(x, h, wi, wh, bi, bh), torch.randn(3, 4), torch.randn(3, 5),
            torch.randn(15, 4), torch.randn(15, 5), torch.randn(15), torch.randn(15))
    no_fallbacks()


ATTENTION = {
    "plain": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    "causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "bool mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=(torch.arange(35).reshape(5, 7) % 3 != 0).to(q.device)),
    "additive mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.linspace(-2, 2, 70).reshape(2, 1, 5, 7).to(q.device, q.dtype)),
    "scale": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3),
    "a row with every key masked": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=(torch.arange(5).reshape(5, 1) != 2).expand(5, 7).to(q.device)),
}


@pytest.fixture(params=["scores in memory", "fused kernels"])
def attention_backward(request, monkeypatch):
    """Both ways attention runs, forward and backward: small score matrices kept in memory
    (products with the tiled kernel) and the fused kernels that recompute them, which larger
    ones take."""
    if request.param == "fused kernels":
        monkeypatch.setenv("XHAL_TORCH_ATTENTION_SCORES", "0")
    return request.param


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_takes_the_fused_entry(dev, name, attention_backward):
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 6)
    compare(dev, ATTENTION[name], q, k, v)
    no_fallbacks()
    with torch.profiler.profile() as profile:
        ATTENTION[name](q.to(dev), k.to(dev), v.to(dev))
    names = {event.name for event in profile.events()}
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in names
    assert "aten::_scaled_dot_product_attention_math" not in names


def test_attention_grouped_query_heads_and_views(dev, attention_backward):
    compare(dev, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), torch.randn(2, 4, 5, 8),
            torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 6))
    compare(dev, lambda q, k, v: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)),
            torch.randn(2, 5, 4, 8), torch.randn(2, 5, 4, 8), torch.randn(2, 5, 4, 8))
    compare(dev, lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b), torch.randn(2, 4, 5, 8),
            torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 6), torch.randn(2, 1, 5, 7))
    no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_attention_backward_in_half_precision(dev, dtype, attention_backward):
    # Computed in f32 either way, rounded once to the inputs' dtype.
    q, k, v = (torch.randn(2, 4, 9, 8) for _ in range(3))
    grads = {}
    for where, cast in (("cpu", torch.float32), (dev, dtype)):
        leaves = [t.to(where, cast, copy=True).requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*leaves, is_causal=True).float().sum().backward()
        grads[where] = [leaf.grad.float().cpu() for leaf in leaves]
    for got, expected in zip(grads[dev], grads["cpu"]):
        torch.testing.assert_close(got, expected, atol=3e-2, rtol=3e-2)
    no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("keys", [7, 300], ids=["short rows", "rows of a workgroup"])
def test_attention_forward_returns_each_rows_log_sum_exp(dev, dtype, keys, attention_backward):
    # The forward pass keeps log(sum_j e^score_ij) for the backward pass: the scores-in-memory
    # path takes it from the softmax's own pass over short rows (and from a logsumexp over long
    # ones), the fused kernel from its online softmax. A query that sees no key gets +inf.
    g = torch.Generator().manual_seed(keys)
    q, k, v = torch.randn(2, 3, 5, 8, generator=g), torch.randn(2, 3, keys, 8, generator=g), torch.randn(2, 3, keys, 4, generator=g)
    mask = torch.rand(5, keys, generator=g) > 0.3
    mask[2] = False
    scores = (q @ k.transpose(-2, -1) / 8 ** 0.5).masked_fill(~mask, float("-inf"))
    expected = scores.logsumexp(-1)
    expected[expected == float("-inf")] = float("inf")
    on = [t.to(dev, dtype) for t in (q, k, v)]
    if dtype not in xhal.torch.native_dtypes(dev):
        # F.scaled_dot_product_attention takes PyTorch's math path there; the fused entry
        # itself refuses, naming what it takes.
        with pytest.raises(RuntimeError, match="fused attention takes 4-dimensional query"):
            torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*on, mask.to(dev))
        return
    result = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*on, mask.to(dev))
    out, lse = result[0], result[1]
    assert lse.dtype == torch.float32 and lse.shape == (2, 3, 5)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(lse.cpu(), expected, atol=tolerance, rtol=tolerance)
    expected_out = torch.softmax(scores, -1).nan_to_num(0.0) @ v
    torch.testing.assert_close(out.float().cpu(), expected_out, atol=tolerance * 10, rtol=tolerance * 10)
    assert out.dtype == dtype
    no_fallbacks()


def test_attention_scores_limit_must_be_a_count(dev, monkeypatch):
    monkeypatch.setenv("XHAL_TORCH_ATTENTION_SCORES", "many")
    q = torch.randn(1, 2, 3, 4, device=dev)
    with pytest.raises(RuntimeError, match="XHAL_TORCH_ATTENTION_SCORES is 'many'; expected a count"):
        F.scaled_dot_product_attention(q, q, q)


@pytest.mark.parametrize("head, value", [(130, 6), (8, 140), (200, 257)])
def test_attention_with_heads_longer_than_a_sweep(dev, head, value, attention_backward):
    # The kernels hold 128 elements of a row at a time: longer heads (or values) take more
    # than one sweep over the keys, and the key/value gradients more than one pass.
    compare(dev, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), torch.randn(1, 2, 5, head),
            torch.randn(1, 2, 5, head), torch.randn(1, 2, 5, value))
    no_fallbacks()


@pytest.mark.parametrize("spatial", [(5, 5), (6, 7)], ids=["a channel by element", "a channel by runs"])
def test_batch_norm_updates_its_running_statistics(dev, spatial):
    cpu = nn.BatchNorm2d(3, momentum=0.3)
    on = nn.BatchNorm2d(3, momentum=0.3).to(dev)
    for _ in range(3):
        x = torch.randn(4, 3, *spatial) * 2 + 1
        compare(dev, lambda x, w, b: F.batch_norm(x, cpu.running_mean if x.is_cpu else on.running_mean,
                                                   cpu.running_var if x.is_cpu else on.running_var, w, b, True, 0.3),
                x, torch.randn(3), torch.randn(3))
    torch.testing.assert_close(on.running_mean.cpu(), cpu.running_mean)
    torch.testing.assert_close(on.running_var.cpu(), cpu.running_var)
    # Evaluation uses them.
    x = torch.randn(4, 3, *spatial)
    compare(dev, lambda x: F.batch_norm(x, cpu.running_mean if x.is_cpu else on.running_mean,
                                        cpu.running_var if x.is_cpu else on.running_var, training=False), x)
    no_fallbacks()


def test_instance_norm_updates_its_running_statistics(dev):
    cpu = nn.InstanceNorm1d(3, track_running_stats=True, affine=True)
    on = nn.InstanceNorm1d(3, track_running_stats=True, affine=True).to(dev)
    x = torch.randn(4, 3, 10)
    torch.testing.assert_close(on(x.to(dev)).cpu(), cpu(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(on.running_mean.cpu(), cpu.running_mean)
    torch.testing.assert_close(on.running_var.cpu(), cpu.running_var)
    no_fallbacks()


NORMS = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b), [(4, 5, 6), (6,), (6,)]),
    "layer_norm over two dimensions": (lambda x, w, b: F.layer_norm(x, (5, 6), w, b), [(4, 5, 6), (5, 6), (5, 6)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (6,), w, eps=1e-5), [(4, 5, 6), (6,)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(3, 4, 5, 2), (4,), (4,)]),
    "batch_norm 1d": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(8, 3), (3,), (3,)]),
    # Rows longer than a workgroup, by more than one step and not by a whole one: the loops
    # that run across the invocations, on rows of adjacent elements (every norm but batch
    # norm over more than one sample) and on strided ones.
    "layer_norm long rows": (lambda x, w, b: F.layer_norm(x, (1000,), w, b), [(3, 1000), (1000,), (1000,)]),
    "layer_norm long rows, no affine": (lambda x: F.layer_norm(x, (4099,)), [(2, 4099)]),
    "rms_norm long rows": (lambda x, w: F.rms_norm(x, (777,), w, eps=1e-5), [(2, 777), (777,)]),
    # The weight's and bias's gradients sum columns over the rows in parts: many short rows
    # (parts of 66, past one block of 64 staged rows), and rows across two column blocks.
    "layer_norm many rows": (lambda x, w, b: F.layer_norm(x, (8,), w, b), [(2100, 8), (8,), (8,)]),
    "rms_norm many rows": (lambda x, w: F.rms_norm(x, (300,), w, eps=1e-5), [(7, 100, 300), (300,)]),
    "group_norm long groups": (lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 30, 31), (4,), (4,)]),
    "batch_norm one sample": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                              [(1, 3, 40, 41), (3,), (3,)]),
    "batch_norm long channels": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                                 [(3, 2, 30, 31), (2,), (2,)]),
    # A channel of 32 or more adjacent elements a sample is walked a run at a time (RUNS):
    # runs shorter than the workgroup, and evaluation with running statistics.
    "batch_norm runs of 49": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                              [(4, 3, 7, 7), (3,), (3,)]),
    "batch_norm evaluation runs": (
        lambda x, w, b: F.batch_norm(x, torch.full((3,), -0.5, device=x.device), torch.full((3,), 3.0, device=x.device),
                                     w, b, training=False), [(5, 3, 8, 9), (3,), (3,)]),
    "batch_norm evaluation one sample": (
        lambda x, w, b: F.batch_norm(x, torch.full((3,), 0.5, device=x.device), torch.full((3,), 2.0, device=x.device),
                                     w, b, training=False), [(1, 3, 40, 41), (3,), (3,)]),
}


@pytest.mark.parametrize("name", NORMS)
def test_normalizations(dev, name):
    f, shapes = NORMS[name]
    compare(dev, f, *[torch.randn(s) for s in shapes])
    no_fallbacks()


def test_gather_and_scatter(dev):
    x = torch.randn(4, 5, 6)
    index = torch.randint(0, 5, (4, 3, 6))
    compare(dev, lambda x: torch.gather(x, 1, index.to(x.device)), x)
    distinct = torch.stack([torch.randperm(5)[:3] for _ in range(24)]).view(4, 6, 3).transpose(1, 2).contiguous()
    compare(dev, lambda x, s: x.scatter(1, distinct.to(x.device), s), x, torch.randn(4, 3, 6))
    compare(dev, lambda x, s: x.scatter_add(1, index.to(x.device), s), x, torch.randn(4, 3, 6))
    compare(dev, lambda x: x.scatter(2, index.to(x.device)[:, :, :2] % 6, 1.5), x)
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            compare(dev, lambda x, s: x.scatter_reduce(1, index.to(x.device), s, reduce, include_self=include_self),
                    x, torch.randn(4, 3, 6))
    integers = torch.randint(-100, 100, (4, 5))
    targets = torch.tensor([[1, 0, 3, 3, 2]])
    assert torch.equal(integers.to(dev).scatter_add(0, targets.to(dev), integers[:1].to(dev)).cpu(),
                       integers.scatter_add(0, targets, integers[:1]))
    no_fallbacks()


def test_index_add_copy_fill_and_select(dev):
    x = torch.randn(4, 5, 6)
    compare(dev, lambda x, s: x.index_add(1, torch.tensor([0, 2, 2, 4]).to(x.device), s, alpha=2.0), x,
            torch.randn(4, 4, 6))
    compare(dev, lambda x, s: x.index_copy(1, torch.tensor([4, 0]).to(x.device), s), x, torch.randn(4, 2, 6))
    compare(dev, lambda x: x.index_fill(2, torch.tensor([1, 3]).to(x.device), -2.0), x)
    compare(dev, lambda x: x.index_select(2, torch.tensor([5, 0, 5]).to(x.device)), x)
    no_fallbacks()


def test_advanced_indexing(dev):
    x = torch.randn(4, 5, 6)
    i, j = torch.tensor([1, 4]), torch.tensor([[0], [5]])
    compare(dev, lambda x: x[torch.tensor([2, 0, 3]).to(x.device)], x)
    compare(dev, lambda x: x[:, i.to(x.device), j.to(x.device)], x)
    compare(dev, lambda x: x[i.to(x.device) - 1, :, torch.tensor([0, 5]).to(x.device)], x)
    compare(dev, lambda x: x[torch.tensor([-1, 0]).to(x.device)], x)
    mask = torch.rand(4, 5) > 0.5
    compare(dev, lambda x: x[mask.to(x.device)], x)

    def put(x, v):
        y = x.clone()
        y[torch.tensor([0, 2]).to(x.device), torch.tensor([1, 3]).to(x.device)] = v
        return y

    compare(dev, put, x, torch.randn(2, 6))
    compare(dev, lambda x, v: x.index_put((torch.tensor([0, 2, 0]).to(x.device),), v, accumulate=True), x,
            torch.randn(3, 5, 6))
    no_fallbacks()


def test_index_errors_are_pytorch_s(dev):
    x = torch.randn(4, 5, device=dev)
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
        x[torch.tensor([9], device=dev)]
    with pytest.raises(IndexError, match="out of bounds"):
        torch.gather(x, 1, torch.tensor([[7]], device=dev))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([1, 2], device=dev) // torch.tensor([1, 0], device=dev)
    # The device stays usable.
    assert (x + 1).cpu().shape == (4, 5)


def test_scans(dev):
    x = torch.randn(4, 5, 6)
    for dim in range(3):
        compare(dev, lambda x: x.cumsum(dim), x)
        compare(dev, lambda x: x.cumprod(dim), x)
    compare(dev, lambda x: x.logcumsumexp(1), x)
    compare(dev, lambda x: x.cummax(1).values, x)
    compare(dev, lambda x: x.cummin(2).values, x)
    assert torch.equal(x.to(dev).cummax(1).indices.cpu(), x.cummax(1).indices)
    integers = torch.randint(-5, 5, (3, 7), dtype=torch.int32)
    assert torch.equal(integers.to(dev).cumsum(1).cpu(), integers.cumsum(1))
    flags = torch.rand(3, 7) > 0.5
    assert torch.equal(flags.to(dev).cumsum(0).cpu(), flags.cumsum(0))
    no_fallbacks()


def test_compactions(dev):
    x = torch.randn(4, 5, 6)
    assert torch.equal(x.gt(0).to(dev).nonzero().cpu(), x.gt(0).nonzero())
    assert torch.equal(torch.zeros(3, device=dev).nonzero().cpu(), torch.zeros(3).nonzero())
    mask = torch.rand(6) > 0.5
    compare(dev, lambda x: x.masked_select(mask.to(x.device)), x)
    no_fallbacks()


def test_sorts(dev):
    x = torch.randn(4, 5, 6)
    compare(dev, lambda x: x.sort(1).values, x)
    compare(dev, lambda x: x.sort(2, descending=True).values, x)
    compare(dev, lambda x: x.topk(3, 1).values, x)
    compare(dev, lambda x: x.topk(2, 2, largest=False).values, x)
    assert torch.equal(x.to(dev).sort(0).indices.cpu(), x.sort(0).indices)
    assert torch.equal(x.to(dev).argsort(1).cpu(), x.argsort(1))
    # Ties keep their order, and NaNs come last (first, descending), as on the CPU.
    ties = torch.tensor([3.0, float("nan"), 1.0, 3.0, -1.0, float("nan")])
    for descending in (False, True):
        assert torch.equal(ties.to(dev).sort(descending=descending, stable=True).indices.cpu(),
                           ties.sort(descending=descending, stable=True).indices)
    compare(dev, lambda x: x.flip(0, 2), x)
    compare(dev, lambda x: x.roll(2, 1), x)
    no_fallbacks()


UNARY = ["atan", "asin", "acos", "sinh", "cosh", "tan", "asinh", "atanh", "log1p", "expm1", "log2", "log10", "exp2",
         "floor", "ceil", "round", "trunc", "frac", "sign", "erf", "erfc", "lgamma", "digamma", "sigmoid"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_math(dev, name, dtype):
    if dtype not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{dev} has no {dtype} kernels")
    x = torch.linspace(-0.95, 0.95, 41, dtype=dtype) * (1 if name in ("asin", "acos", "atanh") else 4)
    if name in ("lgamma", "digamma"):
        x = x.abs() + 0.1
    f = getattr(torch, name)
    torch.testing.assert_close(f(x.to(dev)).cpu(), f(x), atol=1e-5, rtol=2e-5, equal_nan=True)
    no_fallbacks()


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "leaky_relu", "hardtanh", "relu6", "softplus", "mish",
                                  "hardsigmoid", "hardswish", "logsigmoid", "softshrink", "hardshrink"])
def test_activations(dev, name):
    compare(dev, getattr(F, name), torch.linspace(-4, 4, 37))
    no_fallbacks()


@pytest.mark.parametrize("op", ["all", "any"])
def test_truth_reductions(dev, op):
    x = torch.rand(5, 7) > 0.3
    for args in [(), (0,), (1,)]:
        assert torch.equal(getattr(x.to(dev), op)(*args).cpu(), getattr(x, op)(*args))
    no_fallbacks()


def test_float_tests(dev):
    x = torch.tensor([1.0, float("inf"), float("-inf"), float("nan"), -0.0])
    for op in (torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite, torch.isnan, torch.signbit):
        assert torch.equal(op(x.to(dev)).cpu(), op(x)), op.__name__
    no_fallbacks()
