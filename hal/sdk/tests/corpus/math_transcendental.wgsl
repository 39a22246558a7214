// Transcendental f32 built-ins, each held to WGSL's accuracy bound for its inputs:
// exp, exp2, log, log2, pow, sin, cos, tan, atan2, inverseSqrt. One output array per
// function, in that order, each as long as the input arrays.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn transcendental(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let n = arrayLength(&x);
    if i >= n {
        return;
    }
    // x: exponents in [-10, 10]; y: positive arguments in [0.01, 100];
    // x / 4: angles in [-2.5, 2.5]; x * 0.12: angles in [-1.2, 1.2] for tan.
    let e = x[i];
    let p = y[i];
    out[0u * n + i] = exp(e);
    out[1u * n + i] = exp2(e);
    out[2u * n + i] = log(p);
    out[3u * n + i] = log2(p);
    out[4u * n + i] = pow(p, e / 4.0);
    out[5u * n + i] = sin(e / 4.0);
    out[6u * n + i] = cos(e / 4.0);
    out[7u * n + i] = tan(e * 0.125);
    out[8u * n + i] = atan2(e, p - 50.0);
    out[9u * n + i] = inverseSqrt(p);
}
