#!/usr/bin/env python3
"""Derives every constant, table and approximation coefficient of float_f32.wgsl and
float_f64.wgsl (nothing in them is copied from elsewhere).

Each approximation is a minimax polynomial (Remez exchange) or a minimax rational function
(Remez exchange on the linearised system, iterated), computed with mpmath at 60 digits and
rounded to the float type once. Each constant (a split of pi/2, ln2 in two parts, ...) is
computed from its definition at the same precision; the tables are the bits of 2/pi.

    python derive_coefficients.py            print every block, with its measured error
    python derive_coefficients.py --check    compare with the literals in the .wgsl files
    python derive_coefficients.py --update   rewrite those literals in place

In a .wgsl file, a line containing `coefficients: NAME` starts a block: the float literals
on the lines after it, up to the line with `return`, are NAME's coefficients in the order
printed here (the highest degree first; for a rational, the numerator's then the
denominator's). A line containing `constant: NAME` holds constant NAME as its only float
literal; after a line containing `table: NAME`, the hex literals up to `);` are table NAME.
Needs mpmath (pip install mpmath; it comes with torch) and numpy. Takes about a minute.
"""

import re
import sys
from pathlib import Path

import mpmath as mp
import numpy as np

mp.mp.dps = 60
HERE = Path(__file__).resolve().parent


# ---- minimax fitting ----------------------------------------------------------------------

def nodes(a, b, m):
    """The m Chebyshev extrema of [a, b]; one within 1e-30 (b - a) of 0 is 0."""
    t = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / (m - 1)) for i in range(m)]
    return [mp.mpf(0) if abs(x) < mp.mpf(10) ** -30 * (b - a) else x for x in t]


def alternation(pts, err, count):
    """The points of `count` alternating extrema of err (the largest of each run of one sign)."""
    runs = []
    for t, e in zip(pts, err):
        s = 1 if e >= 0 else -1
        if runs and runs[-1][0] == s:
            if abs(e) > abs(runs[-1][2]):
                runs[-1] = (s, t, e)
        else:
            runs.append((s, t, e))
    while len(runs) > count:
        runs.pop(0 if abs(runs[0][2]) < abs(runs[-1][2]) else -1)
    return [r[1] for r in runs]


def remez(g, a, b, n, m=0, w=None, grid=1500, iters=40):
    """p / q with deg p = n, deg q = m, q(0) = 1, minimising max |w (p / q - g)| on [a, b].

    Returns (p, q, max error on the grid), coefficients lowest degree first. For m > 0 the
    levelled error E enters the linear system as E q_old(x_i), iterated until E settles."""
    w = w or (lambda t: 1)
    a, b = mp.mpf(a), mp.mpf(b)
    count = n + m + 2
    ref = nodes(a, b, count)
    pts = nodes(a, b, grid)
    gv = {t: g(t) for t in pts}
    wv = {t: w(t) for t in pts}
    G = lambda t: gv[t] if t in gv else g(t)
    W = lambda t: wv[t] if t in wv else w(t)
    q = [mp.mpf(1)] + [mp.mpf(0)] * m
    best = None
    for _ in range(iters):
        E = mp.mpf(0)
        for _ in range(12 if m else 1):
            A = mp.matrix(count, count)
            rhs = mp.matrix(count, 1)
            for i, t in enumerate(ref):
                qt = mp.polyval(q[::-1], t)
                for k in range(n + 1):
                    A[i, k] = t ** k
                for k in range(1, m + 1):
                    A[i, n + k] = -G(t) * t ** k
                A[i, count - 1] = -((-1) ** i) * qt / W(t)
                rhs[i] = G(t)
            sol = mp.lu_solve(A, rhs)
            p = [sol[k] for k in range(n + 1)]
            q_new = [mp.mpf(1)] + [sol[n + k] for k in range(1, m + 1)]
            settled = abs(sol[count - 1] - E) <= abs(sol[count - 1]) * mp.mpf(10) ** -12
            q, E = q_new, sol[count - 1]
            if settled:
                break
        err = [wv[t] * (mp.polyval(p[::-1], t) / mp.polyval(q[::-1], t) - gv[t]) for t in pts]
        big = max(abs(e) for e in err)
        if best is None or big < best[2]:
            best = (p, q, big)
        ref_new = alternation(pts, err, count)
        if len(ref_new) < count or big <= abs(E) * (1 + mp.mpf(10) ** -3):
            break
        ref = ref_new
    return best


