@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> shared_values: array<u32, 64>;

@compute @workgroup_size(64)
fn reconverge(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let i = group.x * 64u + lane;
    var v = input[i];
    let rounds = v % 13u;
    for (var k = 0u; k < rounds; k++) {
        v = v * 7u + k;
    }
    if (lane & 1u) == 1u {
        v = ~v;
    }
    shared_values[lane] = v;
    workgroupBarrier();
    out[i] = shared_values[63u - lane] + shared_values[(lane + 1u) % 64u];
}
