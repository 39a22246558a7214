"""One worker of the operator sweep (scripts/torch-ops.py): a process with torch and xhal.torch
imported once, which takes (op, dtype) tasks from the parent and answers one result each.

Started as `python scripts/torch_ops/worker.py CONFIG_JSON`, with the backend's environment
(XHAL_DEVICE naming it). It reads tasks from stdin, one JSON object a line, and writes its
messages to the file descriptor that was its stdout: `ready` once, then per task any number of
`at` (what it is about to do, so that the parent can say where a crash or a hang happened)
and one `result`. Everything else the process prints, torch's and xhal's included, goes to
stderr, which the parent keeps in a log file. Of the tool's own modules it imports judge.py
alone (how results are judged, torch only), as a module of its own: it runs with its own folder,
not scripts/, first on the path.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import signal
import sys
import time
import warnings
import zlib

# The messages to the parent get the real stdout; whatever else writes to fd 1 (a print in an
# operator, a C library) lands in the log with stderr instead of corrupting them.
_PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

# Warnings (deprecations, "not supported on this device, falling back") would fill the log;
# the results say what matters.
warnings.simplefilter("ignore")

import torch  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

import xhal.torch  # noqa: E402

# judge.py is imported from the source tree, which the tool keeps free of __pycache__ folders.
sys.dont_write_bytecode = True
from judge import NO_REFERENCE, Comparison, Difference, NoReference, wide  # noqa: E402

XHAL = "xhal:0"

# The tool's own tests need an operator that crashes the worker; this names one whose forward
# on xhal then dies of SIGSEGV, as a fault in a kernel would.
_CRASH_IN = os.environ.get("XHAL_TORCH_OPS_TEST_CRASH_IN")


def send(message: dict) -> None:
    _PROTOCOL.write(json.dumps(message) + "\n")


class Outcome:
    """What one sample gave: how the CPU refused it (raised in the forward), if it did; the
    class and details of a failure on xhal's side, if any; the operators that fell back; whether
    it passed only by the float64 reference (values beyond the tolerance, but no farther from
    the reference than the CPU's)."""

    def __init__(self, cpu_refused: str | None, fallbacks: dict, kind: str | None = None, details: dict | None = None,
                 reference_judged: bool = False):
        self.cpu_refused = cpu_refused
        self.fallbacks = fallbacks
        self.kind = kind
        self.details = details
        self.reference_judged = reference_judged


class Raised:
    """An exception one side raised, with the stage it raised in."""

    def __init__(self, stage: str, error: BaseException):
        self.stage = stage
        self.type = type(error).__name__
        lines = str(error).strip().splitlines()
        self.first_line = lines[0][:300] if lines else ""

    def describe(self) -> str:
        return f"{self.type} in {self.stage}: {self.first_line}" if self.first_line else f"{self.type} in {self.stage}"


class Run:
    """What running one sample on one device gave: outputs (after output_process_fn_grad), the
    sample's tensors afterwards, the gradients, or the exception that stopped it."""

    def __init__(self):
        self.outputs = None
        self.inputs = None
        self.gradients = None
        self.raised: Raised | None = None


# ---------------------------------------------------------------------------------------------
# Samples


def as_leaves(sample, grad: bool):
    """The sample with every tensor a leaf of its own (detached, storage and strides kept) that
    requires grad when `grad` is true and the sample's tensor does. OpInfos build some inputs as
    views of other tensors; gradients are taken with respect to the tensors themselves, the
    same way on both sides."""

    def leaf(value):
        if isinstance(value, torch.Tensor):
            return value.detach().requires_grad_(grad and value.requires_grad)
        return value

    return sample.transform(leaf)


def cpu_copy(sample):
    """The sample for the CPU side (the samples are made on xhal, as test_compare_cpu makes
    them on CUDA): every tensor copied to the CPU with its whole storage, strides and offset,
    so that operators reading beyond a view (as_strided) see the same memory, and every device
    argument naming xhal naming the CPU. Tensors that the OpInfo put on the CPU on purpose
    (tensor_split's indices) are copied too, so that an in-place operator on one side leaves
    the other side's alone."""

    def convert(value):
        if isinstance(value, torch.Tensor):
            return storage_copy(value).requires_grad_(value.requires_grad)
        if isinstance(value, torch.device) and value.type == "xhal":
            return torch.device("cpu")
        if isinstance(value, str) and value.startswith("xhal"):
            return "cpu"
        if isinstance(value, list):
            return [convert(v) for v in value]
        if isinstance(value, tuple):
            return tuple(convert(v) for v in value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    return SampleInput(
        convert(sample.input),
        args=convert(sample.args),
        kwargs=convert(sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


def float64_copy(sample):
    """A CPU sample (`cpu_copy`'s) with every floating tensor and dtype argument made float64,
    every complex one complex128, each tensor with its whole storage and its requires_grad: the
    sample of the float64 reference."""

    def widen(value):
        # `transform` hands over the tensors and the dtypes, under no_grad.
        if isinstance(value, torch.dtype):
            return wide(value)
        return storage_copy(value, wide(value.dtype)).requires_grad_(value.requires_grad)

    return sample.transform(widen)


def storage_copy(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`t` on the CPU (converted to `dtype`, if given) as a view of a copy of its whole storage
    (a plain copy where there is no storage to view: sparse tensors, and conjugate or negative
    views)."""
    with torch.no_grad():
        t = t.detach()
        if t.layout != torch.strided or t.is_conj() or t.is_neg():
            return t.to("cpu", dtype=dtype, copy=True)
        elements = t.untyped_storage().nbytes() // t.element_size()
        storage = t.as_strided((elements,), (1,), 0).to("cpu", dtype=dtype, copy=True)
        return storage.as_strided(t.shape, t.stride(), t.storage_offset())


def tensors(sample) -> list[torch.Tensor]:
    return [t for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0] if isinstance(t, torch.Tensor)]


def names_the_cpu(sample) -> bool:
    """Whether the sample asks for CPU tensors (`zeros_like(x, device="cpu")`), or holds some
    (tensor_split's indices): then xhal's outputs may be on the CPU too."""
    leaves = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
    return any(
        (isinstance(v, torch.Tensor) and v.device.type == "cpu")
        or (isinstance(v, torch.device) and v.type == "cpu")
        or (isinstance(v, str) and v.startswith("cpu"))
        for v in leaves
    )


def any_requires_grad(sample) -> bool:
    return any(t.requires_grad for t in tensors(sample))


def describe_sample(sample) -> str:
    """The sample's tensors by shape and dtype and its other arguments, on one line."""

    def show(value):
        if isinstance(value, torch.Tensor):
            layout = "" if value.layout == torch.strided else f" {str(value.layout).replace('torch.', '')}"
            strided = "" if value.layout != torch.strided or value.is_contiguous() else " non-contiguous"
            return f"{tuple(value.shape)} {str(value.dtype).replace('torch.', '')}{layout}{strided}"
        if isinstance(value, (list, tuple)):
            inner = ", ".join(show(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
        if isinstance(value, torch.dtype):
            return str(value).replace("torch.", "")
        if callable(value):
            return getattr(value, "__name__", type(value).__name__)
        return repr(value)

    parts = [show(sample.input)]
    parts += [show(a) for a in sample.args]
    parts += [f"{k}={show(v)}" for k, v in sample.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= 240 else text[:237] + "..."


def pick_samples(samples: list, count: int) -> list[tuple[int, object]]:
    """`count` samples spread evenly over the list, first and last included, with their
    indices: OpInfos list their simplest samples (0-dim, empty) first, so the first few alone
    would leave every larger shape out."""
    if len(samples) <= count:
        return list(enumerate(samples))
    if count == 1:
        return [(0, samples[0])]
    indices = sorted({round(i * (len(samples) - 1) / (count - 1)) for i in range(count)})
    return [(i, samples[i]) for i in indices]


# ---------------------------------------------------------------------------------------------
# Running


def run_sample(op, sample, device: str, differentiable: bool, where: str,
               cotangent_dtypes: list[torch.dtype] | None = None) -> Run:
    """Runs the op on the sample on `device`; with `differentiable`, also the backward of the
    outputs against a fixed random cotangent, for the gradients of every input that requires
    grad (see `gradients` for `cotangent_dtypes`)."""
    run = Run()
    stage = "forward"
    # A factory function's sample without a device argument makes its tensors on the default
    # device: the device under test, for the time of the call.
    default_device = contextlib.nullcontext() if tensors(sample) else torch.device(device)
    try:
        send({"type": "at", "where": f"{where}: forward on {device}", "cpu_only": device == "cpu"})
        if device != "cpu" and op.name == _CRASH_IN:
            os.kill(os.getpid(), signal.SIGSEGV)
        with default_device:
            outputs = op(sample.input, *sample.args, **sample.kwargs)
        stage = "output_process_fn_grad"
        outputs = sample.output_process_fn_grad(outputs)
        run.outputs = outputs
        if differentiable:
            stage = "backward"
            send({"type": "at", "where": f"{where}: backward on {device}", "cpu_only": device == "cpu"})
            run.gradients = gradients(sample, outputs, cotangent_dtypes)
    except Exception as error:  # noqa: BLE001 - every exception is a result to compare
        run.raised = Raised(stage, error)
    # Only tensors can have been changed by the op; the other arguments differ by design
    # (a device argument names xhal on one side).
    run.inputs = tensors(sample)
    return run


def gradients(sample, outputs, cotangent_dtypes: list[torch.dtype] | None = None):
    """The gradients of the sample's tensors that require grad, by the backward of the
    differentiable outputs against cotangents drawn on the CPU from a fixed seed, so that both
    devices get the same. They are drawn in each output's dtype, or in `cotangent_dtypes`: the
    float64 reference draws the values that the CPU's run drew, in the CPU's outputs' dtypes,
    and widens them."""
    inputs = [t for t in tensors(sample) if t.requires_grad]
    results = differentiable_results(outputs)
    if not inputs or not results:
        return None
    dtypes = cotangent_dtypes if cotangent_dtypes is not None else [r.dtype for r in results]
    if len(dtypes) != len(results):
        raise ValueError(f"{len(results)} differentiable outputs, where the CPU's run had {len(dtypes)}")
    generator = torch.Generator().manual_seed(0)
    cotangents = [
        torch.randn(r.shape, dtype=dtype, generator=generator).to(r.device, r.dtype)
        for r, dtype in zip(results, dtypes)
    ]
    return torch.autograd.grad(results, inputs, cotangents, allow_unused=True)


def differentiable_results(outputs) -> list[torch.Tensor]:
    return [
        t for t in tree_flatten(outputs)[0]
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]


# ---------------------------------------------------------------------------------------------
# One (op, dtype)


def check_sample(op, sample, index: int, differentiable: bool, comparison: Comparison, seed: int) -> Outcome:
    """Runs one sample on the CPU and on xhal and compares them; a difference in floating values
    beyond the tolerance, also with a float64 reference (judge.py)."""
    where = f"sample {index} ({describe_sample(sample)})"
    # Each side starts from the same random state, so random operators that draw from the CPU
    # generator see the same numbers (only their shapes are compared, though).
    context = {"sample": index, "sample_description": describe_sample(sample)}
    try:
        # Kept as it is before any run changes it (in-place operators), for the float64 reference.
        original = cpu_copy(sample)
    except Exception as error:  # noqa: BLE001 - reading xhal's tensors back is part of the test
        raised = Raised("copying the sample to the CPU", error)
        return Outcome(None, {}, "error", {**context, "message": f"{where}: xhal raised {raised.describe()}",
                                           "exception": raised.type})
    torch.manual_seed(seed)
    cpu = run_sample(op, as_leaves(cpu_copy(original), differentiable), "cpu", differentiable, where)
    # A sample that requires grad can make the operator itself refuse (in-place operators on
    # leaves): then it is compared without gradients rather than not at all.
    if cpu.raised and cpu.raised.stage == "forward" and differentiable and any_requires_grad(sample):
        differentiable = False
        torch.manual_seed(seed)
        cpu = run_sample(op, as_leaves(cpu_copy(original), False), "cpu", False, where)
    xhal.torch.reset_fallback_counts()
    torch.manual_seed(seed)
    got = run_sample(op, as_leaves(sample, differentiable), XHAL, differentiable, where)
    fallbacks = xhal.torch.fallback_counts()
    send({"type": "at", "where": f"{where}: comparing"})
    # torch's own helpers (freeze_rng_state, fork_rng) call into the device module of the
    # available accelerator even for CPU tensors: a failure there is xhal's, not the CPU's.
    xhal_broke_cpu = bool(cpu.raised and "torch.xhal" in cpu.raised.first_line)
    refused = cpu.raised and cpu.raised.stage != "backward" and not xhal_broke_cpu
    cpu_refused = cpu.raised.describe() if refused else None

    def failure(kind: str, message: str, **more) -> Outcome:
        return Outcome(cpu_refused, fallbacks, kind, {**context, "message": f"{where}: {message}", **more})

    if xhal_broke_cpu:
        return failure("error", f"the CPU run raised {cpu.raised.describe()}, because xhal is the accelerator",
                       exception=cpu.raised.type)
    if cpu.raised and got.raised and cpu.raised.type == got.raised.type:
        if cpu_refused or got.raised.stage != "backward":
            return Outcome(cpu_refused, fallbacks)
        # Both refused the backward alike: the forward results are still compared.
    elif got.raised:
        also = f", where the CPU raised {cpu.raised.describe()}" if cpu.raised else ""
        return failure("error", f"xhal raised {got.raised.describe()}{also}", exception=got.raised.type)
    elif cpu.raised:
        return failure("mismatch", f"the CPU raised {cpu.raised.describe()}, xhal raised nothing")
    if not names_the_cpu(sample):
        outputs = [t for t in tree_flatten(got.outputs)[0] if isinstance(t, torch.Tensor)]
        misplaced = [t.device for t in outputs if t.device.type != "xhal"]
        if misplaced:
            return failure("mismatch", f"an output is on {misplaced[0]}, not on xhal")

    def first_difference(reference: Run | None) -> Difference | None:
        """The first difference in the outputs, the inputs after the op, then the gradients;
        with the float64 reference's run, floating values judged against it."""
        for what, results in (("output", "outputs"), ("input after the op", "inputs"), ("gradient", "gradients")):
            judge_by = NO_REFERENCE if reference is None else getattr(reference, results)
            difference = comparison.first_difference(getattr(cpu, results), getattr(got, results), what, judge_by)
            if difference:
                return difference
        return None

    try:
        difference = first_difference(None)
    except Exception as error:  # noqa: BLE001 - reading an xhal result back is part of the test
        raised = Raised("copying a result to the CPU", error)
        return failure("error", f"xhal raised {raised.describe()}", exception=raised.type)
    # Such a difference may be the CPU's rounding as much as xhal's: the reference tells.
    if difference and difference.reference_can_judge:
        reference = reference_run(op, original, differentiable, cpu, seed, where)
        if reference.raised:
            difference.message += f"; no float64 reference could be made: it raised {reference.raised.describe()}"
        else:
            try:
                judged = first_difference(reference)
            except NoReference as why:
                difference.message += f"; no float64 reference could be made: {why}"
            else:
                if judged is None:
                    return Outcome(cpu_refused, fallbacks, reference_judged=True)
                difference = judged
    if difference:
        return failure("mismatch", difference.message, **difference.details)
    return Outcome(cpu_refused, fallbacks)


def reference_run(op, original, differentiable: bool, cpu: Run, seed: int, where: str) -> Run:
    """The float64 reference: the op on the CPU on `original` (the sample's CPU copy before any
    run) in float64, from the same random state as the other runs, with leaves that require
    grad as the CPU's did, and the backward, against the cotangents the CPU's run drew, widened,
    where the CPU's run took one (not where both sides refused it alike)."""
    torch.manual_seed(seed)
    cotangent_dtypes = [r.dtype for r in differentiable_results(cpu.outputs)]
    return run_sample(op, as_leaves(float64_copy(original), differentiable), "cpu",
                      differentiable and cpu.raised is None, f"{where}, float64 reference", cotangent_dtypes)


def make_samples(op, device: str, dtype: torch.dtype, differentiable: bool, seed: int) -> tuple[list, bool]:
    """The op's reference inputs on `device`, and whether gradients are compared. Some OpInfos
    cannot make theirs with requires_grad (clamp's and where's put it on integer tensors):
    those samples are made without, and compared without gradients."""
    torch.manual_seed(seed)
    try:
        return list(op.reference_inputs(device, dtype, requires_grad=differentiable)), differentiable
    except Exception:
        if not differentiable:
            raise
    torch.manual_seed(seed)
    return list(op.reference_inputs(device, dtype, requires_grad=False)), False


def check(op, key: str, dtype: torch.dtype, config: dict, random: bool) -> dict:
    """Classifies one (op, dtype); the classes are those docs/torch-ops.md explains."""
    if dtype not in op.supported_dtypes("cpu"):
        return {"class": "unsupported"}
    unreliable = config["cpu_unreliable"].get(key, {})
    if str(dtype).replace("torch.", "") in unreliable.get("dtypes", []):
        return {"class": "cpu-error", "not_run": True, "details": {"message": unreliable["reason"]}}
    differentiable = bool(
        op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
        and dtype in op.supported_backward_dtypes("cpu")
    )
    seed = zlib.crc32(f"{op.name}.{op.variant_test_name}.{dtype}".encode())
    send({"type": "at", "where": "making the samples on xhal:0"})
    try:
        samples, differentiable = make_samples(op, XHAL, dtype, differentiable, seed)
    except Exception as error:  # noqa: BLE001 - making tensors on xhal is part of the test
        on_xhal = Raised("reference_inputs", error)
        try:
            make_samples(op, "cpu", dtype, differentiable, seed)
        except Exception as cpu_error:  # noqa: BLE001 - the OpInfo's own failure
            return {"class": "cpu-error", "details": {"message": Raised("reference_inputs", cpu_error).describe()}}
        return {"class": "error", "details": {"message": f"making the samples on xhal:0 raised {on_xhal.describe()}",
                                              "exception": on_xhal.type}}
    picked = pick_samples(samples, config["samples"])
    if not picked:
        return {"class": "no-samples"}
    comparison = Comparison(config["tolerances"], dtype, values=not random)
    outcomes = [check_sample(op, sample, index, differentiable, comparison, seed + index) for index, sample in picked]
    fallbacks: dict[str, int] = {}
    for outcome in outcomes:
        for name, count in outcome.fallbacks.items():
            fallbacks[name] = fallbacks.get(name, 0) + count
    result = {
        "samples": len(picked),
        # Samples that differed beyond the tolerance but passed by the float64 reference.
        "reference_judged": sum(outcome.reference_judged for outcome in outcomes),
        "fallbacks": dict(sorted(fallbacks.items())),
    }
    if all(outcome.cpu_refused for outcome in outcomes):
        message = f"the CPU raised on every sample, first {outcomes[0].cpu_refused}"
        return {**result, "class": "cpu-error", "details": {"message": message}}
    failures = [outcome for outcome in outcomes if outcome.kind]
    if failures:
        details = {**failures[0].details, "failed_samples": len(failures)}
        return {**result, "class": failures[0].kind, "details": details}
    if random:
        return {**result, "class": "random"}
    return {**result, "class": "fallback" if fallbacks else "native"}


def main() -> None:
    config = json.loads(sys.argv[1])
    # The workers share the cores (--jobs is the number of cores): one CPU thread each.
    torch.set_num_threads(1)
    ops = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""): op for op in op_db}

    def is_random(key: str, op) -> bool:
        return op.has_nondeterministic_output or any(fnmatch.fnmatchcase(key, p) for p in config["random_ops"])

    count = xhal.torch.device_count()
    send({
        "type": "ready",
        "device_count": count,
        "device": xhal.torch.devices()[0]["label"] if count else None,
        "device_name": xhal.torch.devices()[0]["name"] if count else None,
        "native_dtypes": [str(d).replace("torch.", "") for d in xhal.torch.native_dtypes(XHAL)] if count else [],
        "torch": torch.__version__,
        "xhal": xhal.__version__,
        "ops": {key: {"name": op.name} for key, op in sorted(ops.items())},
    })
    for line in sys.stdin:
        task = json.loads(line)
        start = time.monotonic()
        op = ops[task["op"]]
        result = check(op, task["op"], getattr(torch, task["dtype"]), config, is_random(task["op"], op))
        result["seconds"] = round(time.monotonic() - start, 3)
        send({"type": "result", **task, **result})


if __name__ == "__main__":
    main()
