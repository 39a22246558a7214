// Mixed precision's gradient scaling (torch.amp.GradScaler): unscaling the gradients while
// noting any that is not finite, and updating the scale from what was noted.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl amp.wgsl | xhal run - -e unscale ...

alias E = f32;  // the gradients' elements
alias F = f32;  // what they are computed in

// Both entry points' arguments: each uses its own members.
struct Amp {
  count: u32,           // unscale: elements of the gradient, contiguous
  grad_offset: u32,     // unscale: its first element
  inv_offset: u32,      // unscale: the element of inv_scale
  found_offset: u32,    // the element of found_inf
  scale_offset: u32,    // update_scale: the element of the scale
  tracker_offset: u32,  // update_scale: the element of the growth tracker
  growth_interval: i32,
  growth_factor: f32,
  backoff_factor: f32,
}
var<immediate> u: Amp;

@group(0) @binding(0) var<storage, read_write> grad: array<E>;
@group(0) @binding(1) var<storage, read> inv_scale: array<f32>;
// found_inf, a float32 that is 0.0 or 1.0: its bits as a word, so that every invocation that
// finds a non-finite value can raise it to 1.0 (0x3f800000) with one atomic maximum.
@group(0) @binding(2) var<storage, read_write> found_inf: array<atomic<u32>>;

// grad *= inv_scale, and found_inf = 1 when an element is infinite or NaN (before scaling).
@compute @workgroup_size(64)
fn unscale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= u.count) { return; }
  let g = F(grad[u.grad_offset + i]);
  if (is_nan(g) || is_inf(g)) {
    atomicMax(&found_inf[u.found_offset], 0x3f800000u);
  }
  grad[u.grad_offset + i] = E(g * F(inv_scale[u.inv_offset]));
}

@group(0) @binding(3) var<storage, read_write> scale: array<f32>;
@group(0) @binding(4) var<storage, read_write> growth_tracker: array<i32>;
@group(0) @binding(5) var<storage, read> found: array<f32>;

// After a step: back off the scale when found_inf is set (and start counting again); else count
// the step, and grow the scale after growth_interval steps in a row, unless it would overflow.
@compute @workgroup_size(1)
fn update_scale() {
  let current = scale[u.scale_offset];
  if (found[u.found_offset] != 0.0) {
    scale[u.scale_offset] = current * u.backoff_factor;
    growth_tracker[u.tracker_offset] = 0;
    return;
  }
  let successful = growth_tracker[u.tracker_offset] + 1;
  if (successful == u.growth_interval) {
    let grown = current * u.growth_factor;
    if (!is_inf(F(grown)) && !is_nan(F(grown))) { scale[u.scale_offset] = grown; }
    growth_tracker[u.tracker_offset] = 0;
  } else {
    growth_tracker[u.tracker_offset] = successful;
  }
}