# ---- what the libraries approximate --------------------------------------------------------

def lim(f, at0):
    """f, with its limit at 0 given (the formulas below divide by t)."""
    return lambda t: at0 if t == 0 else f(t)


rt = mp.sqrt
X0 = mp.findroot(mp.digamma, mp.mpf("1.4616321449683623"))  # digamma's positive zero
ERX = mp.mpf(float(np.float32(mp.erf(1))))  # erf(1) to 24 bits: 1 - ERX is exact in f32 and f64
ERFC_C = mp.mpf("2.0625")  # the centre of erfc's middle interval
H = lambda x: x * mp.exp(x * x) * mp.erfc(x)  # x erfcx(x): erfc(x) = e^(-x^2) H(x) / x


def stirling_rest(t):
    """(lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2)) x at t = 1 / x^2."""
    x = 1 / rt(t)
    return (mp.loggamma(x) - ((x - mp.mpf(1) / 2) * mp.log(x) - x + mp.log(2 * mp.pi) / 2)) * x


def digamma_rest(t):
    """(log x - 1 / (2 x) - digamma(x)) / t at t = 1 / x^2."""
    x = 1 / rt(t)
    return (mp.log(x) - 1 / (2 * x) - mp.digamma(x)) / t


def erfinv_ratio(w):
    """erfinv(x) / x at w = -log(1 - x^2)."""
    if w == 0:
        return rt(mp.pi) / 2
    x = rt(-mp.expm1(-w))
    return mp.erfinv(x) / x


