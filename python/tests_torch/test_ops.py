"""The operators with xhal kernels give the CPU's answers, with broadcasting and any strides,
and run without falling back; misuse raises PyTorch's usual errors."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import xhal.torch


def both(*tensors):
    return [t.to("xhal:0") for t in tensors], list(tensors)


def close(got, expected, rtol=1e-5, atol=1e-5):
    assert got.device.type == "xhal"
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)


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


@pytest.mark.parametrize("inner", [3, 4, 16, 63, 64, 65, 200])
def test_strided_operands_in_runs_of_the_innermost_dimension(dev, inner):
    # A CPU device runs strided elementwise operations a run of up to 64 elements of the
    # innermost dimension an invocation (elementwise.wgsl's strided_runs) where that dimension
    # holds 4 or more (3: one an invocation): rows on and off the run's length, permuted, broadcast, sliced and offset operands, every kind of element
    # (bool bytes, bfloat16 halves, integers), and in place.
    g = torch.Generator().manual_seed(inner)
    x = torch.randn(3, 4, inner, generator=g)
    y = torch.randn(4, 3, inner, generator=g)
    bias = torch.randn(3, 4, 1, generator=g)
    wide = torch.randn(3, 4, 2 * inner + 1, generator=g)
    dx, dy, dbias, dwide = (t.to(dev) for t in (x, y, bias, wide))
    close(dx.permute(1, 0, 2).contiguous(), x.permute(1, 0, 2).contiguous(), rtol=0, atol=0)
    close(dx + dy.transpose(0, 1), x + y.transpose(0, 1))
    close(dx * dbias, x * bias)
    close(dwide[:, :, 1::2] - dx, wide[:, :, 1::2] - x)
    close(dx[1:, 1:, 3:] * 2 + 1, x[1:, 1:, 3:] * 2 + 1)  # starts inside its storage
    close(dx.transpose(1, 2).contiguous().transpose(1, 2) + 1, x + 1)  # innermost stride not 1
    close(dx.permute(1, 0, 2) > 0, x.permute(1, 0, 2) > 0)
    close(torch.where(dx > 0, dy.transpose(0, 1), dx), torch.where(x > 0, y.transpose(0, 1), x))
    close(dx.bfloat16().permute(1, 0, 2) * 3, x.bfloat16().permute(1, 0, 2) * 3, rtol=0, atol=0)
    close(dx.half().permute(1, 0, 2).float(), x.half().permute(1, 0, 2).float(), rtol=0, atol=0)
    ints = (x * 100).int()
    close(ints.to(dev).permute(1, 0, 2) // 7, ints.permute(1, 0, 2) // 7, rtol=0, atol=0)
    close((dx > 0).permute(1, 0, 2).logical_and(dy > 0), (x > 0).permute(1, 0, 2).logical_and(y > 0))
    inplace, expected = dx.clone(), x.clone()
    inplace.add_(dy.transpose(0, 1), alpha=2)
    expected.add_(y.transpose(0, 1), alpha=2)
    close(inplace, expected)
    view, expected_view = dwide.clone(), wide.clone()
    view[:, :, ::2].mul_(dbias)  # writes a strided view of its own memory
    expected_view[:, :, ::2].mul_(bias)
    close(view, expected_view)
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


@pytest.mark.parametrize("shape", [(6, 5, 40), (3, 4, 300), (2, 3, 17, 33)])
def test_sums_over_samples_and_positions(dev, shape):
    # A convolution's bias gradient: a sum over the first dimension and the adjacent last ones,
    # which a workgroup per output walks run by run; runs shorter than, longer than and not a
    # multiple of the workgroup, sums and means, integers, and a view.
    g = torch.Generator().manual_seed(len(shape) * 100 + shape[-1])
    x = torch.randn(*shape, generator=g)
    dims = [0] + list(range(2, len(shape)))
    close(x.to(dev).sum(dims), x.sum(dims), rtol=1e-5, atol=1e-4)
    close(x.to(dev).mean(dims), x.mean(dims), rtol=1e-5, atol=1e-5)
    ints = torch.randint(-50, 50, shape, generator=g)
    close(ints.to(dev).sum(dims), ints.sum(dims))
    close(x.to(dev)[1:].sum(dims), x[1:].sum(dims), rtol=1e-5, atol=1e-4)
    no_fallbacks()


@pytest.mark.parametrize("shape, dims", [((70001,), None), ((3, 40000), (1,)), ((40000, 3), (0,)), ((2, 3, 20000), (0, 2)),
                                         ((65536,), None), ((5, 8, 4096), None), ((1052675,), None),
                                         ((2, 600001), (1,))])
def test_long_reductions_in_parts(dev, shape, dims):
    # Few outputs of at least 32768 elements each are reduced in parts (a workgroup each),
    # then merged: the parts' edges, a tail past the last whole step, strided and offset inputs.
    # The last two need more parts than a CPU device takes (64), so its parts are longer and
    # not whole steps.
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(*shape, generator=g)
    def each(t):
        yield t
        yield t.flatten()[1:].reshape(-1) if dims is None else t.narrow(-1, 1, t.shape[-1] - 1)
        yield t.transpose(0, -1) if t.dim() > 1 else t[::3]
    for got_in, expected_in in zip(each(x.to(dev)), each(x)):
        reduce_dims = dims if dims is None or got_in.dim() == len(shape) else None
        for name in ("sum", "mean", "amax", "amin"):
            got = getattr(got_in, name)(dim=reduce_dims) if reduce_dims is not None else getattr(got_in, name)()
            expected = getattr(expected_in, name)(dim=reduce_dims) if reduce_dims is not None else getattr(expected_in, name)()
            close(got, expected, rtol=1e-4, atol=1e-3)
    flat = x.flatten()
    flat[len(flat) // 2] = flat.max() + 1
    flat[len(flat) - 3] = flat.max()  # a tie in a later part: the first index wins
    close(flat.to(dev).argmax(), flat.argmax())
    close(flat.to(dev).max(0).indices, flat.max(0).indices)
    flat[7777] = float("nan")
    close(flat.to(dev).max(), flat.max())
    close(flat.to(dev).argmin(), flat.argmin())
    ints = torch.randint(-1000, 1000, shape, generator=g)
    close(ints.to(dev).sum(), ints.sum())
    truth = ints > 990
    close(truth.to(dev).any(), truth.any())
    close(truth.to(dev).all(), truth.all())
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


@pytest.mark.parametrize("m, n, k", [(1, 70, 33), (70, 1, 33), (63, 65, 1), (64, 64, 16), (65, 130, 17), (130, 63, 100),
                                     (5, 7, 0)])
def test_matrix_products_of_every_edge(dev, m, n, k):
    # The tiled kernel's 64x64 blocks and 16-deep steps, with shapes on both sides of each
    # edge; operands transposed and broadcast through strides; a bias scaled by beta.
    g = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    close(a.to(dev) @ b.to(dev), a @ b, rtol=1e-4, atol=1e-4)
    transposed_a = a.t().contiguous().to(dev).t()  # a, read column by column
    close(transposed_a @ b.to(dev), a @ b, rtol=1e-4, atol=1e-4)
    close(torch.addmm(bias.to(dev), a.to(dev), b.t().contiguous().to(dev).t(), beta=0.5, alpha=-2),
          torch.addmm(bias, a, b, beta=0.5, alpha=-2), rtol=1e-4, atol=1e-4)
    batch_a = torch.randn(3, m, k, generator=g)
    broadcast_b = b.expand(3, k, n)
    close(torch.bmm(batch_a.to(dev), broadcast_b.to(dev)), torch.bmm(batch_a, broadcast_b), rtol=1e-4, atol=1e-4)
    close(torch.baddbmm(bias.to(dev), batch_a.to(dev), broadcast_b.to(dev), beta=2, alpha=0.5),
          torch.baddbmm(bias, batch_a, broadcast_b, beta=2, alpha=0.5), rtol=1e-4, atol=1e-4)
    for dtype, tolerance in ((torch.float16, 2e-2), (torch.float64, 1e-10)):
        if dtype not in xhal.torch.native_dtypes(dev):
            continue
        close((a.to(dev, dtype) @ b.to(dev, dtype)), (a.to(dtype).double() @ b.to(dtype).double()).to(dtype),
              rtol=tolerance, atol=tolerance)
    no_fallbacks()


def operand_laid_out(t, layout, dev):
    """`t` on `dev` with its last dimension adjacent in memory ("rows"), its first one
    ("columns", a transposed tensor's layout), or neither (every other element of a wider
    tensor)."""
    if layout == "rows":
        return t.to(dev)
    if layout == "columns":
        return t.t().contiguous().to(dev).t()
    wide = torch.zeros(t.shape[0], 2 * t.shape[1])
    wide[:, ::2] = t
    return wide.to(dev)[:, ::2]


@pytest.mark.parametrize("a_layout", ["rows", "columns", "neither"])
@pytest.mark.parametrize("b_layout", ["rows", "columns", "neither"])
def test_matrix_products_read_operands_in_every_layout(dev, a_layout, b_layout):
    # The tiled kernel stages each operand along whichever dimension is adjacent in memory;
    # shapes with whole 64x64 blocks, edge blocks and a partial last depth step.
    g = torch.Generator().manual_seed(7)
    a, b = torch.randn(130, 50, generator=g), torch.randn(50, 140, generator=g)
    a_dev, b_dev = operand_laid_out(a, a_layout, dev), operand_laid_out(b, b_layout, dev)
    close(a_dev @ b_dev, a @ b, rtol=1e-4, atol=1e-4)
    bias = torch.randn(140, generator=g)
    close(torch.addmm(bias.to(dev), a_dev, b_dev, beta=-1, alpha=3), torch.addmm(bias, a, b, beta=-1, alpha=3),
          rtol=1e-4, atol=1e-4)
    # bfloat16 operands accumulate in f32 and round once.
    close(a_dev.bfloat16() @ b_dev.bfloat16(), (a.bfloat16().float() @ b.bfloat16().float()).bfloat16(),
          rtol=1e-2, atol=1e-2)
    no_fallbacks()


TILED_PRODUCTS = textwrap.dedent(
    """
    import sys, torch, xhal.torch
    g = torch.Generator().manual_seed(17)
    a, b = torch.randn(130, 70, generator=g), torch.randn(70, 150, generator=g)
    bias = torch.randn(150, generator=g)
    batch = torch.randn(3, 20, 70, generator=g)
    results = [
        a.to("xhal") @ b.to("xhal"),
        a.t().contiguous().to("xhal").t() @ b.t().contiguous().to("xhal").t(),
        torch.addmm(bias.to("xhal"), a.to("xhal"), b.to("xhal"), beta=0.5, alpha=-2),
        torch.bmm(batch.to("xhal"), b.expand(3, 70, 150).to("xhal")),
        (a.to("xhal", torch.bfloat16) @ b.to("xhal", torch.bfloat16)).float(),
    ]
    torch.save([r.cpu() for r in results], sys.argv[1])
    """
)


def same_under_each_setting(tmp_path, script, variable, values):
    """Runs `script` (which saves its results to argv[1]) in a fresh process for each value of
    environment `variable`, as a tuning choice holds for a process; asserts that every run's
    results are the same bit for bit, and returns the first run's."""
    outputs = []
    for value in values:
        path = tmp_path / f"{variable}-{value}.pt"
        result = subprocess.run([sys.executable, "-c", script, str(path)], env=dict(os.environ, **{variable: value}),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        outputs.append(torch.load(path))
    for other in outputs[1:]:
        for first, again in zip(outputs[0], other):
            assert torch.equal(first, again)
    return outputs[0]


def test_both_tiled_kernels_give_the_same_products(dev, tmp_path):
    # matmul.wgsl has two tiled kernels, and a tuning pass picks one per device on first use:
    # whichever it picks, every product is the same bit for bit.
    products = same_under_each_setting(tmp_path, TILED_PRODUCTS, "XHAL_TORCH_MATMUL_TILES",
                                       ("interleaved", "contiguous"))
    g = torch.Generator().manual_seed(17)
    a, b = torch.randn(130, 70, generator=g), torch.randn(70, 150, generator=g)
    torch.testing.assert_close(products[0], a @ b, rtol=1e-4, atol=1e-4)


FIRST_PRODUCT = "import torch, xhal.torch\nprint((torch.ones(70, 70, device='xhal') @ torch.ones(70, 70, device='xhal')).cpu()[0, 0].item())"


def test_tuning_choice_is_kept_per_device_and_xhal_version(dev, tmp_path):
    # The tiled kernel a tuning pass picks is kept on disk, so a later process on the same
    # device and xhal version starts without timing; another version's line is not used; a
    # damaged file costs a pass, and a file others may write is not used at all, with one
    # warning.
    cache = tmp_path / "cache" / "tuning.tsv"
    environment = {key: value for key, value in os.environ.items() if key != "XHAL_TORCH_MATMUL_TILES"}
    environment.update(XHAL_TORCH_TUNING_CACHE=str(cache), XHAL_LOG="info")

    def first_product():
        result = subprocess.run([sys.executable, "-W", "always", "-c", FIRST_PRODUCT], env=environment,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "70.0"
        return result.stderr

    assert "tiled kernel (tuned:" in first_product()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    (line,) = cache.read_text().splitlines()
    version, identity, question, answer = line.split("\t")
    assert version == xhal.__version__
    assert identity.split("|")[0] == xhal.torch.devices()[0]["label"].split(":")[0]
    assert question.startswith("matmul tiles|matmul.wgsl|") and answer in ("interleaved", "contiguous")
    assert "(from the tuning cache)" in first_product()
    # The cache's answer is the one used, even where it is not the faster.
    other = "contiguous" if answer == "interleaved" else "interleaved"
    cache.write_text("\t".join([version, identity, question, other]) + "\n")
    assert f"with the {other} tiled kernel (from the tuning cache)" in first_product()
    # Another xhal version's choice is kept in the file and not used here.
    cache.write_text("\t".join(["0.0.0-other", identity, question, other]) + "\n")
    assert "tiled kernel (tuned:" in first_product()
    assert len(cache.read_text().splitlines()) == 2
    cache.write_text("not\ta cache\n\x00\xff")
    assert "tiled kernel (tuned:" in first_product()
    cache.chmod(0o620)
    stderr = first_product()
    assert "tiled kernel (tuned:" in stderr
    assert f"the tuning cache is not used, because {cache} may be written by others (mode 620)" in stderr
    cache.chmod(0o600)
    cache.parent.chmod(0o777)
    try:
        assert f"because {cache.parent} may be written by others (mode 777)" in first_product()
    finally:
        cache.parent.chmod(0o700)
    environment["XHAL_TORCH_TUNING_CACHE"] = str(tmp_path / "elsewhere" / "tuning.tsv")
    environment["XHAL_TORCH_MATMUL_TILES"] = "contiguous"
    assert "tiled kernel" not in first_product()  # a fixed kernel: no pass, nothing kept
    assert not (tmp_path / "elsewhere").exists()


FLAT_OPERATIONS = textwrap.dedent(
    """
    import sys, torch, xhal.torch
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(70001, generator=g), torch.randn(70001, generator=g)
    dx, dy = x.to("xhal"), y.to("xhal")
    inplace = dx.clone()
    inplace.mul_(dy).add_(1.5)
    results = [dx + dy, dx * 2 + 1, torch.addcmul(dx, dy, dx, value=0.5), dx.exp(), torch.where(dx > 0, dx, dy),
               (dx * 100).int() // 7, (dx > dy).float(), dx[3:].sigmoid(), dx.half() * 3, inplace]
    torch.save([r.cpu() for r in results], sys.argv[1])
    """
)


def test_flat_elementwise_runs_give_the_same_results_and_are_tuned(dev, tmp_path):
    # Flat elementwise operations run an element an invocation or, where a tuning pass finds
    # it faster (devices slow to start workgroups), 16 (`main_runs`): the results are the same
    # bit for bit, the pass's answer is kept in the tuning cache, and a bad setting is an error.
    results = same_under_each_setting(tmp_path, FLAT_OPERATIONS, "XHAL_TORCH_ELEMENTWISE_RUNS", ("off", "on"))
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(70001, generator=g), torch.randn(70001, generator=g)
    torch.testing.assert_close(results[1], x * 2 + 1)
    cache = tmp_path / "cache" / "tuning.tsv"
    environment = {key: value for key, value in os.environ.items() if key != "XHAL_TORCH_ELEMENTWISE_RUNS"}
    environment.update(XHAL_TORCH_TUNING_CACHE=str(cache), XHAL_LOG="info")
    script = "import torch, xhal.torch\nprint((torch.ones(5, device='xhal') + 1).cpu().sum().item())"
    for expected in ("(tuned:", "(from the tuning cache)"):
        result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0 and result.stdout.strip() == "10.0", result.stderr
        assert "flat elementwise operations" in result.stderr and expected in result.stderr, result.stderr
    assert any(line.split("\t")[2].startswith("elementwise runs|elementwise.wgsl|")
               for line in cache.read_text().splitlines())
    environment["XHAL_TORCH_ELEMENTWISE_RUNS"] = "sometimes"
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode != 0
    assert "XHAL_TORCH_ELEMENTWISE_RUNS is 'sometimes'; expected on or off" in result.stderr


def test_matrix_tiles_setting_must_name_a_kernel(dev):
    environment = dict(os.environ, XHAL_TORCH_MATMUL_TILES="fastest")
    script = "import torch, xhal.torch\n(torch.ones(70, 70, device='xhal') @ torch.ones(70, 70, device='xhal')).cpu()"
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert "XHAL_TORCH_MATMUL_TILES is 'fastest'; expected interleaved or contiguous" in result.stderr


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_softmax_family_long_rows(dev, dtype):
    """Rows of 256 elements or more whose elements are adjacent take a workgroup each
    (softmax.wgsl's `_wide` entry points): lengths on and off the workgroup's 256, a row
    holding infinities and one holding a NaN, a view that starts inside its storage, and
    both backward passes."""
    if dtype == torch.float64 and torch.float64 not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{dev} does not claim f64")
    g = torch.Generator().manual_seed(11)
    # A half-precision gradient, y (g - sum(g y)), cancels: a few of its last places differ
    # with the order of the sum.
    precise = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}.get(
        dtype, dict(rtol=1e-5, atol=1e-6))
    for rows, length in ((3, 256), (5, 1000), (2, 4099)):
        x = (torch.randn(rows + 1, length, generator=g) * 5).to(dtype)
        x[0, 7] = float("inf")
        x[rows, 3] = float("nan")
        view = x[1:]  # starts one row into its storage
        for f in (torch.softmax, torch.log_softmax):
            close(f(view.to(dev), -1), f(view.float(), -1).to(dtype), **precise)
            close(f(x.to(dev), -1), f(x.float(), -1).to(dtype), **precise)
            leaf = view.to(dev).requires_grad_()
            expected_leaf = view.clone().requires_grad_()
            grad = torch.randn(view.shape, generator=g).to(dtype)
            f(leaf, -1).backward(grad.to(dev))
            f(expected_leaf, -1).backward(grad)
            close(leaf.grad, expected_leaf.grad, **precise)
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


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradients(dev, reduction):
    # nll_loss's backward pass: 64 classes a workgroup and a sample a row of workgroups, with
    # more classes than one workgroup holds, class weights and an ignored target.
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(7, 130, generator=g)
    target = torch.randint(0, 130, (7,), generator=g)
    target[2] = -100
    weight = torch.rand(130, generator=g) + 0.5
    grads = []
    for where in ("cpu", dev):
        x = logits.to(where, copy=True).requires_grad_()
        loss = F.cross_entropy(x, target.to(where), weight=weight.to(where), reduction=reduction)
        loss.backward(torch.linspace(0.5, 2, loss.numel()).reshape(loss.shape).to(where))
        grads.append(x.grad)
    close(grads[1], grads[0], atol=1e-6)
    no_fallbacks()


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
def test_embedding_gradients(dev, index_dtype):
    # Each weight row sums the gradient rows of its indices (found in a stable sort of them):
    # repeated indices, rows no index names, a padding row, indices in two dimensions, and a
    # row wider than a workgroup.
    g = torch.Generator().manual_seed(13)
    for rows, width, padding in ((50, 8, None), (7, 130, 3)):
        ids = torch.randint(0, rows, (6, 45), generator=g).to(index_dtype)
        ids[0, :10] = rows - 1
        grads = []
        for where in ("cpu", dev):
            table = torch.randn(rows, width, generator=torch.Generator().manual_seed(rows)).to(where).requires_grad_()
            out = F.embedding(ids.to(where), table, padding_idx=padding)
            out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(where))
            grads.append(table.grad)
        close(grads[1], grads[0], atol=1e-5)
    no_fallbacks()


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


