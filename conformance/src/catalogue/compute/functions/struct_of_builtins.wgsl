struct Invocation {
    @builtin(global_invocation_id) global: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
}
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> cells: array<u32, 64>;

@compute @workgroup_size(64)
fn split(invocation: Invocation, @builtin(num_workgroups) groups: vec3<u32>) {
    cells[invocation.lane] = input[invocation.global.x] + invocation.local.x;
    workgroupBarrier();
    out[invocation.global.x] = cells[63u - invocation.lane] + invocation.group.x * 1000u + groups.x * 100000u;
}
