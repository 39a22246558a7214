"""The operator sweep itself (scripts/torch-ops.py): a crashing operator costs only its own
case, --check fails on an undeclared failure and on a stale declaration, a run in which no case
ran fails, and a value beyond the tolerance fails only where xhal is farther than the CPU from
the float64 reference. The tool sets up its backend itself, so this runs once, in the cpu
session."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "scripts" / "torch-ops.py"
# The worker's test hook makes `sum` crash (SIGSEGV in its forward on xhal); `neg` and `tan`
# come before and after it in the worker's queue.
OPS = ["--ops", "^(neg|sum|tan)$", "--samples", "2", "--jobs", "1"]
CRASH = {"XHAL_TORCH_OPS_TEST_CRASH_IN": "sum"}

pytestmark = pytest.mark.skipif(
    not os.environ.get("XHAL_DEVICE", "").startswith("cpu"),
    reason="the sweep's logic is the same on every backend; it is tested once, in the cpu session",
)


def sweep(tmp_path, *arguments, known="", environment=None):
    known_file = tmp_path / "known.toml"
    known_file.write_text(known)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(TOOL), "--backend", "cpu-compile", "--dtype", "float32", "--json", "--check",
         "--out", str(out), "--known", str(known_file), *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(environment or {})},
    )
    assert done.stdout, f"no summary; stderr:\n{done.stderr}"
    return done.returncode, json.loads(done.stdout), out


def classes(out):
    results = json.loads((out / "cpu-compile.json").read_text())["results"]
    return {op: by_dtype["float32"]["class"] for op, by_dtype in results.items()}


def test_a_crash_costs_only_its_case_and_fails_the_check_undeclared(tmp_path):
    code, summary, out = sweep(tmp_path, *OPS, environment=CRASH)
    assert code == 1
    found = classes(out)
    assert found["sum"] == "crash"
    assert found["neg"] in ("native", "fallback") and found["tan"] in ("native", "fallback")
    failure = next(f for f in summary["backends"]["cpu-compile"]["failures"] if f["op"] == "sum")
    assert "SIGSEGV" in failure["message"] and "forward on xhal" in failure["message"], failure["message"]
    assert [(u["op"], u["class"]) for u in summary["check"]["undeclared"]] == [("sum", "crash")]


def test_a_stale_declaration_fails_the_check(tmp_path):
    known = """
[[known]]
op = "sum"
class = "crash"
reason = "the test's crash"

[[known]]
op = "neg"
backend = "cpu-*"
class = "error"
reason = "neg passes: this entry is stale"
"""
    code, summary, _ = sweep(tmp_path, *OPS, known=known, environment=CRASH)
    assert code == 1
    assert summary["check"]["undeclared"] == []
    assert len(summary["check"]["stale"]) == 1 and "'neg'" in summary["check"]["stale"][0]


def test_a_kernel_torch_cannot_run_reliably_is_not_run_and_said(tmp_path):
    """grid_sample in half precision reads memory it does not own in torch's own CPU kernel, which
    xhal falls back to: the case is not run, and both the result and the summary say why."""
    code, summary, out = sweep(tmp_path, "--ops", "^nn.functional.grid_sample$", "--dtype", "bfloat16",
                               "--samples", "2", "--jobs", "1")
    assert code == 0, summary
    result = json.loads((out / "cpu-compile.json").read_text())["results"]["nn.functional.grid_sample"]
    assert result["bfloat16"]["class"] == "cpu-error" and result["bfloat16"]["not_run"], result["bfloat16"]
    assert "unreliable in half precision" in result["bfloat16"]["details"]["message"]
    assert result["float32"]["class"] in ("native", "fallback"), result["float32"]
    listed = summary["backends"]["cpu-compile"]["not_run"]
    assert [(case["op"], case["dtype"]) for case in listed] == [("nn.functional.grid_sample", "bfloat16")]


def test_a_run_of_no_cases_fails(tmp_path):
    code, summary, _ = sweep(tmp_path, "--ops", "^no such operator$")
    assert code == 1 and summary["cases"] == 0 and not summary["ok"]


def test_misuse_exits_2(tmp_path):
    done = subprocess.run([sys.executable, str(TOOL), "--backend", "cpu-compile", "--dtype", "float33"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "float33" in done.stderr


@pytest.fixture
def judge(monkeypatch):
    """scripts/torch_ops/judge.py, the worker's judging (it needs torch alone), imported without
    writing __pycache__ into scripts/, as the tool itself runs."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("torch_ops.judge")


@pytest.fixture
def float16(judge):
    """The worker's comparison of a float16 case, with the tool's tolerances."""
    return judge.Comparison(importlib.import_module("torch_ops.settings").TOLERANCES, torch.float16, values=True)


def half(*values):
    return torch.tensor(values, dtype=torch.float16)


def wide(*values):
    return torch.tensor(values, dtype=torch.float64)


# Two float16 steps (2^-5 at this magnitude) apart, 35.46875 halfway between them, where the
# float16 tolerance allows 0.037.
CPU, XHAL = half(1.0, 35.5), half(1.0, 35.4375)


def test_a_difference_passes_where_xhal_is_no_farther_from_the_float64_reference(float16):
    difference = float16.first_difference(CPU, XHAL, "output")
    assert difference and difference.reference_can_judge, difference
    # xhal closer to the true value than the CPU, and as close (halfway).
    for exact in (35.46, 35.46875):
        assert float16.first_difference(CPU, XHAL, "output", wide(1.0, exact)) is None, exact


def test_a_difference_fails_where_xhal_is_farther_from_the_float64_reference(float16):
    difference = float16.first_difference(CPU, XHAL, "output", wide(1.0, 35.51))
    assert difference, "xhal is 0.0725 from the reference, the CPU 0.01"
    assert "1 of them farther from the float64 reference" in difference.message, difference.message
    assert "xhal 0.0725 from it, the CPU 0.01" in difference.message, difference.message
    assert difference.details["xhal_distance"] == pytest.approx(0.0725)
    # Closer than a NaN proves nothing: xhal must then be within the tolerance of the reference.
    nan = half(float("nan"))
    assert float16.first_difference(nan, half(1.0), "output", wide(1.0)) is None
    assert float16.first_difference(nan, half(1.5), "output", wide(1.0))


def test_integers_stay_exact_and_a_reference_of_another_dtype_judges_nothing(float16, judge):
    cpu, xhal = torch.tensor([1, 2]), torch.tensor([1, 3])
    difference = float16.first_difference(cpu, xhal, "output")
    assert difference and not difference.reference_can_judge, difference
    assert float16.first_difference(cpu, xhal, "output", torch.tensor([1, 3])), "an integer reference excused xhal"
    with pytest.raises(judge.NoReference, match="dtype torch.float32"):
        float16.first_difference(CPU, XHAL, "output", CPU.float())


def test_differing_booleans_are_a_mismatch_that_names_the_element(float16):
    # A boolean output of a float operator (logical_not, bool) compared elementwise: reporting
    # it must not subtract booleans, which torch refuses.
    difference = float16.first_difference(torch.tensor([True, False, True]), torch.tensor([True, True, True]),
                                          "output")
    assert difference and not difference.reference_can_judge, difference
    assert "1 of 3 elements differ" in difference.message, difference.message
    assert "at (1,) (xhal True, CPU False)" in difference.message, difference.message