COMPARISONS = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("op", range(len(COMPARISONS)))
def test_comparisons_give_bool(dev, op):
    f = COMPARISONS[op]
    a = torch.tensor([[1.0, 2.0, float("nan"), -0.0], [3.0, -1.0, 2.0, float("inf")], [0.5, 2.0, 7.0, 1.0]])
    b = torch.tensor([1.0, 3.0, float("nan"), 0.0])
    close(f(a.to(dev), b.to(dev)), f(a, b))
    close(f(a.to(dev).t(), 2.0), f(a.t(), 2.0))
    ints = torch.arange(-5, 6, dtype=torch.int32)
    close(f(ints.to(dev), 0.5), f(ints, 0.5))  # compared as floats, as PyTorch promotes
    close(f(ints.to(dev), ints.flip(0).to(dev)), f(ints, ints.flip(0)))
    no_fallbacks()


def test_bool_results_at_every_byte_offset(dev):
    # A bool is a byte; a kernel writes whole words, so the bytes around a view must survive.
    a, b = torch.randn(13), torch.randn(13)
    for start in range(4):
        for stop in (start + 1, start + 5, 13):
            out = torch.tensor([True, False] * 8).to(dev)
            expected = torch.tensor([True, False] * 8)
            torch.gt(a[start:stop].to(dev), b[start:stop].to(dev), out=out[start:stop])
            expected[start:stop] = a[start:stop] > b[start:stop]
            close(out, expected)
    no_fallbacks()


