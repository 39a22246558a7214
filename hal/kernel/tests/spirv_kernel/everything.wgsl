struct Item { p: vec3<f32>, w: f32, q: vec3<f32> }
struct Header { n: u32, pad: vec3<u32>, items: array<Item> }
struct Params { n: u32, v: vec3<f32>, m: mat3x3<f32> }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> buf: Header;
@group(0) @binding(1) var<storage, read_write> ints: array<i32>;
@group(0) @binding(2) var<storage, read_write> uints: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> counter: atomic<u32>;
var<workgroup> tile: array<atomic<i32>, 64>;
var<workgroup> flag: u32;
var<private> seed: u32 = 7u;

fn helper(p: ptr<function, vec3<f32>>, k: f32) -> f32 {
    (*p).y = k * 2.0;
    seed = seed * 1103515245u + 12345u;
    return dot(*p, vec3<f32>(1.0, 2.0, 3.0)) + f32(arrayLength(&buf.items));
}

fn item_of(i: u32) -> Item {
    return Item(vec3<f32>(f32(i)), 1.0, vec3<f32>(2.0));
}

@compute @workgroup_size(8, 8, 1)
fn all_of_it(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32,
             @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let slot = li + 64u * wid.x;
    var v = buf.items[gid.x + 1000u].p;
    let h = helper(&v, params.v.z);
    var it = item_of(li);
    it.w = h;
    buf.items[slot] = it;
    let s = buf.items[li + 1000u].q * params.m;
    let t = params.m * s + transpose(params.m) * vec3<f32>(determinant(params.m));
    buf.items[slot + 128u].p = t;
    let a = ints[gid.x + 4096u];
    let b = ints[gid.x + 4097u];
    ints[8u * slot + 0u] = a / b + a % b - (a << u32(b)) + (a >> 3u) + abs(a) + sign(a) + clamp(a, -4, 4) + min(a, b) * max(a, b);
    ints[8u * slot + 1u] = countOneBits(a) + countLeadingZeros(b) + countTrailingZeros(a) + firstLeadingBit(a) + firstTrailingBit(b) + reverseBits(a);
    ints[8u * slot + 2u] = extractBits(a, 3u, 5u) + insertBits(a, b, 4u, 8u);
    var u = uints[gid.x + 2048u];
    u = u / uints[2049] + u % uints[2050] + (u << u.wxyz) + extractBits(u, 2u, 7u) + insertBits(u, u.yzwx, 1u, 30u);
    u = select(u, u.wzyx, u > vec4<u32>(5u)) + vec4<u32>(firstLeadingBit(u.x));
    uints[slot] = u + vec4<u32>(vec4<f32>(params.v.xyzx)) + vec4<u32>(vec4<bool>(true, false, u.x > 0u, any(u > vec4<u32>(0u))));
    let old = atomicAdd(&counter, 1u);
    let x = atomicCompareExchangeWeak(&counter, 0xffffffffu, 5u);
    if x.exchanged { atomicMax(&tile[li % 64u], i32(old)); }
    atomicStore(&tile[0], atomicLoad(&tile[1]) + atomicExchange(&tile[2], 3) + atomicMin(&tile[3], 2) + atomicSub(&tile[4], 1) + atomicAnd(&tile[5], 1) + atomicOr(&tile[6], 2) + atomicXor(&tile[7], 4));
    workgroupBarrier();
    storageBarrier();
    let f = workgroupUniformLoad(&flag);
    var arr = array<f32, 4>(1.0, 2.0, 3.0, 4.0);
    var acc = 0.0;
    for (var i = 0u; i < 10u; i++) {
        if i == f { continue; }
        acc += arr[i] + arr[i % 4u];
        switch i {
            case 1u, 2u: { acc += 1.0; }
            case 3u: { break; }
            default: { acc -= 0.5; }
        }
        if acc > 100.0 { break; }
    }
    var j = 0;
    loop {
        j++;
        continuing { break if j > 5; }
    }
    let fl = buf.items[1001].w;
    ints[8u * slot + 3u] = i32(fl) + i32(u32(fl)) + j + i32(round(fl) + fract(fl) + floor(fl) + ceil(fl) + trunc(fl) + sqrt(fl) + inverseSqrt(fl) + exp(fl) + exp2(fl) + log(fl) + log2(fl) + pow(fl, 2.0) + sin(fl) + cos(fl) + tan(fl) + asin(fl) + acos(fl) + atan(fl) + atan2(fl, 1.0) + sinh(fl) + cosh(fl) + tanh(fl) + asinh(fl) + acosh(fl) + atanh(fl) + radians(fl) + degrees(fl) + fma(fl, fl, fl) + mix(fl, 2.0, 0.5) + step(fl, 1.0) + smoothstep(0.0, 1.0, fl) + saturate(fl) + ldexp(fl, 2) + length(v) + distance(v, t) + normalize(v).x + cross(v, t).y + sign(fl) + abs(fl) + clamp(fl, 0.0, 1.0) + acc + f32(seed) + arr[u.x]);
    ints[8u * slot + 4u] = bitcast<i32>(fl) + i32(all(v == t));
    ints[8u * slot + 5u] = i32(s.x) + i32(wid.x + nwg.y + lid.z);
    let mv = vec3<f32>(1.0) * params.m;
    let mm = params.m * params.m - params.m + params.m * 2.0;
    ints[8u * slot + 6u] = i32(mv.x + mm[1][2] + mm[gid.x].y + params.m[li][li]);
    let fv = vec2<f32>(f32(a), 2.0);
    ints[8u * slot + 7u] = i32(dot(vec2<i32>(a, b), vec2<i32>(b, a))) + vec2<i32>(fv).x + -a + ~a + i32(!(a > b));
}
