@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> tickets: array<u32>;

@compute @workgroup_size(64)
fn take(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&tickets) {
        tickets[id.x] = atomicAdd(&counter, 1u);
    }
}
