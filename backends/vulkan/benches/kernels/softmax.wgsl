// Row softmax: one workgroup of 256 invocations per row, max and sum by tree reductions.
struct Params { cols: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn softmax(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let row = group.x * params.cols;
    var m = -3.4e38;
    for (var c = lane; c < params.cols; c += 256u) {
        m = max(m, x[row + c]);
    }
    red[lane] = m;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if lane < s { red[lane] = max(red[lane], red[lane + s]); }
        workgroupBarrier();
    }
    let row_max = red[0];
    workgroupBarrier();
    var total = 0.0;
    for (var c = lane; c < params.cols; c += 256u) {
        total += exp(x[row + c] - row_max);
    }
    red[lane] = total;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if lane < s { red[lane] = red[lane] + red[lane + s]; }
        workgroupBarrier();
    }
    let denom = red[0];
    for (var c = lane; c < params.cols; c += 256u) {
        y[row + c] = exp(x[row + c] - row_max) / denom;
    }
}
