// extractBits (unsigned: zero-filled; signed: sign-extended from the top extracted bit) and
// insertBits, with offsets and counts read at run time, including offset + count > 32 and
// offsets >= 32 (WGSL clamps: o = min(offset, 32), c = min(count, 32 - o)).
// 3 results per element.

struct Field {
    value: u32,
    bits: u32,
    offset: u32,
    count: u32,
}

@group(0) @binding(0) var<storage, read> fields: array<Field>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn fields_kernel(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&fields) {
        return;
    }
    let f = fields[i];
    let o = i * 3u;
    out[o + 0u] = extractBits(f.value, f.offset, f.count);
    out[o + 1u] = bitcast<u32>(extractBits(bitcast<i32>(f.value), f.offset, f.count));
    out[o + 2u] = insertBits(f.value, f.bits, f.offset, f.count);
}
