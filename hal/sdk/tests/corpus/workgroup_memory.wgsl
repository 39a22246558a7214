// var<workgroup> memory with workgroupBarrier: a reversal (each invocation reads what
// another wrote), a tree reduction and a Hillis-Steele inclusive scan, 64 elements per
// workgroup. Workgroups work on their own slices.

const SIZE: u32 = 64u;

var<workgroup> tile: array<u32, SIZE>;

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;

@compute @workgroup_size(64)
fn reverse(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {
    let base = w.x * SIZE;
    tile[l] = input[base + l];
    workgroupBarrier();
    output[base + l] = tile[SIZE - 1u - l];
}

// output[w] = the wrapping sum of the workgroup's 64 inputs.
@compute @workgroup_size(64)
fn reduce(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {
    tile[l] = input[w.x * SIZE + l];
    workgroupBarrier();
    for (var stride = SIZE / 2u; stride > 0u; stride = stride / 2u) {
        if l < stride {
            tile[l] = tile[l] + tile[l + stride];
        }
        workgroupBarrier();
    }
    if l == 0u {
        output[w.x] = tile[0];
    }
}

// output[i] = input[base] + ... + input[i] within the workgroup's slice.
@compute @workgroup_size(64)
fn scan(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) w: vec3<u32>) {
    let base = w.x * SIZE;
    tile[l] = input[base + l];
    workgroupBarrier();
    for (var offset = 1u; offset < SIZE; offset = offset * 2u) {
        var addend = 0u;
        if l >= offset {
            addend = tile[l - offset];
        }
        workgroupBarrier();
        tile[l] = tile[l] + addend;
        workgroupBarrier();
    }
    output[base + l] = tile[l];
}
