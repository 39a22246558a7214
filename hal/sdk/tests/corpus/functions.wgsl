// Function calls: nested calls three deep, pointer parameters (ptr<function, i32>,
// ptr<function, array>, ptr<private, u32>), a function returning a struct, and a private
// variable updated by the callees. WGSL forbids recursion, so none here.

struct Pair {
    lo: i32,
    hi: i32,
}

var<private> calls: u32;

fn square(x: i32) -> i32 {
    calls += 1u;
    return x * x;
}

fn sum_squares(a: i32, b: i32) -> i32 {
    return square(a) + square(b);
}

fn nested(a: i32, b: i32, c: i32) -> i32 {
    return sum_squares(sum_squares(a, b) % 1000, c);
}

fn swap(a: ptr<function, i32>, b: ptr<function, i32>) {
    let t = *a;
    *a = *b;
    *b = t;
}

fn ordered(a: i32, b: i32) -> Pair {
    var x = a;
    var y = b;
    if x > y {
        swap(&x, &y);
    }
    return Pair(x, y);
}

fn accumulate(acc: ptr<function, array<i32, 4>>, v: i32) {
    for (var k = 0; k < 4; k++) {
        (*acc)[k] += v * k;
    }
}

fn bump(counter: ptr<private, u32>, by: u32) {
    *counter += by;
}

@group(0) @binding(0) var<storage, read> input: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

@compute @workgroup_size(32)
fn functions(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if 3u * i + 2u >= arrayLength(&input) {
        return;
    }
    let a = input[3u * i] % 100;
    let b = input[3u * i + 1u] % 100;
    let c = input[3u * i + 2u] % 100;
    calls = 0u;
    let n = nested(a, b, c);
    let p = ordered(a, b);
    var acc = array<i32, 4>(1, 2, 3, 4);
    accumulate(&acc, a);
    accumulate(&acc, c);
    bump(&calls, 100u);
    let o = 8u * i;
    out[o + 0u] = n;
    out[o + 1u] = p.lo;
    out[o + 2u] = p.hi;
    out[o + 3u] = acc[0];
    out[o + 4u] = acc[1];
    out[o + 5u] = acc[2];
    out[o + 6u] = acc[3];
    out[o + 7u] = i32(calls);
}
