@group(0) @binding(0) var<storage, read_write> slot: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> previous: array<u32>;

@compute @workgroup_size(64)
fn swap(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&previous) {
        previous[id.x] = atomicExchange(&slot, id.x + 1u);
    }
}