def test_logic_where_clamp_pow_and_triangles(dev):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(5, 6, generator=g)
    x[1, 2] = float("nan")
    p, q = x > 0, x.abs() < 0.7
    close(~p.to(dev), ~p)
    close(p.to(dev) & q.to(dev), p & q)
    close(p.to(dev) | q.to(dev), p | q)
    close(p.to(dev) ^ q.to(dev), p ^ q)
    close(torch.logical_and(p.to(dev), q.to(dev)), torch.logical_and(p, q))
    ones, twos = torch.ones(5, dtype=torch.int32), torch.full((5,), 3, dtype=torch.int32)
    close(ones.to(dev) & twos.to(dev), ones & twos)
    close(ones.to(dev) ^ twos.to(dev), ones ^ twos)
    close(~twos.to(dev), ~twos)
    close(torch.where(p.to(dev), x.to(dev), -x.to(dev) * 2), torch.where(p, x, -x * 2))
    close(torch.where(p.to(dev)[0], x.to(dev), 0.0), torch.where(p[0], x, 0.0))
    close(x.to(dev).clamp(-0.5, 0.5), x.clamp(-0.5, 0.5))
    close(x.to(dev).clamp(min=0.1), x.clamp(min=0.1))
    close(x.to(dev).clamp(max=-0.1), x.clamp(max=-0.1))
    for e in (2, 3, 0.5, -1, 4, -3, 1.7):
        close(x.to(dev) ** e, x ** e, rtol=2e-5, atol=2e-6)
    for k in (-2, 0, 1, 4):
        close(x.to(dev).triu(k), x.triu(k))
        close(x.to(dev).tril(k), x.tril(k))
        close(p.to(dev).triu(k), p.triu(k))
    stacked = torch.randn(2, 3, 4, generator=g)
    close(stacked.to(dev).triu(1), stacked.triu(1))
    close(torch.ones(7, 7, dtype=torch.bool, device=dev).triu(1), torch.ones(7, 7, dtype=torch.bool).triu(1))
    no_fallbacks()


