struct Words { values: array<u32> }
@group(0) @binding(0) var<storage, read> input: Words;
@group(0) @binding(1) var<storage, read_write> out: Words;

@compute @workgroup_size(64)
fn scaled(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&out.values) {
        out.values[id.x] = input.values[id.x] * 3u + arrayLength(&input.values);
    }
}