# name: (what, g, [a, b], {type: (deg p, deg q)}, weight). Each is used in the function its
# comment in the .wgsl names; the degrees are the smallest that keep the error (printed)
# well below the type's half ulp where it enters the result.
APPROXIMATIONS = {
    "exp": ("(e^r - 1 - r) / r^2 on |r| <= ln2 / 2",
            lim(lambda r: (mp.expm1(r) - r) / r**2, mp.mpf(1) / 2),
            (-mp.log(2) / 2, mp.log(2) / 2), {"f64": (9, 0), "f32": (4, 0)}, None),
    "log": ("(2 atanh(s) / s - 2) / s^2 at z = s^2, |s| <= (sqrt2 - 1) / (sqrt2 + 1)",
            lim(lambda z: (2 * mp.atanh(rt(z)) / rt(z) - 2) / z, mp.mpf(2) / 3),
            (0, ((rt(2) - 1) / (rt(2) + 1)) ** 2), {"f64": (7, 0), "f32": (3, 0)}, None),
    "log_dd": ("3 (atanh(s) / s - 1 - s^2 / 3) / s^4 at z = s^2, |s| <= (sqrt2 - 1) / (sqrt2 + 1)",
               lim(lambda z: 3 * (mp.atanh(rt(z)) / rt(z) - 1 - z / 3) / z**2, mp.mpf(3) / 5),
               (0, ((rt(2) - 1) / (rt(2) + 1)) ** 2), {"f64": (6, 0), "f32": (3, 0)}, None),
    "sin": ("(sin(y) / y - 1) / y^2 at z = y^2, |y| <= pi / 4",
            lim(lambda z: (mp.sin(rt(z)) / rt(z) - 1) / z, -mp.mpf(1) / 6),
            (0, (mp.pi / 4) ** 2), {"f64": (5, 0), "f32": (3, 0)}, None),
    "cos": ("(cos(y) - 1 + y^2 / 2) / y^4 at z = y^2, |y| <= pi / 4",
            lim(lambda z: (mp.cos(rt(z)) - 1 + z / 2) / z**2, mp.mpf(1) / 24),
            (0, (mp.pi / 4) ** 2), {"f64": (5, 0), "f32": (2, 0)}, None),
    "atan": ("(atan(t) / t - 1) / t^2 at z = t^2, |t| <= 7 / 16",
             lim(lambda z: (mp.atan(rt(z)) / rt(z) - 1) / z, -mp.mpf(1) / 3),
             (0, (mp.mpf(7) / 16) ** 2), {"f64": (11, 0), "f32": (5, 0)}, None),
    "asin": ("(asin(x) / x - 1) / x^2 at z = x^2, |x| <= 1 / 2",
             lim(lambda z: (mp.asin(rt(z)) / rt(z) - 1) / z, mp.mpf(1) / 6),
             (0, mp.mpf(1) / 4), {"f64": (12, 0), "f32": (5, 0)}, None),
    "sinh": ("(sinh(x) / x - 1) / x^2 at z = x^2, |x| <= 1",
             lim(lambda z: (mp.sinh(rt(z)) / rt(z) - 1) / z, mp.mpf(1) / 6),
             (0, 1), {"f64": (6, 0), "f32": (3, 0)}, None),
    "cosh": ("(cosh(x) - 1 - x^2 / 2) / x^4 at z = x^2, |x| <= 1",
             lim(lambda z: (mp.cosh(rt(z)) - 1 - z / 2) / z**2, mp.mpf(1) / 24),
             (0, 1), {"f64": (6, 0), "f32": (3, 0)}, None),
    "tanh": ("(tanh(x) / x - 1) / x^2 at z = x^2, |x| <= 0.55",
             lim(lambda z: (mp.tanh(rt(z)) / rt(z) - 1) / z, -mp.mpf(1) / 3),
             (0, mp.mpf("0.55") ** 2), {"f64": (10, 0), "f32": (4, 0)}, None),
    "erf_small": ("erf(x) / x - 1 at z = x^2, |x| <= 0.84375",
                  lim(lambda z: mp.erf(rt(z)) / rt(z) - 1, 2 / rt(mp.pi) - 1),
                  (0, mp.mpf("0.84375") ** 2), {"f64": (10, 0), "f32": (5, 0)}, None),
    "erf_one": ("erf(1 + s) - ERX, -0.15625 <= s <= 0.25",
                lambda s: mp.erf(1 + s) - ERX,
                (-mp.mpf("0.15625"), mp.mpf("0.25")), {"f64": (14, 0), "f32": (6, 0)}, None),
    "erfc_mid": ("(H(c + t) - H(c)) / t, H(x) = x e^(x^2) erfc(x), c = 2.0625, |t| <= 0.8125",
                 lim(lambda t: (H(ERFC_C + t) - H(ERFC_C)) / t, mp.diff(H, ERFC_C)),
                 (-mp.mpf("0.8125"), mp.mpf("0.8125")), {"f64": (17, 0), "f32": (8, 0)}, None),
    "erfc_far": ("(H(x) - 1 / sqrt(pi)) / t at t = 1 / x^2, 2.875 <= x <= 6",
                 lambda t: (H(1 / rt(t)) - 1 / rt(mp.pi)) / t,
                 (mp.mpf(1) / 36, 1 / mp.mpf("2.875") ** 2), {"f64": (5, 5), "f32": (2, 2)}, None),
    "erfc_tail": ("(H(x) - 1 / sqrt(pi)) / t at t = 1 / x^2, 6 <= x <= 28",
                  lambda t: (H(1 / rt(t)) - 1 / rt(mp.pi)) / t,
                  (mp.mpf(1) / 784, mp.mpf(1) / 36), {"f64": (4, 4), "f32": (2, 1)}, None),
    "erfinv_central": ("erfinv(x) / x at t = w - 3.125, w = -log(1 - x^2) <= 6.25",
                       lambda t: erfinv_ratio(t + mp.mpf("3.125")),
                       (-mp.mpf("3.125"), mp.mpf("3.125")), {"f64": (12, 0), "f32": (8, 0)}, None),
    "erfinv_tail": ("erfinv(x) / x at t = sqrt(w) - 4, 6.25 <= w <= 37.5",
                    lambda t: erfinv_ratio((t + 4) ** 2),
                    (-mp.mpf("1.5"), rt(mp.mpf("37.5")) - 4), {"f64": (10, 0), "f32": (6, 0)}, None),
    "lgamma_one": ("lgamma(1 + t) / t, 0 <= t <= 1/4",
                   lim(lambda t: mp.loggamma(1 + t) / t, -mp.euler),
                   (0, mp.mpf(1) / 4), {"f64": (13, 0), "f32": (6, 0)}, None),
    "lgamma_mid": ("(lgamma(3/2 + t) - lgamma(3/2)) / t, |t| <= 1/4",
                   lim(lambda t: (mp.loggamma(mp.mpf(3) / 2 + t) - mp.loggamma(mp.mpf(3) / 2)) / t, mp.digamma(mp.mpf(3) / 2)),
                   (-mp.mpf(1) / 4, mp.mpf(1) / 4), {"f64": (15, 0), "f32": (6, 0)}, None),
    "lgamma_two": ("lgamma(2 + t) / t, -0.28 <= t <= 1/2",
                   lim(lambda t: mp.loggamma(2 + t) / t, 1 - mp.euler),
                   (-mp.mpf("0.28"), mp.mpf(1) / 2), {"f64": (16, 0), "f32": (7, 0)}, None),
    "lgamma_stirling": ("(lgamma(x) - (x - 1/2) log x + x - log(2 pi) / 2) x at t = 1 / x^2, x >= 8",
                        lim(stirling_rest, mp.mpf(1) / 12),
                        (0, mp.mpf(1) / 64), {"f64": (6, 0), "f32": (2, 0)}, None),
    "digamma_low": ("digamma(x) / (x - x0) at t = x - 1.375, 1 <= x <= 1.75, x0 digamma's zero",
                    lambda t: mp.digamma(mp.mpf("1.375") + t) / (mp.mpf("1.375") + t - X0),
                    (-mp.mpf("0.375"), mp.mpf("0.375")), {"f64": (19, 0), "f32": (9, 0)}, None),
    "digamma_high": ("digamma(x) / (x - x0) at t = x - 2.125, 1.75 <= x <= 2.5",
                     lambda t: mp.digamma(mp.mpf("2.125") + t) / (mp.mpf("2.125") + t - X0),
                     (-mp.mpf("0.375"), mp.mpf("0.375")), {"f64": (15, 0), "f32": (7, 0)}, None),
    "digamma_asymptotic": ("(log x - 1 / (2 x) - digamma(x)) x^2 at t = 1 / x^2, x >= 10",
                           lim(digamma_rest, mp.mpf(1) / 12),
                           (0, mp.mpf(1) / 100), {"f64": (6, 0), "f32": (2, 0)}, None),
}


