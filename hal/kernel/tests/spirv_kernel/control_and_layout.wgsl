struct Inner { a: vec2<f32>, b: vec3<f32>, c: u32 }
struct Outer { x: f32, inner: Inner, arr: array<Inner, 2>, d: f64 }
struct Counted { count: atomic<u32>, total: atomic<i32>, data: array<u32> }
struct Params { items: array<vec4<f32>, 2>, m: mat2x3<f32>, k: i32 }
var<immediate> params: Params;
const TABLE = array<u32, 4>(1u, 2u, 4u, 8u);
const ORIGIN = Inner(vec2<f32>(0.5), vec3<f32>(1.0, 2.0, 3.0), 9u);
@group(0) @binding(0) var<storage, read_write> outer: array<Outer>;
@group(0) @binding(1) var<storage, read_write> counted: Counted;
var<workgroup> done: bool;
var<workgroup> shared_inner: Inner;
var<private> state: Inner = Inner(vec2<f32>(1.0), vec3<f32>(2.0), 3u);

fn classify(v: i32) -> i32 {
    if v < 0 { return -1; } else { return 1; }
}

fn first_over(limit: u32) -> u32 {
    var i = 0u;
    loop {
        if counted.data[i] > limit { return i; }
        i++;
        if i >= arrayLength(&counted.data) { break; }
    }
    return 0xffffffffu;
}

fn bump(p: ptr<function, Inner>) { (*p).c += 1u; }

@compute @workgroup_size(16)
fn control(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let o = outer[lid.x + 100u];
    let b = o.inner.b + o.arr[lid.x % 2u].b + ORIGIN.b + state.b;
    outer[lid.x + 16u * wid.x].arr[1].b = b;
    outer[lid.x + 16u * wid.x + 32u].inner = ORIGIN;
    outer[lid.x + 16u * wid.x + 64u].d = o.d * 2.0lf;
    var local_outer = o;
    local_outer.arr[lid.y].b.y = 4.0;
    outer[lid.x + 16u * wid.x + 200u] = local_outer;
    switch params.k {
        case -1: { atomicAdd(&counted.count, 1u); }
        case 0, 1: { atomicSub(&counted.total, 2); }
        default: { }
    }
    let n = first_over(TABLE[lid.x % 4u]);
    counted.data[lid.x + 16u * wid.x + 256u] = n + u32(classify(params.k)) + u32(params.items[lid.x % 2u].w) + u32(params.m[1].z);
    if lid.x == 0u { done = true; var copy = shared_inner; bump(&copy); shared_inner = copy; }
    workgroupBarrier();
    if done { counted.data[lid.x + 16u * wid.x + 512u] = shared_inner.c + TABLE[lid.y]; }
    state.c = 4u;
}
