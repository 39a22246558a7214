"""A row-wise softmax (one workgroup per row: a max and a sum reduced in workgroup memory),
checked against numpy."""

import numpy as np

import xhal

SOFTMAX = """
struct Shape { rows: u32, cols: u32 }
var<immediate> shape: Shape;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

const WIDTH: u32 = 64u;
var<workgroup> scratch: array<f32, 64>;

@compute @workgroup_size(64)
fn softmax(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let row = group.x;
    let base = row * shape.cols;
    var m = -3.0e38;
    for (var j = local.x; j < shape.cols; j += WIDTH) {
        m = max(m, x[base + j]);
    }
    scratch[local.x] = m;
    workgroupBarrier();
    for (var s = WIDTH / 2u; s > 0u; s /= 2u) {
        if local.x < s { scratch[local.x] = max(scratch[local.x], scratch[local.x + s]); }
        workgroupBarrier();
    }
    let row_max = scratch[0];
    workgroupBarrier();
    var total = 0.0;
    for (var j = local.x; j < shape.cols; j += WIDTH) {
        total += exp(x[base + j] - row_max);
    }
    scratch[local.x] = total;
    workgroupBarrier();
    for (var s = WIDTH / 2u; s > 0u; s /= 2u) {
        if local.x < s { scratch[local.x] += scratch[local.x + s]; }
        workgroupBarrier();
    }
    let row_sum = scratch[0];
    for (var j = local.x; j < shape.cols; j += WIDTH) {
        y[base + j] = exp(x[base + j] - row_max) / row_sum;
    }
}
"""

rows, cols = 64, 1000
logits = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32) * 4

dev = xhal.device()
print(f"{dev.label} ({dev.name})")
x, y = dev.asarray(logits), dev.empty((rows, cols))
dev.load_wgsl(SOFTMAX).kernel()(x, y, rows=rows, cols=cols, workgroups=rows)

shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
expected = shifted / shifted.sum(axis=1, keepdims=True)
error = np.abs(y.numpy() - expected).max()
assert error < 1e-6, f"softmax differs from numpy by {error}"
print(f"softmax of {rows}x{cols} within {error:.1e} of numpy")
