// The core built-ins that round to or read binary16 without the f16 extension:
// pack2x16float (two f32 to binary16 bits), unpack2x16float (exact) and quantizeToF16
// (an f32 rounded to the nearest binary16 value). naga validates them only with
// Capabilities::SHADER_FLOAT16_IN_FLOAT32, which xhal-kernel enables.

@group(0) @binding(0) var<storage, read> floats: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@group(0) @binding(3) var<storage, read_write> unpacked: array<vec4<f32>>;

@compute @workgroup_size(32)
fn pack_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&floats) {
        return;
    }
    let v = floats[i];
    packed[i] = pack2x16float(v);
    // Masked so that neither half is an infinity or a NaN.
    unpacked[i] = vec4<f32>(unpack2x16float(words[i] & 0xbfffbfffu), quantizeToF16(v));
}
