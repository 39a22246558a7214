@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn early(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&out) {
        return;
    }
    let v = input[i];
    if v % 3u == 0u {
        return;
    }
    out[i] = v * 2u;
    if v % 5u == 0u {
        return;
    }
    for (var k = 0u; k < 8u; k++) {
        if ((v >> (k * 4u)) & 15u) == 9u {
            out[i] += k + 1u;
            return;
        }
    }
    out[i] += 1000u;
}
