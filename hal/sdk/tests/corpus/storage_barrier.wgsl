// storageBarrier orders storage writes within a workgroup: each invocation writes a
// scratch slot, and after the barrier reads its neighbour's (rotating by one within the
// workgroup's 32-element slice).

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(2) var<storage, read_write> output: array<u32>;

@compute @workgroup_size(32)
fn rotate(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {
    let base = w.x * 32u;
    scratch[base + l] = input[base + l] * 3u + 1u;
    storageBarrier();
    output[base + l] = scratch[base + (l + 1u) % 32u];
}