def trunc_bits(x, bits):
    """x with only its `bits` leading significant bits (toward zero)."""
    e = mp.floor(mp.log(abs(x), 2))
    scale = mp.mpf(2) ** (bits - 1 - e)
    return mp.sign(x) * mp.floor(abs(x) * scale) / scale


def split(x, bits, parts):
    """x as `parts` - 1 pieces of `bits` leading bits each, then the rest (rounded later)."""
    out = []
    rest = x
    for _ in range(parts - 1):
        piece = trunc_bits(rest, bits)
        out.append(piece)
        rest = rest - piece
    out.append(rest)
    return out


def tables():
    """name: list of u32 words. TWO_OVER_PI_BITS: 2/pi = sum_j w[j] 2^(-32 (j + 1)) (f64);
    TWO_OVER_PI_12: 2/pi = sum_j w[j] 2^(-12 (j + 1)) (f32, 12 bits a word)."""
    with mp.workdps(400):
        bits = int(mp.floor((2 / mp.pi) * mp.mpf(2) ** (32 * 38)))
    with mp.workdps(400):
        bits12 = int(mp.floor((2 / mp.pi) * mp.mpf(2) ** (12 * 18)))
    return {"TWO_OVER_PI_BITS": [(bits >> (32 * (37 - j))) & 0xFFFFFFFF for j in range(38)],
            "TWO_OVER_PI_12": [(bits12 >> (12 * (17 - j))) & 0xFFF for j in range(18)]}


