@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn diverge(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    var acc = v;
    for (var k = 0u; k < v % 23u; k++) {
        if (k & 1u) == 1u {
            continue;
        }
        acc = acc * 31u + k;
        if acc % 97u == 0u {
            break;
        }
    }
    var steps = 0u;
    var x = v % 5000u + 1u;
    loop {
        if x == 1u {
            break;
        }
        if (x & 1u) == 0u {
            x = x / 2u;
        } else {
            x = 3u * x + 1u;
        }
        steps++;
        continuing {
            break if steps >= 150u;
        }
    }
    var s = 0u;
    while s < (v >> 28u) {
        s += 1u;
        acc ^= s << 3u;
    }
    out[3u * i] = acc;
    out[3u * i + 1u] = steps;
    out[3u * i + 2u] = x;
}
