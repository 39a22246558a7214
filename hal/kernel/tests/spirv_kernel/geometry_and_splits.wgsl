// reflect, faceForward, refract, modf and frexp on f32 scalars and vectors (the cpu
// backend's native tests run the same kernel over edge cases).
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

fn put(o: u32, v: f32) { out[o] = bitcast<u32>(v); }
fn put2(o: u32, v: vec2<f32>) { put(o, v.x); put(o + 1u, v.y); }
fn put3(o: u32, v: vec3<f32>) { put(o, v.x); put(o + 1u, v.y); put(o + 2u, v.z); }
fn put4(o: u32, v: vec4<f32>) { put3(o, v.xyz); put(o + 3u, v.w); }

@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&a);
    let i = id.x;
    if i >= n { return; }
    let x = a[i];
    let y = a[(i * 7u + 3u) % n];
    let z = a[(i * 13u + 5u) % n];
    let w = a[(i * 5u + 1u) % n];
    let eta = a[(i * 3u + 2u) % n];
    let o = i * 64u;
    let v2 = vec2<f32>(x, y);
    let u2 = vec2<f32>(z, w);
    let v3 = vec3<f32>(x, y, z);
    let u3 = vec3<f32>(w, z, 0.5);
    let v4 = vec4<f32>(x, y, z, w);
    let u4 = vec4<f32>(0.25, w, x, -z);
    put2(o, reflect(v2, u2));
    put3(o + 2u, reflect(v3, u3));
    put4(o + 5u, reflect(v4, u4));
    put2(o + 9u, faceForward(v2, u2, vec2<f32>(w, x)));
    put3(o + 11u, faceForward(v3, u3, v3.zxy));
    put4(o + 14u, faceForward(v4, u4, u4.wzyx));
    put2(o + 18u, refract(v2, u2, eta));
    put3(o + 20u, refract(v3, u3, eta));
    put4(o + 23u, refract(v4, u4, eta));
    // Unit vectors and a moderate eta: both sides of k < 0.
    let e = 0.5 + f32(i % 8u) * 0.25;
    put3(o + 27u, refract(normalize(vec3<f32>(1.0, f32(i % 5u), -2.0)), vec3<f32>(0.0, 0.0, 1.0), e));
    let m = modf(x);
    put(o + 30u, m.fract);
    put(o + 31u, m.whole);
    let mv = modf(v3);
    put3(o + 32u, mv.fract);
    put3(o + 35u, mv.whole);
    let f = frexp(x);
    put(o + 38u, f.fract);
    out[o + 39u] = bitcast<u32>(f.exp);
    let fv = frexp(v4);
    put4(o + 40u, fv.fract);
    out[o + 44u] = bitcast<u32>(fv.exp.x);
    out[o + 45u] = bitcast<u32>(fv.exp.y);
    out[o + 46u] = bitcast<u32>(fv.exp.z);
    out[o + 47u] = bitcast<u32>(fv.exp.w);
    let fw = frexp(v2);
    put2(o + 48u, fw.fract);
    out[o + 50u] = bitcast<u32>(fw.exp.x);
    out[o + 51u] = bitcast<u32>(fw.exp.y);
}
