#!/usr/bin/env python3
"""Packs the `xhal` wheel from what `cargo build --release --workspace` already built.

`make python` used to run maturin, whose cargo run selects only `xhal-python`, so cargo
resolved its dependencies' features differently from the workspace build and compiled naga,
xhal-core and xhal-kernel a second time (about two minutes), then the workspace build
rebuilt the module again. The extension module is a workspace member, so its library is
already in target/release; this packs it with the package's Python sources and the files
`make python` staged (plugins, the C API and its header) into one abi3 wheel.

The metadata comes from python/pyproject.toml and the workspace's version, so there is one
source for both this and a `pip install ./python` (which builds with maturin).

Usage: python-wheel.py --native LIB --out DIR   (prints the wheel's path)
"""

import argparse
import base64
import hashlib
import pathlib
import sys
import sysconfig
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python"
# The wheel carries all of python/xhal (the sources, and the build outputs `make python` stages
# there, which pyproject.toml's [tool.maturin] include names) but bytecode caches.
SKIPPED_PARTS = {"__pycache__"}
SKIPPED_SUFFIXES = {".pyc", ".pyo"}
# The oldest CPython whose stable ABI the module targets (pyo3's abi3-py39).
ABI3_TAG = "cp39-abi3"


def fail(message):
    print(f"python-wheel: {message}", file=sys.stderr)
    sys.exit(1)


def workspace_version():
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    try:
        return manifest["workspace"]["package"]["version"]
    except KeyError:
        fail("Cargo.toml has no [workspace.package] version")


def metadata(project, version):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {requirement}; extra == "{extra}"' for requirement in requirements]
    return "\n".join(lines) + "\n"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native", required=True, type=pathlib.Path, help="the built extension module")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="the folder the wheel goes to")
    arguments = parser.parse_args()
    if not arguments.native.is_file():
        fail(f"{arguments.native} is missing: run `cargo build --release --workspace` first")

    pyproject = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    project = pyproject["project"]
    package, _, native_name = pyproject["tool"]["maturin"]["module-name"].rpartition(".")
    version = workspace_version()
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"{ABI3_TAG}-{platform}"
    dist_info = f"{project['name']}-{version}.dist-info"

    native = f"{package}/{native_name}.abi3.so"
    files = []
    for path in sorted((PACKAGE / package).rglob("*")):
        relative = path.relative_to(PACKAGE)
        if path.is_dir() or SKIPPED_PARTS & set(relative.parts) or path.suffix in SKIPPED_SUFFIXES:
            continue
        if relative.as_posix() == native:
            # A module left there by another build (`maturin develop`): the workspace's wins.
            continue
        files.append((relative.as_posix(), path.read_bytes()))
    for required in ("plugins", "lib", "include"):
        if not any(name.startswith(f"{package}/{required}/") for name, _ in files):
            fail(f"python/{package}/{required} is empty: `make python` stages it before packing")
    files.append((native, arguments.native.read_bytes()))
    files.append((f"{dist_info}/METADATA", metadata(project, version).encode()))
    wheel = f"Wheel-Version: 1.0\nGenerator: xhal scripts/python-wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{dist_info}/WHEEL", wheel.encode()))
    record = "\n".join(record_line(name, data) for name, data in files) + f"\n{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))

    arguments.out.mkdir(parents=True, exist_ok=True)
    target = arguments.out / f"{project['name']}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            # Executable bits for the shared libraries, plain files for the rest.
            mode = 0o755 if name.endswith(".so") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, data)
    print(target)


if __name__ == "__main__":
    main()
