// Counts values into `bins` buckets with atomics: values are u32 in 0..bins.
struct Params {
    n: u32,
    bins: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> counts: array<atomic<u32>>;

@compute @workgroup_size(256)
fn histogram(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if i < params.n {
        atomicAdd(&counts[min(values[i], params.bins - 1u)], 1u);
    }
}
