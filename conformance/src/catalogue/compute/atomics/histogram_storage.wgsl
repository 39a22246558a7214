struct Params { n: u32, bins: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>>;

@compute @workgroup_size(64)
fn histogram(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        atomicAdd(&counts[values[id.x] % params.bins], 1u);
    }
}
