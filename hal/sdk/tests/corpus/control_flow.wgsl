// Every control-flow form, with lanes of one workgroup taking different paths:
// if/else-if chains with short-circuit && and || (the guarded index would be out of bounds,
// which faults on the strict CPU backend, so skipping it is observable), switch, loop with
// continuing and `break if`, while, for with continue and break, and early returns.

@group(0) @binding(0) var<storage, read> input: array<i32>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

fn classify(x: i32) -> i32 {
    if x < -100 {
        return 0;
    } else if x < 0 {
        return 1;
    } else if x == 0 {
        return 2;
    } else if x <= 100 {
        return 3;
    } else {
        return 4;
    }
}

@compute @workgroup_size(64)
fn if_else(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = input[i];
    var r = classify(x) * 10;
    // j runs past the end of `input` for half the lanes: && must not evaluate input[j].
    let j = i * 2u;
    if j < arrayLength(&input) && input[j] > 0 {
        r += 1;
    }
    if (x & 1) == 0 || input[x & 63] > 0 {
        r += 100;
    } else {
        if x > 0 {
            r += 200;
        } else {
            r -= 200;
        }
    }
    out[i] = r;
}

@compute @workgroup_size(64)
fn switches(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let x = input[i] % 12;
    var r = 0;
    switch x {
        case 0: {
            r = 100;
        }
        case 1, 2, 3: {
            r = 200 + x;
        }
        case 4, default: {
            r = 999;
        }
        case -5, 10 {
            r = -x;
        }
        case -1, -2, -3, -4,: {
            // A `break` leaves the switch early.
            if x == -2 {
                break;
            }
            r = 300 + x;
        }
    }
    // An unsigned selector, and a switch inside a loop: `break` in the switch leaves the
    // switch, not the loop.
    var count = 0u;
    for (var k = 0u; k < 6u; k++) {
        switch (u32(x + 12) + k) % 4u {
            case 0u: {
                break;
            }
            case 3u: {
                count += 10u;
            }
            default: {
                count += 1u;
            }
        }
    }
    out[i] = r * 1000 + i32(count);
}

@compute @workgroup_size(64)
fn loop_continuing(@builtin(global_invocation_id) id: vec3<u32>) {
    let x = u32(abs(input[id.x]) % 1000);
    // Each lane runs a different number of iterations.
    let n = x % 17u + 1u;
    var i = 0u;
    var acc = 0u;
    loop {
        if i % 3u == 0u {
            // `continue` still runs the continuing block.
            continue;
        }
        acc += i * x;
        continuing {
            i += 1u;
            break if i >= n;
        }
    }
    out[id.x] = i32(acc * 64u + i);
}

@compute @workgroup_size(64)
fn while_collatz(@builtin(global_invocation_id) id: vec3<u32>) {
    var x = u32(abs(input[id.x]) % 1000) + 1u;
    var steps = 0;
    while x != 1u {
        if x % 2u == 0u {
            x = x / 2u;
        } else {
            x = 3u * x + 1u;
        }
        steps++;
    }
    out[id.x] = steps;
}

@compute @workgroup_size(64)
fn for_break_continue(@builtin(global_invocation_id) id: vec3<u32>) {
    let x = abs(input[id.x]) % 100;
    var acc = 0;
    for (var k = 0; k < 64; k++) {
        if (k & 1) == 1 {
            continue;
        }
        if k * x > 500 {
            break;
        }
        // A nested loop whose break only leaves the inner loop.
        for (var j = 0; ; j++) {
            if j > k / 4 {
                break;
            }
            acc += j;
        }
        acc += k;
    }
    out[id.x] = acc;
}

fn first_multiple(x: i32, limit: i32) -> i32 {
    // A return from inside a loop.
    for (var k = 1; k < limit; k++) {
        if (k * 7) % (x % 13 + 13) == 0 {
            return k;
        }
    }
    return -1;
}

// Launched with more invocations than elements; lanes leave at different points.
@compute @workgroup_size(64)
fn early_return(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&out) {
        return;
    }
    let x = input[i];
    out[i] = 1;
    if (x & 3) == 0 {
        out[i] = 2;
        return;
    }
    for (var k = 0; k < 5; k++) {
        if k == (x & 7) {
            out[i] = 100 + k + first_multiple(x, 40) * 1000;
            return;
        }
    }
    out[i] = 3;
}
