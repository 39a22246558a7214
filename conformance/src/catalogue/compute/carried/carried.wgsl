@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
var<workgroup> tile: array<u32, 64>;

fn advance(counter: ptr<function, u32>, by: u32) {
    *counter = *counter + by;
}

@compute @workgroup_size(64)
fn walk(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    var position = group.x * 256u;
    var acc = 0u;
    for (var pass_ = 0u; pass_ < 4u; pass_++) {
        tile[lane] = input[position + lane];
        position += 64u;
        workgroupBarrier();
        acc += tile[63u - lane] * (pass_ + 1u);
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = acc + position;
}

@compute @workgroup_size(64)
fn tree(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var offset = 32u;
    while (offset > 0u) {
        if (lane < offset) {
            tile[lane] += tile[lane + offset];
        }
        offset = offset / 2u;
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = tile[0] + offset;
}

@compute @workgroup_size(8, 8)
fn strides(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = input[group.x * 64u + lane];
    workgroupBarrier();
    var stride = 1u;
    var steps = 0u;
    loop {
        if (stride >= 64u) {
            break;
        }
        let mine = tile[lane];
        stride *= 2u;
        let other = tile[(lane + stride / 2u) % 64u];
        for (var j = 0u; j < 3u; j++) {
            advance(&steps, j);
        }
        workgroupBarrier();
        if (lane % stride == 0u) {
            tile[lane] = mine + other;
        }
        workgroupBarrier();
    }
    out[group.x * 64u + lane] = tile[lane] * 1000u + stride * 100u + steps;
}
