"""Random numbers, in the manner of PyTorch's OpenReg RNG tests: the generator (seeds, state,
fork_rng), each random operator's distribution and arguments, dropout forward and backward,
and the same bits on every xhal device for a seed: uniform and integer draws against a
Python model of the generator, every other draw against the digests the cpu device gives."""

import hashlib
import math

import pytest
import torch

import xhal.torch

# --- A model of the generator: Philox4x32-10, as kernels/random.wgsl computes it -----------------

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF


def philox(counter, key):
    c = list(counter)
    k = list(key)
    for _ in range(10):
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
        k = [(k[0] + W0) & MASK, (k[1] + W1) & MASK]
    return c


def stream_words(seed, offset, count):
    """Words offset .. offset + count - 1 of the stream of `seed`."""
    words = []
    block = offset // 4
    while len(words) < count:
        words += philox([block & MASK, block >> 32, 0, 0], [seed & MASK, seed >> 32])
        block += 1
    return words[:count]


def test_the_model_is_philox():
    # Random123's known answers for Philox4x32-10.
    assert philox([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox([MASK] * 4, [MASK, MASK]) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert philox([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0]) == [
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def generator(dev, seed):
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    return g


def test_integer_words_are_the_philox_stream(dev):
    # random_ over all 2^32 int32 values is start + word, so the words themselves come back.
    g = generator(dev, 0)
    drawn = torch.empty(1001, dtype=torch.int32, device=dev).random_(-(2**31), 2**31, generator=g)
    words = [(v + 2**31) & MASK for v in drawn.cpu().tolist()]
    assert words == stream_words(0, 0, 1001)
    # The offset moved past the words, rounded up to whole blocks.
    assert g.get_offset() == 1004
    seed = 0x299F31D0A4093822
    g = generator(dev, seed)
    drawn = torch.empty(8, dtype=torch.int32, device=dev).random_(-(2**31), 2**31, generator=g)
    assert [(v + 2**31) & MASK for v in drawn.cpu().tolist()] == stream_words(seed, 0, 8)


def test_uniform_floats_are_the_top_bits_of_each_word(dev):
    g = generator(dev, 77)
    g.set_offset(40)
    drawn = torch.rand(999, generator=g, device=dev).cpu()
    expected = torch.tensor([(w >> 8) * 2.0**-24 for w in stream_words(77, 40, 999)], dtype=torch.float32)
    assert torch.equal(drawn, expected)
    assert g.get_offset() == 40 + 1000


def test_float64_draws_take_two_words_an_element(dev):
    if torch.float64 not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{xhal.torch.devices()[0]['label']} has no f64 kernels; float64 draws run in float32 there")
    g = generator(dev, 5)
    drawn = torch.rand(7, generator=g, dtype=torch.float64, device=dev).cpu()
    words = stream_words(5, 0, 14)
    expected = [((words[2 * i + 1] >> 11) * 2.0**32 + words[2 * i]) * 2.0**-53 for i in range(7)]
    assert drawn.tolist() == expected
    assert g.get_offset() == 16


def test_int64_draws_take_two_words_an_element(dev):
    if torch.int64 not in xhal.torch.native_dtypes(dev):
        pytest.skip(f"{xhal.torch.devices()[0]['label']} has no i64 kernels")
    g = generator(dev, 9)
    drawn = torch.empty(5, dtype=torch.int64, device=dev).random_(3, 2**40 + 3, generator=g).cpu().tolist()
    words = stream_words(9, 0, 10)
    assert drawn == [3 + (((words[2 * i + 1] << 32) | words[2 * i]) % 2**40) for i in range(5)]


# Digests of draws made on the cpu device (seed 1234, in this order): every device must give
# these bits. float64 draws count only on devices with f64 kernels.
def draws(dev):
    torch.manual_seed(1234)
    out = []

    def floating(dtype):
        out.append((f"rand {dtype}", torch.rand(1000, dtype=dtype, device=dev)))
        out.append((f"randn {dtype}", torch.randn(1001, dtype=dtype, device=dev)))
        out.append((f"exponential {dtype}", torch.empty(999, dtype=dtype, device=dev).exponential_(2.0)))
        out.append((f"log_normal {dtype}", torch.empty(999, dtype=dtype, device=dev).log_normal_()))
        out.append((f"cauchy {dtype}", torch.empty(999, dtype=dtype, device=dev).cauchy_()))
        out.append((f"geometric {dtype}", torch.empty(999, dtype=dtype, device=dev).geometric_(0.3)))
        out.append((f"bernoulli {dtype}", torch.empty(1001, dtype=dtype, device=dev).bernoulli_(0.3)))

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        floating(dtype)
    out.append(("randint int32", torch.randint(-5, 1000, (777,), device=dev, dtype=torch.int32)))
    out.append(("dropout", torch.nn.functional.dropout(torch.ones(1003, device=dev), 0.3)))
    out.append(("multinomial with replacement", torch.multinomial(torch.rand(5, 20, device=dev), 30, True)))
    out.append(("multinomial", torch.multinomial(torch.rand(5, 20, device=dev), 10)))
    out.append(("randperm", torch.randperm(1000, device=dev)))
    out.append(("poisson (on the CPU)", torch.poisson(torch.full((50,), 3.0, device=dev))))
    # Last, so that a device without them draws the rest from the same offsets.
    if torch.int64 in xhal.torch.native_dtypes(dev):
        out.append(("randint int64", torch.randint(0, 2**40, (777,), device=dev, dtype=torch.int64)))
    if torch.float64 in xhal.torch.native_dtypes(dev):
        floating(torch.float64)
    return out


DIGESTS = {
    "rand torch.float32": "b8651c5da661dfc4",
    "randn torch.float32": "669cfee2ec9fdb08",
    "exponential torch.float32": "fbdb573d86bc5154",
    "log_normal torch.float32": "5de4c721cc030353",
    "cauchy torch.float32": "53b9a7dd344d1950",
    "geometric torch.float32": "80abe07f6a2185e2",
    "bernoulli torch.float32": "65decc3ecd79fe69",
    "rand torch.float16": "c927fbb70e007058",
    "randn torch.float16": "8448c0db788653d8",
    "exponential torch.float16": "2da37ce07e4e0d8a",
    "log_normal torch.float16": "7764a129995932f3",
    "cauchy torch.float16": "c0ea7793ce94c1fe",
    "geometric torch.float16": "8e959ceb9d1d2691",
    "bernoulli torch.float16": "50ae15e7e33acae9",
    "rand torch.bfloat16": "502cce9dc5a5bd23",
    "randn torch.bfloat16": "544e49a4817163ef",
    "exponential torch.bfloat16": "ff8b121277ced73d",
    "log_normal torch.bfloat16": "f9eedf9b4cd87884",
    "cauchy torch.bfloat16": "e5c0e3ddbb35a638",
    "geometric torch.bfloat16": "7e81c799d8afda03",
    "bernoulli torch.bfloat16": "aa6b5956c1033a69",
    "randint int32": "115e1c57ead8f9b2",
    "dropout": "91cc7eccb9af650e",
    "multinomial with replacement": "fbc758a1e5de11c5",
    "multinomial": "37914406276aa2ed",
    "randperm": "dc1c47d74e1aea12",
    "poisson (on the CPU)": "a57993f89fceeac1",
    "randint int64": "4a131126737ccde4",
    "rand torch.float64": "cee7512f5225ca9d",
    "randn torch.float64": "b7515b0524ef5cb6",
    "exponential torch.float64": "df31817e36975d53",
    "log_normal torch.float64": "6063bdf5fc125be9",
    "cauchy torch.float64": "83b0e33a6dd0629a",
    "geometric torch.float64": "31b15a3c93864aa6",
    "bernoulli torch.float64": "11a38103ab764af1",
}


def digest(tensor):
    return hashlib.sha256(tensor.cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def test_every_device_draws_the_same_bits(dev):
    got = {name: digest(t) for name, t in draws(dev)}
    missing = [name for name in got if name not in DIGESTS]
    assert not missing, f"no recorded digest for {missing}; the cpu device's are {got}"
    assert {name: got[name] for name in got} == {name: DIGESTS[name] for name in got}


# --- The generator ---------------------------------------------------------------------------


def test_manual_seed_reproduces_draws(dev):
    torch.manual_seed(7)
    a = torch.rand(100, device=dev)
    b = torch.randn(100, device=dev)
    torch.manual_seed(7)
    assert torch.equal(a.cpu(), torch.rand(100, device=dev).cpu())
    assert torch.equal(b.cpu(), torch.randn(100, device=dev).cpu())
    torch.xhal.manual_seed(7)
    assert torch.equal(a.cpu(), torch.rand(100, device=dev).cpu())
    torch.xhal.manual_seed_all(8)
    assert not torch.equal(a.cpu(), torch.rand(100, device=dev).cpu())
    assert torch.xhal.initial_seed() == 8


def test_seed_picks_a_fresh_seed(dev):
    first = torch.xhal.seed()
    assert torch.xhal.initial_seed() == first
    torch.xhal.seed_all()
    assert torch.xhal.initial_seed() != first


def test_the_state_is_seed_and_offset(dev):
    torch.xhal.manual_seed(0x0102030405060708)
    torch.rand(10, device=dev)  # 10 words: the offset moves to 12
    state = torch.xhal.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 0x0102030405060708
    assert int.from_bytes(bytes(state[8:].tolist()), "little") == 12
    after = torch.rand(5, device=dev)
    torch.xhal.set_rng_state(state)
    assert torch.equal(after.cpu(), torch.rand(5, device=dev).cpu())
    assert len(torch.xhal.get_rng_state_all()) == torch.xhal.device_count()
    # torch.accelerator's view of the same generator (through the device's hooks).
    from torch.accelerator import random as accelerator_random

    assert torch.equal(accelerator_random.get_rng_state(0), torch.xhal.get_rng_state(0))
    assert accelerator_random.initial_seed(0) == 0x0102030405060708


def test_generators_are_independent_and_clonable(dev):
    g = generator(dev, 11)
    h = generator(dev, 11)
    assert torch.equal(torch.rand(9, generator=g, device=dev).cpu(), torch.rand(9, generator=h, device=dev).cpu())
    assert g.device == dev or g.device.type == "xhal"
    copy = g.clone_state()
    assert torch.equal(torch.rand(9, generator=g, device=dev).cpu(), torch.rand(9, generator=copy, device=dev).cpu())
    g.set_state(h.get_state())
    assert torch.equal(torch.rand(3, generator=g, device=dev).cpu(), torch.rand(3, generator=h, device=dev).cpu())


def test_fork_rng_restores_the_device_state(dev):
    torch.manual_seed(3)
    with torch.random.fork_rng(devices=[0], device_type="xhal"):
        inside = torch.rand(4, device=dev)
    after = torch.rand(4, device=dev)
    assert torch.equal(inside.cpu(), after.cpu())
    # fork_rng of code that never touches xhal (the CPU's state) works with xhal imported.
    with torch.random.fork_rng(devices=[]):
        torch.rand(2)


def test_bad_states_and_offsets_are_refused(dev):
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.xhal.set_rng_state(torch.zeros(8, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="uint8"):
        torch.xhal.set_rng_state(torch.zeros(16, dtype=torch.float32))
    state = torch.zeros(16, dtype=torch.uint8)
    state[8] = 3
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.xhal.set_rng_state(state)
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.Generator(device=dev).set_offset(6)


def test_a_cpu_generator_is_refused_for_xhal_tensors(dev):
    with pytest.raises(RuntimeError, match="xhal"):
        torch.rand(3, device=dev, generator=torch.Generator())
    with pytest.raises(RuntimeError, match="generator of an xhal device"):
        torch.poisson(torch.ones(3, device=dev), generator=torch.Generator())


# --- The operators -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_uniform_stays_in_its_interval(dev, dtype):
    torch.manual_seed(0)
    x = torch.empty(100_000, dtype=dtype, device=dev).uniform_(-2.0, 3.0).cpu().double()
    assert x.min() >= -2.0 and x.max() < 3.0
    assert abs(x.mean().item() - 0.5) < 0.03
    # A narrow interval, where rounding to the dtype would give its end: never the end.
    y = torch.empty(100_000, dtype=dtype, device=dev).uniform_(1.0, 1.0 + 4 * torch.finfo(dtype).eps).cpu()
    assert (y < 1.0 + 4 * torch.finfo(dtype).eps).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_normal_has_its_mean_and_deviation(dev, dtype):
    torch.manual_seed(0)
    x = torch.empty(200_000, dtype=dtype, device=dev).normal_(1.5, 2.0).cpu().double()
    assert abs(x.mean().item() - 1.5) < 0.03
    assert abs(x.std().item() - 2.0) < 0.03
    assert torch.isfinite(x).all()
    mean = torch.linspace(-1, 1, 1000, device=dev)
    assert torch.normal(mean, 0.0).cpu().equal(mean.cpu())
    drawn = torch.normal(mean, torch.full((1000,), 1e-3, device=dev)).cpu()
    assert (drawn - mean.cpu()).abs().max() < 1e-2
    assert torch.normal(0.0, torch.ones(3, 4, device=dev)).shape == (3, 4)


def test_other_distributions(dev):
    torch.manual_seed(0)
    n = 200_000
    e = torch.empty(n, device=dev).exponential_(4.0).cpu()
    assert e.min() >= 0 and abs(e.mean().item() - 0.25) < 0.01
    ln = torch.empty(n, device=dev).log_normal_(0.0, 0.5).cpu()
    assert ln.min() > 0 and abs(ln.log().mean().item()) < 0.01
    c = torch.empty(n, device=dev).cauchy_(2.0, 1.0).cpu()
    assert abs(c.median().item() - 2.0) < 0.02
    g = torch.empty(n, device=dev).geometric_(0.25).cpu()
    assert g.min() >= 1 and torch.equal(g, g.round()) and abs(g.mean().item() - 4.0) < 0.05
    b = torch.empty(n, device=dev).bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean().item() - 0.3) < 0.01
    p = torch.rand(1000, device=dev)
    sampled = torch.stack([torch.bernoulli(p) for _ in range(200)]).mean(0)
    assert (sampled - p).abs().mean().item() < 0.04
    assert torch.bernoulli(torch.zeros(100, device=dev)).sum() == 0
    assert torch.bernoulli(torch.ones(100, device=dev)).sum() == 100


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8, torch.bool,
                                   torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_random_integers_cover_their_range(dev, dtype):
    torch.manual_seed(0)
    low, high = (0, 2) if dtype == torch.bool else (-3, 7) if dtype not in (torch.uint8,) else (0, 10)
    x = torch.randint(low, high, (20_000,), dtype=dtype, device=dev).cpu()
    assert x.dtype == dtype
    values = set(x.to(torch.int64).tolist())
    assert values == set(range(low, high))
    full = torch.empty(20_000, dtype=dtype, device=dev).random_().cpu().to(torch.float64)
    top = {torch.bool: 1, torch.uint8: 255, torch.int8: 127, torch.int16: 32767, torch.int32: 2**31 - 1,
           torch.int64: 2**63 - 1, torch.float16: 2**11, torch.bfloat16: 2**8, torch.float32: 2**24,
           torch.float64: 2**53}[dtype]
    assert full.min() >= 0 and full.max() <= top
    assert full.max() > top / 2


def test_random_argument_errors_match_the_cpu(dev):
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, device=dev).uniform_(2.0, 1.0)
    with pytest.raises(RuntimeError, match="std"):
        torch.empty(3, device=dev).normal_(0.0, -1.0)
    with pytest.raises(RuntimeError, match="std"):
        torch.normal(torch.zeros(3, device=dev), torch.tensor([1.0, -1.0, 1.0], device=dev))
    with pytest.raises(RuntimeError, match="p"):
        torch.empty(3, device=dev).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        torch.bernoulli(torch.tensor([0.5, 2.0], device=dev))
    with pytest.raises(RuntimeError, match="lambd|lambda"):
        torch.empty(3, device=dev).exponential_(-1.0)
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, dtype=torch.int32, device=dev).random_(5, 2)
    with pytest.raises(RuntimeError):
        torch.empty(3, dtype=torch.int64, device=dev).uniform_()


def test_dropout_forward_and_backward(dev):
    torch.manual_seed(0)
    x = torch.randn(10_000, device=dev, requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25, training=True)
    kept = y.detach().cpu() != 0
    assert abs(kept.double().mean().item() - 0.75) < 0.02
    assert torch.allclose(y.detach().cpu()[kept], x.detach().cpu()[kept] / 0.75)
    y.backward(torch.ones_like(y))
    assert torch.allclose(x.grad.cpu(), kept.float() / 0.75)
    out, mask = torch.native_dropout(x.detach(), 0.25, True)
    assert mask.dtype == torch.bool and mask.shape == x.shape
    backward = torch.ops.aten.native_dropout_backward(torch.ones_like(out), mask, 2.0)
    assert torch.equal(backward.cpu(), mask.cpu().float() * 2)
    # Evaluation, p = 0 and p = 1.
    assert torch.equal(torch.nn.functional.dropout(x, 0.5, training=False).cpu(), x.detach().cpu())
    assert torch.equal(torch.nn.functional.dropout(x, 0.0).detach().cpu(), x.detach().cpu())
    assert torch.nn.functional.dropout(x, 1.0).detach().cpu().abs().sum() == 0
    assert xhal.torch.fallback_counts() == {}


def test_dropout_of_half_precision_and_strided_inputs(dev):
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.ones(64, 33, dtype=dtype, device=dev)
        y = torch.nn.functional.dropout(x, 0.5)
        assert y.dtype == dtype and set(y.cpu().float().unique().tolist()) <= {0.0, 2.0}
    x = torch.ones(40, 30, device=dev).t()
    y = torch.nn.functional.dropout(x, 0.5)
    assert y.shape == (30, 40) and set(y.cpu().unique().tolist()) <= {0.0, 2.0}


def test_randperm_is_a_permutation(dev):
    torch.manual_seed(0)
    for n in (0, 1, 5, 1000, 100_003):
        p = torch.randperm(n, device=dev)
        assert p.dtype == torch.int64 and p.device.type == "xhal"
        assert torch.equal(p.cpu().sort().values, torch.arange(n))
    # Each place is uniform: the mean of a column of permutations is (n - 1) / 2.
    placed = torch.stack([torch.randperm(10, device=dev) for _ in range(2000)]).double().mean(0).cpu()
    assert (placed - 4.5).abs().max() < 0.3
    assert torch.randperm(100, dtype=torch.int32, device=dev).dtype == torch.int32
    with pytest.raises(RuntimeError, match="too large"):
        torch.randperm(300, dtype=torch.uint8, device=dev)


def test_multinomial(dev):
    torch.manual_seed(0)
    p = torch.tensor([0.1, 0.0, 0.6, 0.3], device=dev)
    for _ in range(20):
        s = torch.multinomial(p, 3).cpu()
        assert len(set(s.tolist())) == 3 and 1 not in s.tolist()
    counts = torch.bincount(torch.multinomial(p, 100_000, replacement=True).cpu(), minlength=4).double() / 100_000
    assert (counts - p.cpu().double()).abs().max() < 0.01
    rows = torch.multinomial(torch.rand(7, 50, device=dev), 5)
    assert rows.shape == (7, 5) and rows.dtype == torch.int64
    with pytest.raises(RuntimeError, match="nan|inf|< 0"):
        torch.multinomial(torch.tensor([0.5, -0.1], device=dev), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        torch.multinomial(torch.zeros(2, 3, device=dev), 1)
    with pytest.raises(RuntimeError, match="without replacement|not enough"):
        torch.multinomial(torch.tensor([1.0, 0.0, 0.0], device=dev), 2)


def test_random_operators_without_kernels_follow_the_seed(dev):
    torch.manual_seed(5)
    a = torch.poisson(torch.full((100,), 4.0, device=dev)).cpu()
    torch.manual_seed(5)
    b = torch.poisson(torch.full((100,), 4.0, device=dev)).cpu()
    assert torch.equal(a, b) and abs(a.mean().item() - 4.0) < 0.8
    assert xhal.torch.fallback_counts().get("aten::poisson", 0) == 2


def test_random_operators_run_on_the_device(dev):
    torch.rand(10, device=dev)
    torch.randn(10, device=dev)
    torch.randint(0, 5, (10,), device=dev)
    torch.empty(10, device=dev).bernoulli_(0.5)
    torch.randperm(10, device=dev)
    torch.multinomial(torch.ones(4, device=dev), 2)
    torch.nn.functional.dropout(torch.ones(10, device=dev), 0.5)
    assert xhal.torch.fallback_counts() == {}