def constants():
    """name: (exact value, what). Splits are named NAME_1, NAME_2, ... or _HI, _LO."""
    c = {}

    def put(name, parts, what):
        for suffix, v in zip(["_HI", "_LO"] if len(parts) == 2 else [f"_{i + 1}" for i in range(len(parts))], parts):
            c[name + suffix] = (v, what)

    ln2 = mp.log(2)
    # ln2 with 21 leading bits, so that k LN2_HI is exact for |k| < 2^32; the rest rounded.
    put("LN2", split(ln2, 21, 2), "ln2 = LN2_HI + LN2_LO, LN2_HI with 21 bits")
    put("LN2F", split(ln2, 12, 2), "ln2 = LN2F_HI + LN2F_LO, LN2F_HI with 12 bits (f32)")
    put("LN2R", [ln2, ln2 - mp.mpf(float(ln2))], "ln2 in two doubles")
    put("LN2FR", [ln2, ln2 - mp.mpf(float(np.float32(ln2)))], "ln2 in two floats")
    c["LOG2E"] = (1 / ln2, "1 / ln2")
    c["LN2"] = (ln2, "ln2")
    put("IVLN2", split(1 / ln2, 32, 2), "1 / ln2, the high part with 32 bits")
    put("IVLN2F", split(1 / ln2, 12, 2), "1 / ln2, the high part with 12 bits (f32)")
    put("IVLN10", split(1 / mp.log(10), 32, 2), "1 / ln10, the high part with 32 bits")
    put("IVLN10F", split(1 / mp.log(10), 12, 2), "1 / ln10, the high part with 12 bits (f32)")
    put("LOG10_2", split(mp.log10(2), 32, 2), "log10(2), the high part with 32 bits")
    put("LOG10_2F", split(mp.log10(2), 12, 2), "log10(2), the high part with 12 bits (f32)")
    # pi / 2 in four pieces of 33 bits and a rest: k PIO2_i is exact for |k| < 2^20.
    put("PIO2", split(mp.pi / 2, 33, 5), "pi / 2 = PIO2_1 + ... + PIO2_5, 33 bits each but the last")
    # f32: pieces of 11 bits (k < 2^13), then the rest.
    put("PIO2F", split(mp.pi / 2, 11, 6), "pi / 2 = PIO2F_1 + ... + PIO2F_6, 11 bits each but the last")
    c["TWO_OVER_PI"] = (2 / mp.pi, "2 / pi")
    c["PIO4"] = (mp.pi / 4, "pi / 4")
    c["PI3O4"] = (3 * mp.pi / 4, "3 pi / 4")
    put("PI", [mp.pi, mp.pi - mp.mpf(float(mp.pi))], "pi in two doubles")
    put("PIO2R", [mp.pi / 2, mp.pi / 2 - mp.mpf(float(mp.pi / 2))], "pi / 2 in two doubles")
    put("PIO4R", [mp.pi / 4, mp.pi / 4 - mp.mpf(float(mp.pi / 4))], "pi / 4 in two doubles")
    put("PIF", [mp.pi, mp.pi - mp.mpf(float(np.float32(mp.pi)))], "pi in two floats")
    put("PIO2F_R", [mp.pi / 2, mp.pi / 2 - mp.mpf(float(np.float32(mp.pi / 2)))], "pi / 2 in two floats")
    put("PIO4F_R", [mp.pi / 4, mp.pi / 4 - mp.mpf(float(np.float32(mp.pi / 4)))], "pi / 4 in two floats")
    put("PI_S", split(mp.pi, 26, 2), "pi, the high part with 26 bits")
    put("PIF_S", split(mp.pi, 12, 2), "pi, the high part with 12 bits (f32)")
    for name, v in [("ATAN_HALF", mp.atan(mp.mpf(1) / 2)), ("ATAN_ONE_HALF", mp.atan(mp.mpf(3) / 2))]:
        put(name, [v, v - mp.mpf(float(v))], f"{name.lower()} in two doubles")
        put(name + "F", [v, v - mp.mpf(float(np.float32(v)))], f"{name.lower()} in two floats")
    c["SQRT2"] = (rt(2), "sqrt(2)")
    c["ERX"] = (ERX, "erf(1) to 24 bits")
    c["SQRTPI_2"] = (rt(mp.pi) / 2, "sqrt(pi) / 2")
    c["TWO_THIRDS"] = (mp.mpf(2) / 3, "2 / 3")
    put("TWO_THIRDS", split(mp.mpf(2) / 3, 26, 2), "2 / 3, the high part with 26 bits")
    put("TWO_THIRDSF", split(mp.mpf(2) / 3, 12, 2), "2 / 3, the high part with 12 bits (f32)")
    c["HALF_LOG_2PI"] = (mp.log(2 * mp.pi) / 2, "log(2 pi) / 2")
    put("X0", [X0, X0 - mp.mpf(float(X0))], "digamma's zero in two doubles")
    put("X0F", [X0, X0 - mp.mpf(float(np.float32(X0)))], "digamma's zero in two floats")
    put("X0M1", [X0 - 1, X0 - 1 - mp.mpf(float(X0 - 1))], "digamma's zero less 1, in two doubles")
    put("X0M1F", [X0 - 1, X0 - 1 - mp.mpf(float(np.float32(X0 - 1)))], "digamma's zero less 1, in two floats")
    c["EULER"] = (mp.euler, "Euler's gamma")
    v = H(ERFC_C)
    put("ERFC_MID", [v, v - mp.mpf(float(v))], "H(2.0625) in two doubles")
    put("ERFC_MIDF", [v, v - mp.mpf(float(np.float32(v)))], "H(2.0625) in two floats")
    v = 1 / rt(mp.pi)
    put("INVSQRTPI", [v, v - mp.mpf(float(v))], "1 / sqrt(pi) in two doubles")
    put("INVSQRTPIF", [v, v - mp.mpf(float(np.float32(v)))], "1 / sqrt(pi) in two floats")
    v = mp.loggamma(mp.mpf(3) / 2)
    put("LGAMMA_MID", [v, v - mp.mpf(float(v))], "lgamma(3/2) in two doubles")
    put("LGAMMA_MIDF", [v, v - mp.mpf(float(np.float32(v)))], "lgamma(3/2) in two floats")
    return c


