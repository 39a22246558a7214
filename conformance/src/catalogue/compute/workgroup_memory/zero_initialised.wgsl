@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> words: array<u32, 256>;

@compute @workgroup_size(64)
fn zeroed(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var seen = 0u;
    for (var k = lane; k < 256u; k += 64u) {
        seen |= words[k];
    }
    workgroupBarrier();
    // Leave the memory dirty, for whichever workgroup gets it next.
    for (var k = lane; k < 256u; k += 64u) {
        words[k] = group.x * 1000u + k + 1u;
    }
    workgroupBarrier();
    let slot = group.x * 64u + lane;
    out[2u * slot] = seen;
    out[2u * slot + 1u] = words[255u - lane];
}
