"""The device under test is the one XHAL_DEVICE selects (scripts/python-test.sh sets it per
backend); without it, the best device here."""

import numpy as np
import pytest

import xhal


@pytest.fixture(scope="session")
def dev():
    device = xhal.device()
    print(f"testing on {device.label}: {device.why}")
    return device


SAXPY = """
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        y[id.x] = params.a * x[id.x] + y[id.x];
    }
}
"""


@pytest.fixture(scope="session")
def saxpy(dev):
    return dev.load_wgsl(SAXPY).kernel("saxpy")


def floats(n, seed=0):
    """Small integers as float32, so that every device's arithmetic is exact."""
    return np.random.default_rng(seed).integers(-8, 8, n).astype(np.float32)