# ---- output ------------------------------------------------------------------------------

def literal(v, ftype):
    """The shortest decimal that reads back as v rounded to ftype (exactly, via f64)."""
    x = float(v)
    if ftype == "f32":
        x = float(np.float32(x))
    s = repr(x)
    return s if ("." in s or "e" in s or "inf" in s or "nan" in s) else s + ".0"


def derive(names=None):
    """{(name, ftype): [literal strings in file order]}, printing each block."""
    out = {}
    for name, (what, g, (a, b), degrees, w) in APPROXIMATIONS.items():
        if names and name not in names:
            continue
        for ftype, (n, m) in degrees.items():
            p, q, err = remez(g, a, b, n, m, w)
            unit = 2.0 ** (-53 if ftype == "f64" else -24)
            # the error after rounding the coefficients, on a fine grid
            pr = [mp.mpf(float(np.float32(float(c))) if ftype == "f32" else float(c)) for c in p]
            qr = [mp.mpf(float(np.float32(float(c))) if ftype == "f32" else float(c)) for c in q]
            grid = nodes(mp.mpf(a), mp.mpf(b), 400)
            rounded = max(abs(mp.polyval(pr[::-1], t) / mp.polyval(qr[::-1], t) - g(t)) for t in grid)
            lits = [literal(c, ftype) for c in p[::-1]] + ([literal(c, ftype) for c in q[:0:-1] + [q[0]]] if m else [])
            out[(name, ftype)] = lits
            print(f"{name} {ftype}: {what}; degree {n}" + (f"/{m}" if m else "")
                  + f"; minimax error {float(err):.3g} ({float(err) / unit:.3g} ulp of 1), "
                  + f"rounded {float(rounded):.3g}")
            print("   ", ", ".join(lits))
    return out


