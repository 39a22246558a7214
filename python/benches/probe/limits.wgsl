// The device's own limits, as WGSL reaches them: `fma_peak` runs independent chains of fused
// multiply-adds with no memory traffic (floating-point throughput), `copy` streams a large
// buffer through (memory bandwidth). python/benches/torch_ops.py times them, as the limits its
// operators are measured against.

override CHAINS_STEPS: u32 = 4096u;

struct Copy {
  count: u32,  // vec4s
}

@group(0) @binding(0) var<storage, read> source: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> copied: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> sums: array<f32>;
var<immediate> copy_size: Copy;

// Eight independent chains of vec4 fma per invocation, CHAINS_STEPS steps: 8 * 4 * 2 *
// CHAINS_STEPS floating-point operations. The multiplier is read from the invocation's id, so
// no compiler can fold the chains; their sum is stored, so none can drop them. The barrier
// costs one wait elsewhere; on the cpu device it makes the workgroup run in vector lanes, as
// the tiled products do.
@compute @workgroup_size(64)
fn fma_peak(@builtin(global_invocation_id) id: vec3<u32>) {
  workgroupBarrier();
  let m = vec4<f32>(0.999999) + vec4<f32>(f32(id.x & 1u) * 1e-7);
  var a0 = vec4<f32>(f32(id.x)); var a1 = a0 + 1.0; var a2 = a0 + 2.0; var a3 = a0 + 3.0;
  var a4 = a0 + 4.0; var a5 = a0 + 5.0; var a6 = a0 + 6.0; var a7 = a0 + 7.0;
  let c = vec4<f32>(1e-3);
  // Eight dependent steps a statement, so that a device which keeps each invocation's values in
  // memory between statements (the cpu device's vector lanes) loads and stores once per eight.
  for (var step = 0u; step < CHAINS_STEPS; step += 8u) {
    a0 = fma(fma(fma(fma(fma(fma(fma(fma(a0, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a1 = fma(fma(fma(fma(fma(fma(fma(fma(a1, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a2 = fma(fma(fma(fma(fma(fma(fma(fma(a2, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a3 = fma(fma(fma(fma(fma(fma(fma(fma(a3, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a4 = fma(fma(fma(fma(fma(fma(fma(fma(a4, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a5 = fma(fma(fma(fma(fma(fma(fma(fma(a5, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a6 = fma(fma(fma(fma(fma(fma(fma(fma(a6, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
    a7 = fma(fma(fma(fma(fma(fma(fma(fma(a7, m, c), m, c), m, c), m, c), m, c), m, c), m, c), m, c);
  }
  let total = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7);
  sums[id.x] = total.x + total.y + total.z + total.w;
}

// Each workgroup copies COPY_RUNS runs of 64 adjacent vec4s, a vec4 an invocation a run.
override COPY_RUNS: u32 = 16u;

@compute @workgroup_size(64)
fn copy(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  workgroupBarrier();  // as in fma_peak: vector lanes on the cpu device
  let first = (group.x + group.y * groups.x) * 64u * COPY_RUNS;
  for (var run = 0u; run < COPY_RUNS; run++) {
    let i = first + run * 64u + lane;
    if (i < copy_size.count) {
      copied[i] = source[i];
    }
  }
}
