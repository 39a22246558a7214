#!/usr/bin/env python3
"""Runs the test programs of one workspace package, as `cargo test --workspace` built them,
with the environment it is given: `XHAL_CPU_MODE=interpret scripts/package-tests.py xhal-cpu`
runs the CPU backend's tests in that kernel mode.

`cargo test -p PACKAGE` would resolve the dependencies' features for that package alone and
so compile them again (about half a minute for xhal-cpu); these are the programs the workspace
run already built. Exits with 1 when a program fails, 2 on misuse."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    if len(sys.argv) != 2:
        print("usage: scripts/package-tests.py PACKAGE", file=sys.stderr)
        return 2
    package = sys.argv[1]
    cargo = os.environ.get("CARGO", "cargo")
    metadata = json.loads(
        subprocess.run([cargo, "metadata", "--format-version", "1", "--no-deps", "--offline"], cwd=ROOT,
                       check=True, capture_output=True, text=True).stdout)
    manifests = [p["manifest_path"] for p in metadata["packages"] if p["name"] == package]
    if not manifests:
        print(f"package-tests: no workspace package is called {package}", file=sys.stderr)
        return 2
    build = subprocess.run([cargo, "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"],
                           cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if build.returncode != 0:
        print("package-tests: `cargo test --workspace --no-run` failed", file=sys.stderr)
        return 1
    programs = []
    for line in build.stdout.splitlines():
        message = json.loads(line)
        if (message.get("reason") == "compiler-artifact" and message.get("executable")
                and message["profile"]["test"] and message["manifest_path"] == manifests[0]):
            programs.append(message["executable"])
    if not programs:
        print(f"package-tests: cargo built no test program of {package}", file=sys.stderr)
        return 2
    failed = []
    for program in programs:
        print(f"     Running {program}", flush=True)
        # cargo runs a package's tests in the package's folder; so does this.
        if subprocess.run([program], cwd=pathlib.Path(manifests[0]).parent).returncode != 0:
            failed.append(program)
    if failed:
        print(f"package-tests: {len(failed)} of {len(programs)} test programs of {package} failed: "
              + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
