"""How the operator sweep judges xhal's results against the CPU's. worker.py imports it, and so
do the tool's tests: it needs torch alone, not xhal.

A value difference beyond the dtype's tolerance (settings.TOLERANCES) is not yet a wrong answer.
xhal computes float16 and bfloat16 in float32 and rounds once where a CPU composite rounds after
each step, and in an ill-conditioned float32 operator both sides err by more than the tolerance
(a sum that cancels, a backward through large exponents). Such a difference is judged against a
float64 reference, the same operator run on the CPU with the sample in float64 (the worker makes
it): it counts only where xhal's value is farther from the reference than twice the CPU's
largest distance on the same tensor (and two rounding steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

# How many rounding steps of the dtype (its unit roundoff, half its epsilon, times the
# reference's magnitude) xhal's value may be farther from the reference than the CPU's: a
# correctly rounded value is up to one step from the true one where the CPU's may happen to hit
# it, and a second allows for a rounding inside the operator (float32 arithmetic before the final
# rounding, an intermediate in the dtype). settings.py's comment and the text markdown.py writes
# say two.
ROUNDINGS = 2

# How many times the CPU's own error xhal's may be. Two programs that both compute correctly
# err by different amounts in an ill-conditioned case (a long sum in another order, a
# composite that rounds its intermediates in bfloat16 one step apart, which the cancellation
# that follows magnifies): an error within twice the CPU's is the same accuracy. An answer
# that is wrong, not merely rounded otherwise, is farther off than that.
CPU_FACTOR = 2

# `first_difference` without a float64 reference (None is a result: no gradients).
NO_REFERENCE = object()


class NoReference(Exception):
    """The float64 reference cannot judge a difference: its results have another structure,
    shape or dtype than the CPU's."""


@dataclass
class Difference:
    """The first difference between the CPU's results and xhal's: the message, the details for
    the results file, and whether it is one the float64 reference can judge (floating values
    beyond the tolerance; a structure, shape, dtype or integer difference is final)."""

    message: str
    details: dict = field(default_factory=dict)
    reference_can_judge: bool = False


