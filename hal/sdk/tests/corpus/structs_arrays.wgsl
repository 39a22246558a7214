// Structs (nested, copied by value, built with constructors, returned from functions) and
// fixed-size arrays (in a struct, function-local with runtime indices, a const array
// indexed at run time). Layout of Record, by WGSL's rules:
//   id: u32 @ 0, inner: Inner @ 8 (align 8, size 16: a: u32 @ 0, b: vec2<f32> @ 8),
//   tags: array<u32, 4> @ 24, weight: f32 @ 40; size 48 (a multiple of its alignment 8).

struct Inner {
    a: u32,
    b: vec2<f32>,
}

struct Record {
    id: u32,
    inner: Inner,
    tags: array<u32, 4>,
    weight: f32,
}

const PRIMES = array<u32, 6>(2u, 3u, 5u, 7u, 11u, 13u);

@group(0) @binding(0) var<storage, read> records: array<Record>;
@group(0) @binding(1) var<storage, read_write> out: array<Record>;

fn transform(r: Record) -> Record {
    var s = r;
    s.id = r.id * 2u + 1u;
    s.inner = Inner(r.inner.a + r.tags[3], r.inner.b.yx);
    for (var k = 0u; k < 4u; k++) {
        s.tags[k] = r.tags[3u - k];
    }
    return s;
}

@compute @workgroup_size(16)
fn structs(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&records) {
        return;
    }
    let r = records[i];
    var local: array<u32, 8>;
    for (var k = 0u; k < 8u; k++) {
        local[k] = r.tags[k % 4u] + k;
    }
    let primes = PRIMES;
    let pick = local[r.id % 8u] * primes[r.inner.a % 6u];
    var s = transform(r);
    s.weight = f32(pick) + r.weight;
    out[i] = s;
}
