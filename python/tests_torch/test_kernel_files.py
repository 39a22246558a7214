"""The PyTorch device's kernel files are WGSL that runs by itself: every entry point of every
file loads, with the library of its compute types, on the device under test, and the
examples in kernels/README.md and elementwise.wgsl run through `xhal run` as documented."""

import os
import re
import subprocess
from pathlib import Path

import pytest

import xhal

KERNELS = Path(xhal.__file__).parent / "torch" / "kernels"
ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target" / "release" / "xhal"
OPERATOR_FILES = ["elementwise_float.wgsl", "elementwise_integer.wgsl", "elementwise_logical.wgsl"]


def families():
    names = sorted(p.name for p in KERNELS.glob("*.wgsl"))
    assert names, f"no kernel files in {KERNELS}"
    # The elementwise layout loads with each of its operator files, which load with it.
    return [name for name in names if name not in OPERATOR_FILES]


def compose(*files):
    """The files, after the default libraries of the compute types they declare, as the
    extension composes them."""
    texts = [(KERNELS / name).read_text() for name in files]
    libraries = []
    if any(re.search(r"^alias F = ", text, re.M) for text in texts):
        libraries.append((KERNELS / "lib" / "float_f32.wgsl").read_text())
    if any(re.search(r"^alias I = ", text, re.M) for text in texts):
        libraries.append((KERNELS / "lib" / "int_i32.wgsl").read_text())
    return "\n".join(libraries + texts)


@pytest.fixture(scope="module")
def device():
    return xhal.device(os.environ.get("XHAL_DEVICE"))


@pytest.mark.parametrize("name", families())
def test_every_entry_point_of_every_file_loads(device, name):
    files = [name] if name != "elementwise.wgsl" else None
    combinations = [files] if files else [[name, operators] for operators in OPERATOR_FILES]
    for combination in combinations:
        module = device.load_wgsl(compose(*combination))
        declared = re.findall(r"@compute[^\n]*\nfn (\w+)", "\n".join((KERNELS / f).read_text() for f in combination))
        assert declared, f"{combination} declares no entry point"
        assert sorted(module.entry_points) == sorted(declared)
        for entry in declared:
            module.kernel(entry)


def run_cli(files, arguments):
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: `make build` builds the CLI these examples run through")
    environment = dict(os.environ, XHAL_PLUGIN_PATH=str(ROOT / "target" / "plugins"))
    device = os.environ.get("XHAL_DEVICE", "cpu").split(",")[0].replace(":*", "")
    result = subprocess.run([str(CLI), "run", "-", "-d", device, "--json", *arguments], input=compose(*files),
                            capture_output=True, text=True, env=environment, timeout=120)
    assert result.returncode == 0, result.stderr
    import json

    return {buffer["name"]: buffer["values"] for buffer in json.loads(result.stdout)["buffers"]}


def test_the_readme_s_softmax_runs_through_the_cli():
    buffers = run_cli(["softmax.wgsl"], ["-e", "softmax", "-n", "1", "-b", "x=1,2,3,4", "-b", "out=zeros:4", "-s",
                                         "outer=1", "-s", "length=4", "-s", "inner=1", "-s", "pad=0", "-s",
                                         "offsets=0,0,0,0"])
    assert buffers["out"] == pytest.approx([0.0320586, 0.0871443, 0.2368828, 0.6439142], rel=1e-5)


def test_the_elementwise_example_runs_through_the_cli():
    buffers = run_cli(["elementwise.wgsl", "elementwise_float.wgsl"],
                      ["-e", "main", "-n", "4", "-o", "OP=1", "-b", "out=zeros:4", "-b", "in0=1,2,3,4", "-b",
                       "in1=10,20,30,40", "-b", "in2=zeros:1", "-s", "numel=4", "-s", "ndim=1", "-s", "pad0=0", "-s",
                       "pad1=0", "-s", "offsets=0,0,0,0", "-s", "scalars=1065353216,0,0,0", "-s",
                       "constants=0,0,0,0", "-s", "extra=0,0,0,0"])
    assert buffers["out"] == [11, 22, 33, 44]