def wide(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the float64 reference for `dtype`: float64 for a floating dtype,
    complex128 for a complex one, `dtype` itself otherwise."""
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else dtype


def distance(values: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """|values - reference| per element in float64: 0 where they are equal (infinities of one
    sign, NaN and NaN), infinite where only one of them is NaN or where they are different
    infinities or an infinity and a number."""
    exact = (values == reference) | (values.isnan() & reference.isnan())
    return torch.where(exact, 0.0, (values - reference).abs().nan_to_num(nan=math.inf, posinf=math.inf))


def no_farther_than_cpu(cpu: torch.Tensor, xhal: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype,
                        atol: float, rtol: float) -> torch.Tensor:
    """Per element, whether xhal's value is as accurate as the CPU's, measured against the
    float64 reference: |xhal - ref| <= CPU_FACTOR max|cpu - ref| + ROUNDINGS * u * |ref| + tiny,
    the maximum over the tensor's elements, u the unit roundoff of `dtype` and tiny its smallest
    normal (a step near zero). The CPU's error is taken over the whole tensor because rounding
    noise lands on different elements in two correct programs: where the CPU happens to cancel
    to the exact value, xhal's noise of the same size elsewhere is no loss of accuracy. Where
    the reference is NaN or infinite, xhal's value must equal it. Where the CPU's value is NaN
    or infinite and the reference is not, being closer than the CPU proves nothing: xhal's
    value must be within the dtype's tolerance of the reference (atol + rtol * |ref|)."""
    reference = reference.to(wide(dtype))
    xhal_distance = distance(xhal.to(reference.dtype), reference)
    cpu_distance = distance(cpu.to(reference.dtype), reference)
    finite = cpu_distance[cpu_distance.isfinite()]
    cpu_worst = float(finite.max()) if finite.numel() else 0.0
    magnitude = reference.abs()
    info = torch.finfo(dtype)
    allowed = torch.where(cpu_distance.isinf(), atol + rtol * magnitude,
                          CPU_FACTOR * cpu_worst + ROUNDINGS * info.eps / 2 * magnitude + info.tiny)
    return xhal_distance <= torch.where(reference.isfinite(), allowed, 0.0)


class Comparison:
    """How xhal's results are held against the CPU's: `tolerances` per dtype name (with a
    `default`); Python floats (from `item()` and the like) get the tolerance of the dtype under
    test, and no float64 reference. With `values` false (random operators) only structure,
    shapes, dtypes and devices count."""

    def __init__(self, tolerances: dict, dtype: torch.dtype, values: bool):
        self.tolerances = tolerances
        self.scalar_tolerance = self.tolerance(dtype)
        self.values = values

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        entry = self.tolerances.get(str(dtype).replace("torch.", ""), self.tolerances["default"])
        return entry["atol"], entry["rtol"]

    def first_difference(self, expected, actual, what: str, reference=NO_REFERENCE) -> Difference | None:
        """The first difference between the CPU's `expected` and xhal's `actual` (any nesting
        of tensors, numbers and other values), or None. With `reference`, the same results
        of the float64 reference, floating values beyond the tolerance count only where xhal's
        are farther from it than the CPU's (`no_farther_than_cpu`); raises NoReference when
        the reference does not have the results' structure."""
        expected_leaves, expected_spec = tree_flatten(expected)
        actual_leaves, actual_spec = tree_flatten(actual)
        if expected_spec != actual_spec:
            return Difference(f"{what}: the CPU returned {expected_spec}, xhal {actual_spec}".replace("\n", ""))
        if reference is NO_REFERENCE:
            reference_leaves = [NO_REFERENCE] * len(expected_leaves)
        else:
            reference_leaves, reference_spec = tree_flatten(reference)
            if reference_spec != expected_spec:
                raise NoReference(f"its {what} is {reference_spec}, the CPU's {expected_spec}".replace("\n", ""))
        for index, (e, a, r) in enumerate(zip(expected_leaves, actual_leaves, reference_leaves)):
            name = what if len(expected_leaves) == 1 else f"{what}[{index}]"
            difference = self.leaf_difference(e, a, name, r)
            if difference:
                return difference
        return None

    def leaf_difference(self, e, a, name: str, r=NO_REFERENCE) -> Difference | None:
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return Difference(f"{name}: the CPU returned {type(e).__name__}, xhal {type(a).__name__}")
        if not isinstance(e, torch.Tensor):
            if not self.values or e == a:
                return None
            if isinstance(e, float) and isinstance(a, float):
                atol, rtol = self.scalar_tolerance
                if math.isclose(a, e, rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(e)):
                    return None
            return Difference(f"{name}: the CPU returned {e!r}, xhal {a!r}")
        if e.shape != a.shape:
            return Difference(f"{name}: shape {tuple(a.shape)} on xhal, {tuple(e.shape)} on the CPU",
                              {"shape": list(e.shape)})
        if e.dtype != a.dtype:
            return Difference(f"{name}: dtype {a.dtype} on xhal, {e.dtype} on the CPU", {"shape": list(e.shape)})
        if not self.values:
            return None
        return self.value_difference(dense(e.detach()), dense(a.detach().cpu()), name, r)

    def value_difference(self, e: torch.Tensor, a: torch.Tensor, name: str, r=NO_REFERENCE) -> Difference | None:
        """As torch.testing.assert_close judges: |a - e| <= atol + rtol * |e|, NaN equal to
        NaN, integers and booleans exactly; with a reference `r`, floating elements beyond that
        pass where `no_farther_than_cpu` accepts them."""
        atol, rtol = self.tolerance(e.dtype)
        floating = e.is_floating_point() or e.is_complex()
        if floating:
            close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = a == e
        if bool(close.all()):
            return None
        differing = int((~close).sum())
        # A float64 CPU is as exact as a float64 reference would be: nothing to judge there.
        narrower = floating and wide(e.dtype) != e.dtype
        judged = narrower and r is not NO_REFERENCE
        if judged:
            r = reference_leaf(r, e, name)
            close = close | no_farther_than_cpu(e, a, r, e.dtype, atol, rtol)
            if bool(close.all()):
                return None
        # Booleans differ by one; they cannot be subtracted as they are.
        measure = wide(e.dtype) if floating else (torch.int64 if e.dtype == torch.bool else e.dtype)
        e64, a64 = e.to(measure), a.to(measure)
        # A NaN or an infinity on one side only is an infinite difference.
        absolute = torch.where(close, 0.0, (a64 - e64).abs().nan_to_num(nan=math.inf, posinf=math.inf))
        relative = torch.where(close, 0.0, (absolute / e64.abs()).nan_to_num(nan=math.inf, posinf=math.inf))
        worst = int(absolute.flatten().argmax())
        position = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), e.shape)) if e.dim() else ()
        max_abs, max_rel = float(absolute.max()), float(relative.max())
        values = f"xhal {a[position].item()!r}, CPU {e[position].item()!r}"
        details = {"shape": list(e.shape), "max_abs": max_abs, "max_rel": max_rel}
        if judged:
            # The largest differences are those of the elements the reference did not accept.
            counted = (f"{differing} of {e.numel()} elements differ, {int((~close).sum())} of them farther from "
                       "the float64 reference on xhal than on the CPU; of those, the largest")
            xhal_distance = float(distance(a64[position], r[position]))
            cpu_distance = float(distance(e64[position], r[position]))
            values += (f", float64 reference {r[position].item()!r}: xhal {xhal_distance:.3g} from it, "
                       f"the CPU {cpu_distance:.3g}")
            details |= {"xhal_distance": xhal_distance, "cpu_distance": cpu_distance}
        else:
            counted = f"{differing} of {e.numel()} elements differ; largest"
        message = (f"{name}: {counted} absolute difference {max_abs:.3g} at {position} ({values}), largest "
                   f"relative {max_rel:.3g}")
        return Difference(message, details, reference_can_judge=narrower)


def reference_leaf(r, e: torch.Tensor, name: str) -> torch.Tensor:
    """The reference's tensor for the CPU's `e`, checked to be `e` in float64."""
    if not isinstance(r, torch.Tensor):
        raise NoReference(f"its {name} is a {type(r).__name__}, not a tensor")
    if r.shape != e.shape or r.dtype != wide(e.dtype):
        raise NoReference(f"its {name} has shape {tuple(r.shape)} and dtype {r.dtype}, not "
                          f"{tuple(e.shape)} and {wide(e.dtype)}")
    return dense(r.detach())


def dense(t: torch.Tensor) -> torch.Tensor:
    t = t.to_dense() if t.layout != torch.strided else t
    return t.resolve_conj().resolve_neg()
