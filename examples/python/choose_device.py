"""Lists every device, explains a choice, and runs one kernel on each device with the same
answer: the same WGSL, whatever the backend."""

import sys

import numpy as np

import xhal

SQUARE = """
@group(0) @binding(0) var<storage, read_write> v: array<i32>;
@compute @workgroup_size(64)
fn square(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&v) { v[id.x] = v[id.x] * v[id.x]; }
}
"""

for entry in xhal.devices():
    print(f"{entry.label:12} {entry.type:14} {entry.name}")

selector = sys.argv[1] if len(sys.argv) > 1 else None
chosen = xhal.device(selector)
print(f"\nchosen: {chosen.label}\n  {chosen.why}\n")

values = np.arange(-50, 50, dtype=np.int32)
for entry in xhal.devices():
    dev = entry.open()
    v = dev.asarray(values)
    dev.load_wgsl(SQUARE).kernel()(v, invocations=len(values))
    ok = np.array_equal(v.numpy(), values * values)
    print(f"{entry.label:12} {'same answer' if ok else 'DIFFERENT ANSWER'}")
    dev.close()
    if not ok:
        sys.exit(1)
