"""The command line of the operator sweep; see scripts/torch-ops.py."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from . import known, markdown
from .pool import Pool, PoolError
from .settings import CLASSES, COMPARED, CPU_UNRELIABLE, DTYPES, FAILURES, RANDOM_OPS, SUBSETS, TOLERANCES

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "target" / "torch-ops"
DEFAULT_KNOWN = ROOT / "python" / "tests_torch" / "known_ops.toml"


class UsageError(Exception):
    pass


class BackendFailed(Exception):
    """The backend could not be swept; the message says why."""


class NoDevice(Exception):
    """The backend's plugin (`name`) found no device here."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/torch-ops.py",
        description="Runs PyTorch's OpInfo database on xhal devices against torch's CPU and writes the "
                    "operator matrix (docs/torch-ops.md).",
    )
    parser.add_argument("--backend", action="append", default=[], metavar="NAME",
                        help="a backend as scripts/python-test.sh names it (cpu-compile, cpu-interpret, vulkan, "
                             "opencl, cuda-emulated, ...); repeatable")
    parser.add_argument("--dtype", action="append", default=None, metavar="DTYPE",
                        help="a dtype (" + ", ".join(DTYPES) + "), or `native`: float32 and the dtypes the device "
                             "has kernels for; repeatable (default: native and bfloat16)")
    parser.add_argument("--ops", metavar="REGEX", help="only the operators whose `name` or `name.variant` this "
                                                       "regular expression finds (re.search)")
    parser.add_argument("--subset", choices=sorted(SUBSETS), help="only a named list of operators")
    parser.add_argument("--samples", type=int, default=4, metavar="N", help="samples per case (default 4)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="worker processes per backend (default: the number of cores)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help="seconds one case may take before its worker is killed (default 60)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on any crash, timeout, mismatch or error that the known file does not "
                             "declare, and on any stale or unknown entry of it")
    parser.add_argument("--known", type=Path, default=DEFAULT_KNOWN, metavar="PATH",
                        help="the known failures (default python/tests_torch/known_ops.toml)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                        help="where the results (<backend>.json) and worker logs go (default target/torch-ops)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="afterwards, write the matrix of every results file in --out to PATH")
    args = parser.parse_args(argv)
    if not args.backend and not args.markdown:
        raise UsageError("nothing to do: name a backend (--backend) or a matrix to write (--markdown)")
    for dtype in args.dtype or []:
        if dtype not in DTYPES and dtype != "native":
            raise UsageError(f"unknown dtype {dtype!r}; the dtypes are native, " + ", ".join(DTYPES))
    if args.ops is not None:
        try:
            args.ops_pattern = re.compile(args.ops)
        except re.error as error:
            raise UsageError(f"--ops {args.ops!r} is not a regular expression: {error}") from None
    if args.samples < 1 or args.jobs < 1 or args.timeout <= 0:
        raise UsageError("--samples and --jobs must be at least 1, --timeout more than 0")
    return args


