struct Params { scale: f64, n: i64 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> d: array<f64>;
@group(0) @binding(1) var<storage, read_write> l: array<i64>;
@group(0) @binding(2) var<storage, read_write> ul: array<u64>;
@compute @workgroup_size(64)
fn wide(@builtin(global_invocation_id) id: vec3<u32>) {
    let x = d[id.x] * params.scale;
    d[id.x + 1024u] = floor(x) + sqrt(x) + f64(l[0]) + f64(ul[0]) + f64(f32(x));
    l[id.x + 1024u] = l[1] / l[2] + l[1] % l[2] + (l[1] << id.y) + i64(x) + params.n + abs(l[3]) + min(l[4], l[5]);
    ul[id.x + 1024u] = ul[1] / ul[2] + ul[1] % ul[2] + (ul[1] >> id.z) + u64(x) + countOneBits(ul[3]) + countLeadingZeros(ul[4]);
    l[id.x + 2048u] = i64(id.x) + i64(i32(ul[1])) + bitcast<i64>(ul[2]);
}