def blocks(text):
    """(kind, name, [(line index, start, end) of each literal]) for each marked block."""
    lines = text.split("\n")
    number = re.compile(r"(?<![\w.])-?\d+\.\d*(?:[eE][-+]?\d+)?|(?<![\w.])-?\d+[eE][-+]?\d+")
    found = []
    for i, line in enumerate(lines):
        m = re.search(r"coefficients: (\w+)", line)
        if m:
            spans = []
            for j in range(i + 1, len(lines)):
                code = lines[j].split("//")[0]
                spans += [(j, x.start(), x.end()) for x in number.finditer(code)]
                if "return" in code:
                    break
            found.append(("coefficients", m.group(1), spans))
        m = re.search(r"table: (\w+)", line)
        if m:
            spans = []
            for j in range(i + 1, len(lines)):
                spans += [(j, x.start(), x.end()) for x in re.finditer(r"0x[0-9a-fA-F]+u", lines[j])]
                if ");" in lines[j]:
                    break
            found.append(("table", m.group(1), spans))
        m = re.search(r"constant: (\w+)", line)
        if m:
            code = line.split("//")[0]
            spans = [(i, x.start(), x.end()) for x in number.finditer(code)]
            found.append(("constant", m.group(1), spans))
    return lines, found


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    files = {"f32": HERE / "float_f32.wgsl", "f64": HERE / "float_f64.wgsl"}
    needed = set()
    for ftype, path in files.items():
        if path.exists():
            needed |= {name for kind, name, _ in blocks(path.read_text())[1] if kind == "coefficients"}
    coefficients = derive(None if mode not in ("--check", "--update") else needed)
    consts = constants()
    bad = 0
    for ftype, path in files.items():
        if not path.exists():
            continue
        lines, found = blocks(path.read_text())
        for kind, name, spans in found:
            if kind == "coefficients":
                want = coefficients.get((name, ftype))
            elif kind == "table":
                want = [f"0x{w:0{3 if name.endswith('_12') else 8}x}u" for w in tables()[name]] if name in tables() else None
            else:
                want = [literal(consts[name][0], ftype)] if name in consts else None
            if want is None or len(want) != len(spans):
                print(f"{path.name}: {kind} {name}: {len(spans)} literals, derived "
                      f"{'none' if want is None else len(want)}")
                bad += 1
                continue
            for (j, s, e), lit in reversed(list(zip(spans, want))):
                have = lines[j][s:e]
                if kind == "table":
                    differs = have.lower() != lit
                else:
                    differs = float(have) != float(lit) or (ftype == "f32" and np.float32(float(have)) != np.float32(float(lit)))
                if differs:
                    if mode == "--check":
                        print(f"{path.name}:{j + 1}: {name}: {have}, derived {lit}")
                        bad += 1
                    lines[j] = lines[j][:s] + lit + lines[j][e:]
        if mode == "--update":
            path.write_text("\n".join(lines))
    if mode == "--check":
        print("every literal matches" if not bad else f"{bad} mismatches")
        sys.exit(1 if bad else 0)
    if mode != "--update":
        for name, (v, what) in consts.items():
            print(f"{name} = {literal(v, 'f64')} / f32 {literal(v, 'f32')}  ({what})")


if __name__ == "__main__":
    main()
