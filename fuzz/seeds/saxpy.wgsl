// y = a * x + y over n elements. Launch with enough workgroups of 256 invocations to cover n,
// spread over x and y (a single dimension holds at most 65535 workgroups).
struct Params {
    a: f32,
    n: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if i < params.n {
        y[i] = params.a * x[i] + y[i];
    }
}
