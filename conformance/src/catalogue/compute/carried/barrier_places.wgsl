@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

// The workgroup's sum of `value`, seen by every invocation.
fn workgroup_sum(lane: u32, value: u32) -> u32 {
    tile[lane] = value;
    workgroupBarrier();
    var offset = 32u;
    while (offset > 0u) {
        if (lane < offset) {
            tile[lane] += tile[lane + offset];
        }
        offset /= 2u;
        workgroupBarrier();
    }
    let total = tile[0];
    workgroupBarrier();
    return total;
}

// The mirrored lane's value for even lanes; odd lanes return later, on another path.
fn mirrored(lane: u32, value: u32) -> u32 {
    tile[lane] = value;
    workgroupBarrier();
    let other = tile[63u - lane];
    workgroupBarrier();
    if (lane % 2u == 0u) {
        return other;
    }
    return 1000000u + value;
}

fn twice(lane: u32, value: u32) -> u32 {
    let first = workgroup_sum(lane, value);
    return first + workgroup_sum(lane, value * 2u);
}

@compute @workgroup_size(64)
fn calls(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let value = input[group.x * 64u + lane];
    var acc = 0u;
    for (var k = 0u; k < 3u; k++) {
        acc += workgroup_sum(lane, value + k);
    }
    out[group.x * 64u + lane] = acc * 7u + mirrored(lane, value) + twice(lane, value);
}

@compute @workgroup_size(64)
fn switched(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    let value = input[group.x * 64u + lane];
    var result = 0u;
    switch (group.x % 4u) {
        case 0u: {
            tile[lane] = value;
            workgroupBarrier();
            result = tile[63u - lane];
        }
        case 1u, 2u: {
            tile[lane] = value * 2u;
            workgroupBarrier();
            if (lane < 10u) {
                result = 5u;
                break;
            }
            result = tile[(lane + 1u) % 64u];
        }
        default: {
            result = workgroup_sum(lane, value);
        }
    }
    var steps = 0u;
    for (var k = 0u; k < 4u; k++) {
        workgroupBarrier();
        switch (k) {
            case 1u: {
                continue;
            }
            default: {
                steps += k;
            }
        }
        steps += 10u;
    }
    out[group.x * 64u + lane] = result * 100u + steps;
}
