// Every compute built-in, on 1D, 2D and 3D grids. Each invocation writes one 16-word record
// at its flat global index:
//   [global_invocation_id.xyz, local_invocation_id.xyz, workgroup_id.xyz,
//    local_invocation_index, num_workgroups.xyz, 0xb0b0 (a marker: the record was written), 0, 0]

@group(0) @binding(0) var<storage, read_write> records: array<u32>;

fn record(gid: vec3<u32>, lid: vec3<u32>, wid: vec3<u32>, index: u32, groups: vec3<u32>, size: vec3<u32>) {
    let extent = groups * size;
    let flat = gid.x + extent.x * (gid.y + extent.y * gid.z);
    let base = flat * 16u;
    records[base + 0u] = gid.x;
    records[base + 1u] = gid.y;
    records[base + 2u] = gid.z;
    records[base + 3u] = lid.x;
    records[base + 4u] = lid.y;
    records[base + 5u] = lid.z;
    records[base + 6u] = wid.x;
    records[base + 7u] = wid.y;
    records[base + 8u] = wid.z;
    records[base + 9u] = index;
    records[base + 10u] = groups.x;
    records[base + 11u] = groups.y;
    records[base + 12u] = groups.z;
    records[base + 13u] = 0xb0b0u;
}

@compute @workgroup_size(8)
fn grid_1d(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) index: u32,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    record(gid, lid, wid, index, groups, vec3<u32>(8u, 1u, 1u));
}

@compute @workgroup_size(4, 2)
fn grid_2d(
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) index: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(global_invocation_id) gid: vec3<u32>,
) {
    record(gid, lid, wid, index, groups, vec3<u32>(4u, 2u, 1u));
}

// The built-ins as members of a struct, the other way WGSL passes them.
struct Ids {
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
}

@compute @workgroup_size(2, 3, 2)
fn grid_3d(ids: Ids, @builtin(local_invocation_index) index: u32, @builtin(num_workgroups) groups: vec3<u32>) {
    record(ids.gid, ids.lid, ids.wid, index, groups, vec3<u32>(2u, 3u, 2u));
}