def test_max_min_and_arg_reductions(dev):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(4, 5, 6, generator=g)
    x[0, 3, 0] = x[0, 1, 0]  # a tie: the first index wins, as on the CPU
    close(x.to(dev).max(), x.max())
    close(x.to(dev).min(), x.min())
    for dim in (0, 1, -1):
        for keep in (False, True):
            got, expected = x.to(dev).max(dim, keepdim=keep), x.max(dim, keepdim=keep)
            close(got.values, expected.values)
            close(got.indices, expected.indices)
            got, expected = x.to(dev).min(dim, keepdim=keep), x.min(dim, keepdim=keep)
            close(got.values, expected.values)
            close(got.indices, expected.indices)
            close(x.to(dev).argmax(dim, keepdim=keep), x.argmax(dim, keepdim=keep))
            close(x.to(dev).argmin(dim, keepdim=keep), x.argmin(dim, keepdim=keep))
    close(x.to(dev).argmax(), x.argmax())
    close(x.to(dev).amax((0, 2)), x.amax((0, 2)))
    close(x.to(dev).amin(-1, keepdim=True), x.amin(-1, keepdim=True))
    close(x.to(dev).transpose(0, 2).max(1).values, x.transpose(0, 2).max(1).values)
    with_nan = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, -1.0, 0.0]])
    close(with_nan.to(dev).max(1).values, with_nan.max(1).values)
    close(with_nan.to(dev).max(1).indices, with_nan.max(1).indices)
    close(with_nan.to(dev).argmin(1), with_nan.argmin(1))
    ints = torch.tensor([[3, -7, 9], [9, 2, -7]], dtype=torch.int32)
    close(ints.to(dev).max(1).values, ints.max(1).values)
    close(ints.to(dev).argmin(0), ints.argmin(0))
    no_fallbacks()
    with pytest.raises((RuntimeError, IndexError)):
        torch.empty(0, 3, device=dev).max(0)