def backend_environment(backend: str, state: Path) -> dict:
    """The environment that runs the backend as scripts/python-test.sh runs it (through
    scripts/backend-env.sh), with XHAL_DEVICE naming its devices."""
    script = ('source scripts/backend-env.sh && backend_environment "$1" "$2" && '
              'printf "%s\\0" "$name" "${mode_variables[@]}"')
    done = subprocess.run(["bash", "-c", script, "bash", backend, os.path.relpath(state, ROOT)],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        reason = done.stderr.strip().removeprefix("FAILED: ")
        raise BackendFailed(reason or f"scripts/backend-env.sh refused {backend}")
    name, *variables = done.stdout.split("\0")[:-1]
    environment = {k: v for k, v in os.environ.items() if k != "XHAL_PLUGIN_PATH"}
    environment.setdefault("XHAL_TORCH_BUILD_DIR", str(ROOT / "target" / "torch-extension"))
    for assignment in variables:
        key, _, value = assignment.partition("=")
        environment[key] = value
    environment["XHAL_DEVICE"] = f"{name}:*"
    return environment


class Progress:
    """One line on stderr: rewritten in place on a terminal, printed every half minute otherwise."""

    def __init__(self, backend: str, total: int):
        self.backend = backend
        self.total = total
        self.done = 0
        self.tally: dict[str, int] = {}
        self.terminal = sys.stderr.isatty()
        self.last = 0.0

    def count(self, kind: str) -> None:
        self.done += 1
        self.tally[kind] = self.tally.get(kind, 0) + 1
        self.show()

    def show(self, final: bool = False) -> None:
        now = time.monotonic()
        if not (self.terminal or final or now - self.last >= 30):
            return
        self.last = now
        classes = ", ".join(f"{c} {self.tally[c]}" for c in CLASSES if c in self.tally)
        line = f"torch-ops {self.backend}: {self.done}/{self.total}" + (f" ({classes})" if classes else "")
        if self.terminal:
            sys.stderr.write("\r\033[K" + line + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def sweep(backend: str, args: argparse.Namespace, command: str) -> dict:
    """Runs the backend's cases and writes its results file."""
    state = args.out / backend
    state.mkdir(parents=True, exist_ok=True)
    environment = backend_environment(backend, state)
    config = {"samples": args.samples, "tolerances": TOLERANCES, "random_ops": RANDOM_OPS,
              "cpu_unreliable": CPU_UNRELIABLE}
    started = time.monotonic()
    pool = Pool(args.jobs, environment, config, state, args.timeout)
    try:
        ready = pool.wait_ready()
        if ready["device_count"] == 0:
            raise NoDevice(environment["XHAL_DEVICE"].split(":")[0])
        catalogue = ready["ops"]
        keys = select_ops(catalogue, args)
        dtypes = resolve_dtypes(args.dtype, ready["native_dtypes"])
        tasks = [{"op": key, "dtype": dtype} for key in keys for dtype in dtypes]
        results: dict[str, dict[str, dict]] = {}
        progress = Progress(backend, len(tasks))

        def on_result(message: dict) -> None:
            result = {k: v for k, v in message.items() if k not in ("type", "op", "dtype")}
            results.setdefault(message["op"], {})[message["dtype"]] = result
            progress.count(result["class"])

        pool.run(tasks, on_result)
        progress.show(final=True)
    except PoolError as error:
        raise BackendFailed(str(error)) from None
    finally:
        pool.close()
    run = {
        "backend": backend,
        "device": ready["device"],
        "device_name": ready["device_name"],
        "torch": ready["torch"],
        "xhal": ready["xhal"],
        "command": command,
        "samples": args.samples,
        "tolerances": TOLERANCES,
        "random_ops": RANDOM_OPS,
        "dtypes": dtypes,
        "seconds": round(time.monotonic() - started, 1),
        "jobs": args.jobs,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "catalogue": {key: {"name": info["name"]} for key, info in catalogue.items()},
        "results": {key: dict(sorted(results[key].items(), key=lambda item: dtypes.index(item[0])))
                    for key in sorted(results)},
    }
    (args.out / f"{backend}.json").write_text(json.dumps(run, indent=1) + "\n")
    return run


def select_ops(catalogue: dict, args: argparse.Namespace) -> list[str]:
    keys = sorted(catalogue)
    if args.subset:
        missing = [key for key in SUBSETS[args.subset] if key not in catalogue]
        if missing:
            raise UsageError(f"subset {args.subset} names operators this torch's op_db lacks: {', '.join(missing)}")
        keys = [key for key in keys if key in SUBSETS[args.subset]]
    if args.ops is not None:
        keys = [key for key in keys if args.ops_pattern.search(key)]
    return keys


def resolve_dtypes(requested: list[str] | None, native: list[str]) -> list[str]:
    expanded = []
    for dtype in requested or ["native", "bfloat16"]:
        expanded += ["float32", *native] if dtype == "native" else [dtype]
    return list(dict.fromkeys(expanded))


def tally(run: dict) -> dict[str, dict[str, int]]:
    counts = {dtype: dict.fromkeys(CLASSES, 0) for dtype in run["dtypes"]}
    for by_dtype in run["results"].values():
        for dtype, result in by_dtype.items():
            counts[dtype][result["class"]] += 1
    return counts


def print_summary(summary: dict) -> None:
    for backend, report in summary["backends"].items():
        if report["status"] != "ran":
            print(f"{backend}: {report['status'].upper()}: {report['message']}")
            continue
        print(f"{backend} ({report['device']}, {report['device_name']}): {report['cases']} cases in "
              f"{report['seconds']:.0f} s")
        width = max(len(c) for c in CLASSES)
        print("  " + "dtype".ljust(10) + "".join(c.rjust(width + 1) for c in CLASSES))
        for dtype, counts in report["counts"].items():
            print("  " + dtype.ljust(10) + "".join(str(counts[c]).rjust(width + 1) for c in CLASSES))
        if report["reference_judged"]:
            print(f"  {report['reference_judged']} case(s) passed some sample by the float64 reference: beyond the "
                  "tolerance, but no farther from the reference than the CPU")
        for case in report["not_run"]:
            print(f"  {case['op']} {case['dtype']}: {case['reason']}")
        for failure in report["failures"]:
            declared = "  [declared]" if failure["declared"] else ""
            print(f"  {failure['class']:8} {failure['op']} {failure['dtype']}: {failure['message']}{declared}")
    verdict = summary["check"]
    for entry in verdict["stale"]:
        print(f"STALE known entry: {entry}: it matched only cases that pass now; remove it")
    for entry in verdict["unknown"]:
        print(f"UNKNOWN known entry: {entry}: its op pattern names no OpInfo")
    if verdict["undeclared"]:
        print(f"{len(verdict['undeclared'])} failure(s) that no entry of the known file declares")
    if summary["cases"] == 0:
        print("no case ran on xhal")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_arguments(argv)
        entries = known.load(args.known)
    except (UsageError, known.KnownFileError) as error:
        print(f"torch-ops: {error}", file=sys.stderr)
        return 2
    command = shlex.join(["scripts/torch-ops.py", *argv])
    required = set(filter(None, os.environ.get("XHAL_REQUIRE_BACKENDS", "").split(",")))
    summary: dict = {"backends": {}, "cases": 0}
    runs, catalogue, failed = {}, {}, False
    for backend in args.backend:
        try:
            run = sweep(backend, args, command)
        except UsageError as error:
            print(f"torch-ops: {error}", file=sys.stderr)
            return 2
        except BackendFailed as error:
            summary["backends"][backend] = {"status": "failed", "message": str(error)}
            failed = True
            continue
        except NoDevice as none:
            message = f"backend {backend} has no device here; its operators did NOT run"
            if backend in required or none.name in required:
                message += " (XHAL_REQUIRE_BACKENDS names it)"
                summary["backends"][backend] = {"status": "failed", "message": message}
                failed = True
            else:
                print(f"!!! SKIPPED: {message}", file=sys.stderr)
                summary["backends"][backend] = {"status": "skipped", "message": message}
            continue
        runs[backend] = run["results"]
        catalogue.update(run["catalogue"])
        counts = tally(run)
        cases = sum(counts[d][c] for d in counts for c in COMPARED)
        summary["cases"] += cases
        summary["backends"][backend] = {
            "status": "ran", "device": run["device"], "device_name": run["device_name"], "seconds": run["seconds"],
            "cases": cases, "counts": counts,
            "reference_judged": sum(1 for by_dtype in run["results"].values() for result in by_dtype.values()
                                    if result.get("reference_judged")),
            "not_run": [
                {"op": key, "dtype": dtype, "reason": result["details"]["message"]}
                for key, by_dtype in run["results"].items() for dtype, result in by_dtype.items()
                if result.get("not_run")
            ],
            "failures": [
                {"op": key, "dtype": dtype, "class": result["class"], "message": result["details"]["message"]}
                for key, by_dtype in run["results"].items() for dtype, result in by_dtype.items()
                if result["class"] in FAILURES
            ],
        }
    ok = not failed and (summary["cases"] > 0 or not args.backend)
    verdict = known.judge(entries, runs, catalogue)
    undeclared = {(u["backend"], u["op"], u["dtype"]) for u in verdict.undeclared}
    for backend, report in summary["backends"].items():
        for failure in report.get("failures", []):
            failure["declared"] = (backend, failure["op"], failure["dtype"]) not in undeclared
    summary["check"] = {
        "undeclared": verdict.undeclared,
        "stale": [entry.describe() for entry in verdict.stale],
        # Without a catalogue (no backend ran) no entry can be judged unknown.
        "unknown": [entry.describe() for entry in verdict.unknown] if catalogue else [],
    }
    if args.check:
        ok = ok and not any(summary["check"].values())
    if args.markdown:
        try:
            markdown.write(args.out, args.markdown, entries)
        except markdown.NoResults as error:
            print(f"torch-ops: {error}", file=sys.stderr)
            return 1
    summary["ok"] = ok
    if args.json:
        print(json.dumps(summary, indent=1))
    elif args.backend:
        print_summary(summary)
    return 0 if ok else 1
