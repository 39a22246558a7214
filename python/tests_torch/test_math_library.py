"""The float libraries of the PyTorch device's WGSL kernels (python/xhal/torch/kernels/lib):
every function of float_f32.wgsl and float_f64.wgsl on the device XHAL_DEVICE selects, against
a reference computed with mpmath to 30 digits, within the bound in ulps that the library's
README.md promises; and C's and PyTorch's special values (NaN, infinities, signed zeros), exactly
as PyTorch's CPU kernels give them.

One module per float type holds every function behind a switch, so that each device compiles
the library once per type; each function is then one launch over all its inputs."""

import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
import torch

import xhal

LIB = Path(__file__).resolve().parents[1] / "xhal" / "torch" / "kernels" / "lib"
TYPES = {"f32": np.float32, "f64": np.float64}

# name, arguments, the bound in ulps for f32 and for f64: the largest error measured over about
# 300,000 inputs per function and type from inputs() below (the same on every backend: the
# libraries give the same bits on each), plus 0.1, rounded up to a half ulp. README.md has the
# measurements.
FUNCTIONS = [
    ("xexp", 1, 1, 1.5),
    ("xexp2", 1, 1.5, 1.5),
    ("xexpm1", 1, 2, 2),
    ("xlog", 1, 1, 1),
    ("xlog2", 1, 1, 1),
    ("xlog10", 1, 1, 1),
    ("xlog1p", 1, 1, 1),
    ("xsqrt", 1, 0.5, 0.5),
    ("xrsqrt", 1, 2, 2),
    ("xsin", 1, 1, 1),
    ("xcos", 1, 1, 1),
    ("xtan", 1, 2.5, 2.5),
    ("xasin", 1, 1, 1),
    ("xacos", 1, 1, 1),
    ("xatan", 1, 1, 1),
    ("xatan2", 2, 2, 1.5),
    ("xsinh", 1, 2, 2),
    ("xcosh", 1, 1.5, 1.5),
    ("xtanh", 1, 1.5, 1.5),
    ("xasinh", 1, 2, 2),
    ("xacosh", 1, 2.5, 2.5),
    ("xatanh", 1, 2, 2),
    ("xerf", 1, 1, 1.5),
    ("xerfc", 1, 3, 3),
    ("xerfinv", 1, 2, 2),
    ("xpow", 2, 1, 1.5),
    ("xlgamma", 1, 2.5, 2.5),
    ("xdigamma", 1, 2.5, 2.5),
]
INDEX = {name: i for i, (name, *_) in enumerate(FUNCTIONS)}
ARITY = {name: arity for name, arity, *_ in FUNCTIONS}

KERNEL = """
alias F = {F};
struct Params {{ n: u32, which: u32 }}
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> xs: array<F>;
@group(0) @binding(1) var<storage, read> ys: array<F>;
@group(0) @binding(2) var<storage, read_write> out: array<F>;

@compute @workgroup_size(64)
fn evaluate(@builtin(global_invocation_id) id: vec3<u32>) {{
  let i = id.y * 65536u + id.x;
  if (i >= params.n) {{ return; }}
  let x = xs[i];
  let y = ys[i];
  var r = x;
  switch params.which {{
{cases}
    default: {{}}
  }}
  out[i] = r;
}}
"""


def source(ftype):
    """The library for ftype, then a kernel that declares `alias F` and calls its functions."""
    cases = "\n".join(
        f"    case {i}u: {{ r = {name}({'x, y' if arity == 2 else 'x'}); }}"
        for i, (name, arity, *_) in enumerate(FUNCTIONS)
    )
    return (LIB / f"float_{ftype}.wgsl").read_text() + KERNEL.format(F=ftype, cases=cases)


@pytest.fixture(scope="module")
def xdev():
    device = xhal.device()
    print(f"testing on {device.label}: {device.why}")
    return device


