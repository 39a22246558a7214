@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

fn classify(v: u32) -> u32 {
    var r = 0u;
    switch v % 7u {
        case 0u: {
            r = 100u;
        }
        case 1u, 2u: {
            r = 200u + v % 7u;
        }
        case 5u: {
            if v > 2147483648u {
                r = 500u;
            } else {
                r = 501u;
            }
        }
        case 3u, default: {
            r = 300u;
        }
    }
    switch bitcast<i32>(v) % 3 {
        case -2: {
            r += 10u;
        }
        case -1: {
            r += 20u;
        }
        case 0: {
            r += 30u;
        }
        default: {
            r += 40u;
        }
    }
    return r;
}

@compute @workgroup_size(64)
fn branches(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&input) {
        out[id.x] = classify(input[id.x]);
    }
}
