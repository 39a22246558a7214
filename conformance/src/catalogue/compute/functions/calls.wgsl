@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

struct Halves {
    low: u32,
    high: u32,
}

var<private> calls: u32;

fn split(v: u32) -> Halves {
    return Halves(v & 0xffffu, v >> 16u);
}

fn combine(h: Halves) -> u32 {
    return h.low * 7u + h.high;
}

fn accumulate(total: ptr<function, u32>, v: u32) {
    *total = *total * 3u + v;
}

fn first_nibble_five(v: u32) -> u32 {
    for (var k = 0u; k < 8u; k++) {
        if ((v >> (4u * k)) & 15u) == 5u {
            return k;
        }
    }
    return 99u;
}

fn counted(v: u32) -> u32 {
    calls += 1u;
    return v ^ (v >> 3u);
}

fn swap_halves(h: ptr<function, Halves>) {
    let low = (*h).low;
    (*h).low = (*h).high;
    (*h).high = low;
}

@compute @workgroup_size(64)
fn calls_kernel(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&input) {
        return;
    }
    let v = input[i];
    var total = 1u;
    accumulate(&total, combine(split(v)));
    accumulate(&total, first_nibble_five(v));
    accumulate(&total, counted(counted(v)));
    var h = split(v);
    swap_halves(&h);
    out[3u * i] = total;
    out[3u * i + 1u] = calls;
    out[3u * i + 2u] = (h.high << 16u) | h.low;
}