@pytest.fixture(scope="module")
def evaluate(xdev):
    """evaluate(ftype, name, x, y=None) -> the device's results, as ftype."""
    kernels = {}

    def run(ftype, name, x, y=None):
        missing = [f for f in ("f64", "i64") if ftype == "f64" and f not in xdev.info["features"]]
        if missing:  # float_f64.wgsl computes in f64 and takes its bits apart as u64
            pytest.skip(f"{xdev.label} lacks the feature {' and '.join(missing)}, which float_f64.wgsl needs")
        if ftype not in kernels:
            kernels[ftype] = xdev.load_wgsl(source(ftype)).kernel("evaluate")
        dtype = TYPES[ftype]
        x = np.ascontiguousarray(x, dtype)
        y = x if y is None else np.ascontiguousarray(y, dtype)
        out = xdev.zeros(len(x), dtype)
        groups = (len(x) + 63) // 64
        kernels[ftype](xdev.asarray(x), xdev.asarray(y), out, n=len(x), which=INDEX[name],
                       workgroups=(min(groups, 1024), (groups + 1023) // 1024, 1))
        return out.numpy()

    return run


# ---- references ------------------------------------------------------------------------------

mp.mp.dps = 30


def lgamma_mp(x):
    return mp.inf if x <= 0 and x == mp.floor(x) else mp.re(mp.loggamma(x))


def erfinv_mp(x):
    # one Newton step from the double: mpmath's own erfinv is 20 times slower
    if abs(x) >= 1:
        return mp.erfinv(x)
    y = mp.mpf(float(torch.erfinv(torch.tensor(float(x), dtype=torch.float64))))
    for _ in range(2):
        y -= (mp.erf(y) - x) * mp.sqrt(mp.pi) / 2 * mp.exp(y * y)
    return y


REFERENCE = {
    "xexp": mp.exp, "xexp2": lambda x: mp.power(2, x), "xexpm1": mp.expm1, "xlog": mp.log,
    "xlog2": lambda x: mp.log(x, 2), "xlog10": mp.log10, "xlog1p": mp.log1p, "xsqrt": mp.sqrt,
    "xrsqrt": lambda x: 1 / mp.sqrt(x), "xsin": mp.sin, "xcos": mp.cos, "xtan": mp.tan,
    "xasin": mp.asin, "xacos": mp.acos, "xatan": mp.atan, "xatan2": lambda y, x: mp.atan2(y, x),
    "xsinh": mp.sinh, "xcosh": mp.cosh, "xtanh": mp.tanh, "xasinh": mp.asinh, "xacosh": mp.acosh,
    "xatanh": mp.atanh, "xerf": mp.erf, "xerfc": mp.erfc, "xerfinv": erfinv_mp, "xpow": mp.power,
    "xlgamma": lgamma_mp, "xdigamma": mp.digamma,
}


def reference(name, x, y=None):
    """The exact value of name at each input, as hi + lo in two doubles (longdouble)."""
    f = REFERENCE[name]
    out = np.empty(len(x), np.longdouble)
    for i in range(len(x)):
        v = f(mp.mpf(float(x[i]))) if y is None else f(mp.mpf(float(x[i])), mp.mpf(float(y[i])))
        hi = float(v) if abs(v) < mp.mpf(2) ** 1024 else math.copysign(math.inf, v)
        out[i] = np.longdouble(hi) + np.longdouble(float(v - hi) if math.isfinite(hi) else 0.0)
    return out


def ulps(got, ref, dtype):
    """|got - ref| in ulps of ref in dtype (an infinite ref must be matched exactly)."""
    info = np.finfo(dtype)
    with np.errstate(over="ignore"):
        ref = np.where(np.isinf(ref.astype(dtype)), ref.astype(dtype).astype(np.longdouble), ref)
    got = got.astype(np.longdouble)
    err = np.full(len(ref), np.inf)
    exact = ~np.isfinite(ref)
    err[exact] = np.where(got[exact] == ref[exact], 0.0, np.inf)
    fin = np.isfinite(ref) & np.isfinite(got)
    a = np.maximum(np.abs(ref[fin]), np.longdouble(info.tiny))
    ulp = np.ldexp(np.longdouble(1), np.floor(np.log2(a)).astype(int) - info.nmant)
    err[fin] = (np.abs(got[fin] - ref[fin]) / ulp).astype(np.float64)
    return err


# ---- inputs ----------------------------------------------------------------------------------

def inputs(name, ftype, n=400, seed=0):
    """Dense random inputs over the whole range that matters, and the edges."""
    rng = np.random.default_rng(INDEX[name] + (100 if ftype == "f64" else 0) + 1000 * seed)
    dtype = TYPES[ftype]
    f64 = ftype == "f64"
    tiny = float(np.finfo(dtype).smallest_subnormal)
    big = float(np.finfo(dtype).max)
    ln_max = math.log(big)
    ln_min = math.log(tiny)
    eps = float(np.finfo(dtype).eps)

    def u(a, b, k=n):
        return rng.uniform(a, b, k)

    def lg(a, b, k=n, signed=False):
        v = np.exp(rng.uniform(math.log(a), math.log(b), k))
        return v * rng.choice([-1.0, 1.0], k) if signed else v

    def bits(k=n):
        if f64:
            v = rng.integers(0, 2**63, k, dtype=np.uint64).view(np.float64)
        else:
            with np.errstate(invalid="ignore"):
                v = rng.integers(0, 2**31, k, dtype=np.uint32).view(np.float32).astype(np.float64)
        return v[np.isfinite(v)]

    y = None
    if name == "xexp":
        x = np.r_[u(ln_min, ln_max), u(-1, 1), u(ln_max - 1, ln_max + 0.1, 50), u(ln_min - 1, ln_min + 30, 50)]
    elif name == "xexp2":
        x = np.r_[u(math.log2(tiny), math.log2(big)), u(-1, 1), u(math.log2(tiny) - 2, math.log2(tiny) + 30, 50)]
    elif name == "xexpm1":
        x = np.r_[u(-3 * math.log(2 / eps), ln_max), u(-1, 1), lg(tiny, 1, signed=True)]
    elif name in ("xlog", "xlog2", "xlog10", "xsqrt", "xrsqrt"):
        x = np.r_[bits(), u(0.5, 2), 1 + lg(eps, 1e-2, signed=True)]
    elif name == "xlog1p":
        x = np.r_[u(-1, 1), lg(tiny, 1, signed=True), lg(1, big), u(-1, -0.99, 50)]
    elif name in ("xsin", "xcos", "xtan"):
        k = rng.integers(-60000 if f64 else -6000, 60000 if f64 else 6000, n)
        x = np.r_[u(-10, 10), u(-1e5, 1e5) if f64 else u(-1e4, 1e4), lg(1e5, big, signed=True),
                  lg(tiny, 1, signed=True), k * (math.pi / 2)]
        if f64:  # the double nearest a multiple of pi/2 (2^-61 away)
            x = np.r_[x, 6381956970095103 * 2.0**797]
    elif name in ("xasin", "xacos"):
        x = np.r_[u(-1, 1), 1 - lg(eps, 0.5), -1 + lg(eps, 0.5), lg(tiny, 1, signed=True)]
    elif name == "xatan":
        x = np.r_[bits(), u(-4, 4)]
    elif name == "xatan2":
        x = np.r_[u(-10, 10), lg(1e-30, 1e30, signed=True), bits()[: n // 2]]
        y = np.r_[u(-10, 10), lg(1e-30, 1e30, signed=True), bits()[: n // 2]]
        m = min(len(x), len(y))
        x, y = x[:m], y[:m]
    elif name in ("xsinh", "xcosh"):
        x = np.r_[u(-ln_max - 1, ln_max + 1), u(-2, 2), lg(tiny, 1, signed=True)]
    elif name == "xtanh":
        x = np.r_[u(-25, 25), u(-1, 1), lg(tiny, 1, signed=True)]
    elif name == "xasinh":
        x = np.r_[bits(), u(-3, 3)]
    elif name == "xacosh":
        x = np.r_[1 + np.abs(bits()), u(1, 3), 1 + lg(eps, 1)]
    elif name == "xatanh":
        x = np.r_[u(-1, 1), 1 - lg(eps, 0.5), lg(tiny, 1, signed=True)]
    elif name == "xerf":
        x = np.r_[u(-7, 7), u(-1.5, 1.5), lg(tiny, 1, signed=True)]
    elif name == "xerfc":
        x = np.r_[u(-7, 27.3 if f64 else 10.1), u(-1, 3), lg(tiny, 1, signed=True)]
    elif name == "xerfinv":
        x = np.r_[u(-1, 1), (1 - lg(eps, 0.5)) * rng.choice([-1.0, 1.0], n), lg(tiny, 1, signed=True)]
    elif name == "xpow":
        x = np.r_[lg(1e-5, 1e5), u(0, 2), -lg(1e-3, 1e3, n // 2), lg(tiny, big, n // 2)]
        y = np.r_[u(-40, 40), u(-100, 100), rng.integers(-60, 60, n // 2).astype(float), u(-2, 2, n // 2)]
    elif name == "xlgamma":
        x = np.r_[u(0, 10), lg(tiny, 2.5e305 if f64 else 4e36), u(0.5, 3)]
    elif name == "xdigamma":
        x = np.r_[u(0, 20), lg(tiny, big), u(1, 2)]
    x = x.astype(dtype).astype(np.float64)
    if y is not None:
        y = y.astype(dtype).astype(np.float64)
    return x, y


@pytest.mark.parametrize("ftype", ["f32", "f64"])
@pytest.mark.parametrize("name,arity,bound32,bound64", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_accuracy(evaluate, ftype, name, arity, bound32, bound64):
    x, y = inputs(name, ftype)
    got = evaluate(ftype, name, x, y)
    want = reference(name, x, y)
    err = ulps(got, want, TYPES[ftype])
    worst = int(np.argmax(err))
    bound = bound32 if ftype == "f32" else bound64
    at = f"x = {x[worst]!r}" + ("" if y is None else f", y = {y[worst]!r}")
    assert err[worst] <= bound, (
        f"{name} ({ftype}) at {at}: {got[worst]!r}, exact {float(want[worst])!r}: {err[worst]:.2f} ulp > {bound}")


# Below zero, lgamma and digamma come from the reflection formula, whose terms cancel near the
# function's zeros: the error is bounded by eps (2^-52 or 2^-23) times the sum of the terms'
# magnitudes, not by ulps of the result (measured: 1.83 eps for lgamma, 1.57 for digamma).
REFLECTION_BOUND = 2


@pytest.mark.parametrize("ftype", ["f32", "f64"])
@pytest.mark.parametrize("name", ["xlgamma", "xdigamma"])
def test_reflection_below_zero(evaluate, ftype, name):
    rng = np.random.default_rng(7)
    dtype = TYPES[ftype]
    x = np.r_[rng.uniform(-10, 0, 600), -np.exp(rng.uniform(-30, 10, 200))]
    x = x.astype(dtype).astype(np.float64)
    x = x[x != np.floor(x)]
    got = evaluate(ftype, name, x)
    want = reference(name, x)
    if name == "xlgamma":  # log(pi / |a sin(pi a)|) and lgamma(a), a = -x
        terms = [abs(lgamma_mp(mp.mpf(-v))) + abs(mp.log(mp.pi / abs(v * mp.sinpi(v)))) for v in x]
    else:  # digamma(a), 1/a and pi cot(pi x), a = -x
        terms = [abs(mp.digamma(mp.mpf(-v))) + abs(1 / mp.mpf(v)) + abs(mp.pi * mp.cot(mp.pi * v))
                 for v in x]
    scale = np.maximum(np.abs(want), np.array([float(t) for t in terms], np.longdouble))
    err = np.abs(got.astype(np.longdouble) - want) / (scale * np.longdouble(np.finfo(dtype).eps))
    worst = int(np.argmax(err))
    assert err[worst] <= REFLECTION_BOUND, (
        f"{name} ({ftype}) at x = {x[worst]!r}: {got[worst]!r}, exact {float(want[worst])!r}: "
        f"{err[worst]:.2f} eps of {float(scale[worst]):.3g}")


# Every function is written from arithmetic the backends all round the same way (WGSL's sqrt is
# the one built-in), with no reliance on fused or unfused multiply-adds, and fenced against the
# compilers' algebraic rewrites: on the backends where that was established, the bits must be
# the CPU device's. Elsewhere (an NVRTC or hiprtc kernel may fuse a * b + c) the bounds above
# are the promise.
SAME_BITS = {"cpu", "vulkan", "opencl", "wgpu"}


@pytest.mark.parametrize("ftype", ["f32", "f64"])
def test_same_bits_as_the_cpu_device(evaluate, xdev, ftype):
    if xdev.backend == "cpu":
        pytest.skip("the device is the CPU device")
    if xdev.backend not in SAME_BITS:
        pytest.skip(f"bit-for-bit agreement with the CPU device is not established for {xdev.backend}")
    cpu = xhal.device("cpu")
    kernel = cpu.load_wgsl(source(ftype)).kernel("evaluate")
    dtype = TYPES[ftype]
    for name, arity, *_ in FUNCTIONS:
        x, y = inputs(name, ftype, 100, seed=9)
        got = evaluate(ftype, name, x, y)
        xx = np.ascontiguousarray(x, dtype)
        yy = xx if y is None else np.ascontiguousarray(y, dtype)
        out = cpu.zeros(len(xx), dtype)
        groups = (len(xx) + 63) // 64
        kernel(cpu.asarray(xx), cpu.asarray(yy), out, n=len(xx), which=INDEX[name], workgroups=(groups, 1, 1))
        want = out.numpy()
        differ = np.flatnonzero(got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}"))
        assert len(differ) == 0, (
            f"{name} ({ftype}) at x = {x[differ[0]]!r}: {got[differ[0]]!r} on {xdev.label}, "
            f"{want[differ[0]]!r} on the CPU device ({len(differ)} of {len(x)} differ)")


# ---- special values --------------------------------------------------------------------------

TORCH = {
    "xexp": torch.exp, "xexp2": torch.exp2, "xexpm1": torch.expm1, "xlog": torch.log,
    "xlog2": torch.log2, "xlog10": torch.log10, "xlog1p": torch.log1p, "xsqrt": torch.sqrt,
    "xrsqrt": torch.rsqrt, "xsin": torch.sin, "xcos": torch.cos, "xtan": torch.tan,
    "xasin": torch.asin, "xacos": torch.acos, "xatan": torch.atan, "xsinh": torch.sinh,
    "xcosh": torch.cosh, "xtanh": torch.tanh, "xasinh": torch.asinh, "xacosh": torch.acosh,
    "xatanh": torch.atanh, "xerf": torch.erf, "xerfc": torch.erfc, "xerfinv": torch.erfinv,
    "xlgamma": torch.lgamma, "xdigamma": torch.digamma, "xpow": torch.pow,
    "xatan2": lambda y, x: torch.atan2(y, x),
}


def specials(dtype):
    info = np.finfo(dtype)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0,
            3.0, -3.0, 0.25, -0.25, 1.5, 5.0, -5.0, 1e30, -1e30, float(info.smallest_subnormal),
            -float(info.smallest_subnormal), float(info.tiny), float(info.max), -float(info.max)]


def is_special(v):
    return not np.isfinite(v) or v == 0


def is_subnormal(v):
    return v != 0 and np.isfinite(v) and abs(v) < np.finfo(v.dtype).tiny


@pytest.mark.parametrize("ftype", ["f32", "f64"])
@pytest.mark.parametrize("name", [f[0] for f in FUNCTIONS])
def test_special_values(evaluate, ftype, name):
    """Where an input or PyTorch's result is a NaN, an infinity or a zero (and for pow, where the
    base is +-1), the result is PyTorch's exactly, the sign of a zero included."""
    dtype = TYPES[ftype]
    s = np.array(specials(dtype), dtype)
    if ARITY[name] == 2:
        pairs = np.array([(a, b) for a in s for b in s], dtype)
        x, y = pairs[:, 0].copy(), pairs[:, 1].copy()
        want = TORCH[name](torch.from_numpy(x), torch.from_numpy(y)).numpy()
        check = np.array([is_special(a) or is_special(b) or is_special(w) or abs(a) == 1
                          for a, b, w in zip(x, y, want)])
    else:
        x, y = s, None
        want = TORCH[name](torch.from_numpy(x)).numpy()
        # (PyTorch's vectorised CPU kernels flush some results of subnormal inputs to zero, log1p's
        # among them; the accuracy test holds those to the exact values instead)
        check = np.array([is_special(a) or (is_special(w) and not is_subnormal(a)) for a, w in zip(x, want)])
    got = evaluate(ftype, name, x, y).astype(dtype)
    for i in np.flatnonzero(check):
        g, w = got[i], want[i]
        same = (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w))
        if not same and np.isfinite(w) and w != 0 and np.isfinite(g):
            same = abs(float(g) - float(w)) <= 4 * float(np.spacing(np.abs(w)))  # a finite, non-zero result
        args = f"{x[i]!r}" + ("" if y is None else f", {y[i]!r}")
        assert same, f"{name}({args}) ({ftype}) = {g!r}, PyTorch gives {w!r}"


def test_float_from_bits_and_classification(xdev):
    """The bit-level helpers: float_from_bits reads a scalar the host passes as two words (an f32
    in the low word, the high word ignored), is_nan, is_inf and sign_bit read the bits."""
    src32 = (LIB / "float_f32.wgsl").read_text()
    src64 = (LIB / "float_f64.wgsl").read_text()
    for text in (src32, src64):
        for fn in ("float_from_bits(lo: u32, hi: u32) -> F", "is_nan(x: F) -> bool", "is_inf(x: F) -> bool",
                   "sign_bit(x: F) -> bool"):
            assert "fn " + fn in text
    probe = """
alias F = {F};
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<F>;
@group(0) @binding(2) var<storage, read_write> flags: array<u32>;
@compute @workgroup_size(1)
fn probe(@builtin(global_invocation_id) id: vec3<u32>) {{
  let i = id.x;
  let v = float_from_bits(words[2u * i], words[2u * i + 1u]);
  out[i] = v;
  flags[i] = select(0u, 1u, is_nan(v)) | select(0u, 2u, is_inf(v)) | select(0u, 4u, sign_bit(v));
}}
"""
    for ftype, dtype, text in (("f32", np.float32, src32), ("f64", np.float64, src64)):
        if ftype == "f64" and not {"f64", "i64"} <= set(xdev.info["features"]):
            continue
        values = np.array([1.5, -0.0, 0.0, math.inf, -math.inf, math.nan, -math.nan, -2.5e-30], dtype)
        raw = values.view(np.uint32 if ftype == "f32" else np.uint64).astype(np.uint64)
        high = raw >> 32 if ftype == "f64" else np.full(len(raw), 0xDEADBEEF, np.uint64)
        words = np.stack([raw & 0xFFFFFFFF, high], axis=1).astype(np.uint32).ravel()
        kernel = xdev.load_wgsl(text + probe.format(F=ftype)).kernel("probe")
        out = xdev.zeros(len(values), dtype)
        flags = xdev.zeros(len(values), np.uint32)
        kernel(xdev.asarray(words), out, flags, workgroups=len(values))
        np.testing.assert_array_equal(out.numpy().view(np.uint8), values.view(np.uint8))
        expect = [0, 4, 0, 2, 6, 1, 5, 4]
        np.testing.assert_array_equal(flags.numpy(), expect)
