// NaN and infinity at run time. WGSL lets an implementation assume they never occur (the
// "finite math assumption"), so this case holds the CPU reference backend to its promise
// of IEEE-754 behaviour rather than a portable guarantee: NaN compares unequal to
// everything (and != is true); 1/0 is inf, 0/0 and inf - inf are NaN; inf compares above
// every finite value. Operands come from buffers, so nothing is folded at compile time.
// Per element: 6 comparison flags x vs y packed in a u32, then x + y, x * y, x / y, y - x.

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> flags: array<u32>;
@group(0) @binding(3) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(64)
fn special(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&a) {
        return;
    }
    let x = a[i];
    let y = b[i];
    flags[i] = u32(x == y) | (u32(x != y) << 1u) | (u32(x < y) << 2u) | (u32(x <= y) << 3u)
        | (u32(x > y) << 4u) | (u32(x >= y) << 5u) | (u32(x != x) << 6u) | (u32(all(vec2<bool>(x == x, y == y))) << 7u);
    values[4u * i] = x + y;
    values[4u * i + 1u] = x * y;
    values[4u * i + 2u] = x / y;
    values[4u * i + 3u] = y - x;
}
