// reflect, faceForward, refract, modf and frexp on f64 scalars and vectors.
@group(0) @binding(0) var<storage, read> a: array<f64>;
@group(0) @binding(1) var<storage, read_write> out: array<f64>;

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&a);
    let i = id.x;
    if i >= n { return; }
    let x = a[i];
    let y = a[(i * 7u + 3u) % n];
    let z = a[(i * 13u + 5u) % n];
    let o = i * 16u;
    let v = vec2<f64>(x, y);
    let u = vec2<f64>(z, 0.25lf);
    let r = reflect(v, u);
    out[o] = r.x; out[o + 1u] = r.y;
    let f = faceForward(v, u, vec2<f64>(y, z));
    out[o + 2u] = f.x; out[o + 3u] = f.y;
    let t = refract(v, u, z);
    out[o + 4u] = t.x; out[o + 5u] = t.y;
    let m = modf(x);
    out[o + 6u] = m.fract; out[o + 7u] = m.whole;
    let fs = frexp(x);
    out[o + 8u] = fs.fract; out[o + 9u] = f64(fs.exp);
    let fv = frexp(vec3<f64>(x, y, z));
    out[o + 10u] = fv.fract.x; out[o + 11u] = fv.fract.z;
    out[o + 12u] = f64(fv.exp.x); out[o + 13u] = f64(fv.exp.y); out[o + 14u] = f64(fv.exp.z);
    out[o + 15u] = modf(v).whole.y;
}
