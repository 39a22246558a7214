@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> before: array<u32>;

@compute @workgroup_size(64)
fn subtract(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&before) {
        before[id.x] = atomicSub(&counter, 3u);
    }
}
