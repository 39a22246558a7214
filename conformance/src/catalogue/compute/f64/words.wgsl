// An f64 assembled from two 32-bit words (low first), as a uniform or immediate block carries
// it, and split back: no f64 type is named, only conversions and bit casts make one.
@group(0) @binding(0) var<storage, read> words: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn join_split(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&words) / 2u {
        return;
    }
    let joined = bitcast<f64>((u64(words[2u * i + 1u]) << 32u) | u64(words[2u * i]));
    let bits = bitcast<u64>(joined * 2.0);
    out[2u * i] = u32(bits & 0xfffffffflu);
    out[2u * i + 1u] = u32(bits >> 32u);
}
