"""y = a * x + y on the device XHAL_DEVICE picks (or the best one here), checked against numpy."""

import numpy as np

import xhal

SAXPY = """
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        y[id.x] = params.a * x[id.x] + y[id.x];
    }
}
"""

n = 1 << 20
rng = np.random.default_rng(0)
xs = rng.standard_normal(n, dtype=np.float32)
ys = rng.standard_normal(n, dtype=np.float32)

dev = xhal.device()
print(f"{dev.label} ({dev.name}): {dev.why}")
x, y = dev.asarray(xs), dev.asarray(ys)
saxpy = dev.load_wgsl(SAXPY).kernel("saxpy")
saxpy(x, y, a=2.0, n=n, invocations=n)
result = y.numpy()

expected = np.float32(2.0) * xs + ys
assert np.array_equal(result, expected), "saxpy differs from numpy"
print(f"saxpy of {n} elements matches numpy")
