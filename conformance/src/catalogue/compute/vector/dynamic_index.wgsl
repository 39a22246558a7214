@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;

// Components written and read through an index known only at run time, in a loop, as an
// accumulator split four ways (acc[k % 4u] += ...) is written in reductions and matmuls.
@compute @workgroup_size(64)
fn vectors(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    var acc = vec4<u32>(0u);
    for (var k = 0u; k < 8u; k = k + 1u) {
        acc[k % 4u] = acc[k % 4u] + x[(k + i) % 4u] * (k + 1u);
    }
    // The same with a float accumulator over a loop of fixed length, which a C compiler unrolls.
    var sums = vec4<f32>(0.0);
    for (var k = 0u; k < 8u; k = k + 1u) {
        sums[k % 4u] = sums[k % 4u] + f32(x[k % 4u] + k);
    }
    acc = acc + vec4<u32>(sums);
    var swapped = x;
    let j = x.x % 4u;
    swapped[j] = swapped[3u - j] + 1u;
    out[2u * i] = acc;
    out[2u * i + 1u] = swapped;
}

@group(0) @binding(0) var<storage, read_write> folded_out: array<f32>;

// The same accumulation, which a C compiler can fold to constants entirely.
@compute @workgroup_size(1)
fn folded() {
    var acc = vec4<f32>(0.0);
    for (var k = 0u; k < 8u; k = k + 1u) {
        acc[k % 4u] = acc[k % 4u] + f32(k);
    }
    folded_out[0] = acc.x;
    folded_out[1] = acc.y;
    folded_out[2] = acc.z;
    folded_out[3] = acc.w;
}