DTYPES = [torch.float16, torch.float64, torch.int32, torch.int64, torch.bool]


def ulps_apart(got, expected):
    """How many units in the last place of `expected` separate the two, elementwise; infinities
    and NaN must match exactly (0 where they do, inf where they do not)."""
    got, expected = got.cpu(), expected.cpu()
    finite = torch.isfinite(expected)
    same_special = (got == expected) | (torch.isnan(got) & torch.isnan(expected))
    spacing = torch.nextafter(expected.abs(), torch.tensor(float("inf"), dtype=expected.dtype)) - expected.abs()
    apart = ((got - expected).abs() / spacing).where(finite, torch.zeros_like(expected))
    return apart.where(finite | same_special, torch.full_like(expected, float("inf")))


def test_f64_transcendental_functions_are_native_and_within_a_few_ulp_over_their_whole_range(dev):
    """WGSL has no f64 exp, log, tanh or erf: kernels that compute in f64 carry their own
    (kF64Math in kernels.cpp). They must hold to the CPU's answer within 3 ulp (erf 6) from
    underflow to overflow, subnormals, zeros, infinities and NaN included, and the operations
    built on them (sigmoid, silu, gelu, softmax, log-softmax, the activations' backward) must
    run natively."""
    if torch.float64 not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{dev} does not claim f64 (with the 64-bit integers its kernels need)")
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-17, -1e-17, 1e-300, 5e-324, -5e-324, 709.78, 709.8, -745.13, -745.2,
               -708.4, 2.2250738585072014e-308, float("inf"), float("-inf"), float("nan")]
    x = torch.cat([torch.linspace(-746, 710, 6001, dtype=torch.float64), torch.tensor(special, dtype=torch.float64)])
    worst = ulps_apart(torch.exp(x.to(dev)), torch.exp(x)).max().item()
    assert worst <= 3, f"exp is {worst} ulp from the CPU's"
    positive = torch.cat([torch.logspace(-323, 308, 6001, dtype=torch.float64),
                          torch.linspace(0.5, 2, 3001, dtype=torch.float64),
                          torch.tensor([1 - 2**-53, 1 + 2**-52, 2**0.5, 2**-0.5], dtype=torch.float64),
                          torch.tensor(special, dtype=torch.float64)])
    worst = ulps_apart(torch.log(positive.to(dev)), torch.log(positive)).max().item()
    assert worst <= 3, f"log is {worst} ulp from the CPU's"
    worst = ulps_apart(torch.tanh(x.to(dev)), torch.tanh(x)).max().item()
    assert worst <= 3, f"tanh is {worst} ulp from the CPU's"
    small = torch.cat([torch.logspace(-300, 0, 3001, dtype=torch.float64), -torch.logspace(-300, 0, 3001, dtype=torch.float64)])
    worst = ulps_apart(torch.tanh(small.to(dev)), torch.tanh(small)).max().item()
    assert worst <= 3, f"tanh is {worst} ulp from the CPU's near 0"
    g = torch.Generator().manual_seed(5)
    y = torch.randn(5, 33, generator=g, dtype=torch.float64) * 30
    precise = dict(rtol=1e-13, atol=1e-300)
    close(torch.sigmoid(y.to(dev)), torch.sigmoid(y), **precise)
    close(F.silu(y.to(dev)), F.silu(y), **precise)
    # gelu: where 1 + tanh(...) or 1 + erf(x / sqrt(2)) cancels, both sides lose the same bits.
    close(F.gelu(y.to(dev), approximate="tanh"), F.gelu(y, approximate="tanh"), rtol=1e-13, atol=1e-15)
    close(F.gelu(y.to(dev)), F.gelu(y), rtol=1e-13, atol=1e-15)
    worst = ulps_apart(torch.erf(x.to(dev)), torch.erf(x)).max().item()
    assert worst <= 6, f"erf is {worst} ulp from the CPU's"
    close(torch.rsqrt(y.abs().to(dev)), torch.rsqrt(y.abs()), **precise)
    for activation in (torch.relu, torch.sigmoid, torch.tanh, F.silu, F.gelu):
        leaf = (y / 10).to(dev).requires_grad_()
        activation(leaf).backward(torch.ones_like(leaf))
        expected_leaf = (y / 10).requires_grad_()
        activation(expected_leaf).backward(torch.ones_like(expected_leaf))
        # tanh's 1 - t^2 cancels where t is near 1: an ulp of t there is 1e-16 of the result.
        close(leaf.grad, expected_leaf.grad, rtol=1e-12, atol=1e-15)
    close(torch.softmax(y.to(dev), 1), torch.softmax(y, 1), **precise)
    close(torch.log_softmax(y.to(dev), 0), torch.log_softmax(y, 0), **precise)
    leaf = y.to(dev).requires_grad_()
    torch.log_softmax(leaf, 1).sum().backward()
    expected_leaf = y.clone().requires_grad_()
    torch.log_softmax(expected_leaf, 1).sum().backward()
    close(leaf.grad, expected_leaf.grad, rtol=1e-12, atol=1e-12)
    no_fallbacks()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_the_device_claims(dev, dtype):
    """Arithmetic, comparisons, reductions, copies and conversions in each dtype: with kernels
    where the device claims the dtype, through the CPU (counted) where it does not, and the
    CPU's answers either way."""
    native = dtype in xhal.torch.native_dtypes(dev)
    g = torch.Generator().manual_seed(13)
    base = torch.randn(6, 7, generator=g) * 8
    x = base.to(dtype)
    y = (base.flip(0) * 0.5).to(dtype)
    xd, yd = x.to(dev), y.to(dev)
    tolerance = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float16 else {}
    if dtype != torch.bool:
        close(xd + yd, x + y, **tolerance)
        close(xd - yd * 3, x - y * 3, **tolerance)
        close(xd * yd.t().t(), x * y, **tolerance)
        close(torch.maximum(xd, yd), torch.maximum(x, y))
        close(-xd, -x)
        close(xd.abs(), x.abs())
        close(xd.sum(1), x.sum(1), rtol=1e-2 if dtype == torch.float16 else 1e-5, atol=1e-2)
        close(xd.max(0).values, x.max(0).values)
        close(xd.argmax(1), x.argmax(1))
        close(torch.arange(-3, 9, 2, dtype=dtype, device=dev), torch.arange(-3, 9, 2, dtype=dtype))
    if dtype.is_floating_point:
        close(xd / (yd.abs() + 1), x / (y.abs() + 1), **tolerance)
        close(xd.mean(0), x.mean(0), rtol=1e-2 if dtype == torch.float16 else 1e-5, atol=1e-2)
        close(xd @ yd.t(), x @ y.t(), rtol=1e-2 if dtype == torch.float16 else 1e-6, atol=1e-1 if dtype == torch.float16 else 1e-6)
        softmax_tolerance = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float16 else dict(rtol=1e-12, atol=1e-14)
        close(torch.softmax(xd / 8, -1), torch.softmax(x / 8, -1), **softmax_tolerance)
        close(torch.log_softmax(xd / 8, 0), torch.log_softmax(x / 8, 0), **softmax_tolerance)
        # A transformer block's layer norm, loss and embedding, forward and backward.
        loose = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else dict(rtol=1e-10, atol=1e-10)
        weight, bias = (torch.randn(7, generator=g) + 1).to(dtype), torch.randn(7, generator=g).to(dtype)
        targets, rows = torch.tensor([0, 6, 3, 3, 1, 5]), torch.tensor([[5, 0], [5, 2]])
        results = []
        for device in (dev, "cpu"):
            leaves = [t.to(device).requires_grad_() for t in (x / 8, weight, bias)]
            normed = F.layer_norm(leaves[0], (7,), leaves[1], leaves[2])
            loss = F.cross_entropy(normed, targets.to(device)) + F.embedding(rows.to(device), normed).sum() / 4
            loss.backward()
            results.append([normed, loss] + [leaf.grad for leaf in leaves])
        for got, expected in zip(*results):
            close(got.detach(), expected.detach(), **loose)
    rows = torch.tensor([5, 0, 5, 2])  # gathered, as an embedding does
    close(xd.index_select(0, rows.to(dev)), x.index_select(0, rows))
    close(xd > yd, x > y)
    close(xd == xd.t().t(), x == x)
    close(xd.triu(1), x.triu(1))
    close(torch.where(xd > yd, xd, yd), torch.where(x > y, x, y))
    # Conversions, both ways, on the device.
    for other in (torch.float32, torch.int32, torch.bool):
        close(xd.to(other), x.to(other))
        close(xd.to(other).to(dtype), x.to(other).to(dtype))
    strided = torch.zeros(6, 14, dtype=dtype, device=dev)[:, ::2]
    strided.copy_(xd)
    close(strided, x)
    counts = xhal.torch.fallback_counts()
    # Sums of int32 and argmax give int64, which needs the device's i64 too.
    if native and (dtype != torch.int32 or torch.int64 in xhal.torch.native_dtypes(dev)):
        assert counts == {}, f"{dtype} is native on {dev} but fell back: {counts}"
    elif dtype != torch.float16:
        assert counts, f"{dtype} is not native on {dev}, yet nothing fell back"
    # float16 on a device without f16 runs in f32 on the device wherever the operator has a
    # kernel (bfloat16_ops.cpp), and may then fall back nowhere: the results above are what
    # is checked.
