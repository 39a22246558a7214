var<immediate> increment: f64;
@group(0) @binding(0) var<storage, read_write> out: array<f64>;

@compute @workgroup_size(1)
fn accumulate() {
    var sum = out[0];
    for (var k = 0u; k < 1000u; k++) {
        sum += increment;
    }
    out[0] = sum;
}
