// Softmax and log-softmax along one dimension, and their backward passes, computed in F (f32
// for float16 and float32, rounded once at the end as PyTorch's CPU does; f64 for float64).
// A row is `length` elements `inner` apart, and there are outer x inner rows, all contiguous
// from their offsets. The entry points below take one invocation per row; those at the end,
// `_wide`, a workgroup per row, for long rows of adjacent elements.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl softmax.wgsl | xhal run - -e softmax ...

alias E = f32;  // the elements of the tensors' memory
alias F = f32;  // what rows are computed in

override EXACT: bool = false;  // E is F: out can hold each exponential until the division

struct Rows {
  outer: u32,
  length: u32,
  inner: u32,
  pad: u32,
  offsets: vec4<u32>,  // first element of x, y, out and (softmax_lse) lse
}
var<immediate> s: Rows;

@group(0) @binding(0) var<storage, read> x: array<E>;   // the input, or the gradient
@group(0) @binding(1) var<storage, read_write> out: array<E>;
@group(0) @binding(2) var<storage, read> y: array<E>;   // the forward output (backward passes only)
// softmax_lse: each row's log-sum-exp, in F, row r at s.offsets.w + r.
@group(0) @binding(3) var<storage, read_write> lse: array<F>;

fn xv(k: u32) -> F { return F(x[s.offsets.x + k]); }
fn yv(k: u32) -> F { return F(y[s.offsets.y + k]); }
fn put(k: u32, v: F) { out[s.offsets.z + k] = E(v); }

// The first element of this invocation's row, or NONE past the last row.
const NONE: u32 = 0xffffffffu;
fn row_start(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
  let row = gid.x + gid.y * groups.x * 64u;
  if (row >= s.outer * s.inner) { return NONE; }
  return (row / s.inner) * s.length * s.inner + row % s.inner;
}

// The row's largest element, from its first, which serves every precision.
fn row_max(base: u32) -> F {
  var top = xv(base);
  for (var j = 1u; j < s.length; j = j + 1u) { top = max(top, xv(base + j * s.inner)); }
  return top;
}

fn row_exp_sum(base: u32, top: F) -> F {
  var total = F(0);
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + xexp(xv(base + j * s.inner) - top); }
  return total;
}

// Writes e^(x - top) / sum of the row at `base` to out, and returns the sum.
fn put_probabilities(base: u32, top: F) -> F {
  if (EXACT) {
    // Each exponential once, kept in out, then divided by the same sum, in the same order.
    var total = F(0);
    for (var j = 0u; j < s.length; j = j + 1u) {
      let k = base + j * s.inner;
      let e = xexp(xv(k) - top);
      put(k, e);
      total = total + e;
    }
    for (var j = 0u; j < s.length; j = j + 1u) {
      let k = base + j * s.inner;
      put(k, F(out[s.offsets.z + k]) / total);
    }
    return total;
  }
  let total = row_exp_sum(base, top);
  for (var j = 0u; j < s.length; j = j + 1u) {
    let k = base + j * s.inner;
    put(k, xexp(xv(k) - top) / total);
  }
  return total;
}

@compute @workgroup_size(64)
fn softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let base = row_start(gid, groups);
  if (base == NONE) { return; }
  _ = put_probabilities(base, row_max(base));
}

// `softmax` that also writes each row's log-sum-exp, log(sum_j e^x_j) = top + log(sum_j
// e^(x_j - top)), for attention's forward pass, which keeps it for the backward pass: one pass
// over the row instead of a softmax and a logsumexp of several launches. A row whose every
// element is -inf (a query that sees no key) gets probabilities 0 and a log-sum-exp of +inf,
// as the fused attention kernels give them.
@compute @workgroup_size(64)
fn softmax_lse(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  _ = &y;
  let base = row_start(gid, groups);
  if (base == NONE) { return; }
  let row = gid.x + gid.y * groups.x * 64u;
  let top = row_max(base);
  if (top == -xl_inf()) {
    for (var j = 0u; j < s.length; j = j + 1u) { put(base + j * s.inner, F(0)); }
    lse[s.offsets.w + row] = xl_inf();
    return;
  }
  let total = put_probabilities(base, top);
  lse[s.offsets.w + row] = top + xlog(total);
}

@compute @workgroup_size(64)
fn log_softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let base = row_start(gid, groups);
  if (base == NONE) { return; }
  let top = row_max(base);
  // (x - top) - log(total), as PyTorch's CPU computes it: near the row's maximum, x - (top +
  // log(total)) would lose the low bits of log(total) to top's.
  let log_total = xlog(row_exp_sum(base, top));
  for (var j = 0u; j < s.length; j = j + 1u) {
    let k = base + j * s.inner;
    put(k, (xv(k) - top) - log_total);
  }
}

// x the gradient, y the forward output.
@compute @workgroup_size(64)
fn softmax_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let base = row_start(gid, groups);
  if (base == NONE) { return; }
  var dot = F(0);
  for (var j = 0u; j < s.length; j = j + 1u) {
    let k = base + j * s.inner;
    dot = dot + xv(k) * yv(k);
  }
  for (var j = 0u; j < s.length; j = j + 1u) {
    let k = base + j * s.inner;
    put(k, yv(k) * (xv(k) - dot));
  }
}

@compute @workgroup_size(64)
fn log_softmax_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let base = row_start(gid, groups);
  if (base == NONE) { return; }
  var total = F(0);
  for (var j = 0u; j < s.length; j = j + 1u) { total = total + xv(base + j * s.inner); }
  for (var j = 0u; j < s.length; j = j + 1u) {
    let k = base + j * s.inner;
    put(k, xv(k) - xexp(yv(k)) * total);
  }
}

// ---- Long rows, one workgroup each -------------------------------------------------------
//
// For rows whose elements are adjacent (inner = 1): the 256 invocations of a workgroup take a
// row's elements in turn, so that neighbouring invocations read neighbouring elements
// (coalesced on a GPU, vector lanes on the cpu device), and combine what they found in a
// tree. Every loop over a row runs the same number of times in every invocation, each
// element behind its own test, and indexes the buffers itself rather than through xv and
// put, so that the cpu device runs it across the invocations with plain vector loads.

const LANES: u32 = 256u;
var<workgroup> lanes: array<F, 256>;
var<workgroup> sixteenths: array<F, 16>;

fn combined(a: F, b: F, largest: bool) -> F { return select(a + b, max(a, b), largest); }

var<workgroup> whole: F;

// Every lane's `value` combined, the largest (`largest`) or the sum, which every lane gets:
// sixteen lanes each combine sixteen, then the first lane combines those sixteen, in that
// order on every device. Three barriers, where a tree takes ten: a device that runs a
// workgroup's invocations in turn (lavapipe, PoCL) pays for each one. The result comes back
// through workgroupUniformLoad, so a device that runs the invocations as a loop (the cpu
// device) knows it is the same in every one, and computes what follows from it (the log of a
// row's sum) once for the workgroup rather than once per invocation.
fn lanes_combine(lane: u32, value: F, largest: bool) -> F {
  lanes[lane] = value;
  workgroupBarrier();
  if (lane < 16u) {
    var part = lanes[lane * 16u];
    for (var k = 1u; k < 16u; k = k + 1u) { part = combined(part, lanes[lane * 16u + k], largest); }
    sixteenths[lane] = part;
  }
  workgroupBarrier();
  if (lane == 0u) {
    var total = sixteenths[0];
    for (var k = 1u; k < 16u; k = k + 1u) { total = combined(total, sixteenths[k], largest); }
    whole = total;
  }
  // Its barrier also keeps the next combine from writing the lanes and sixteenths before
  // every lane is done with this one.
  return workgroupUniformLoad(&whole);
}

@compute @workgroup_size(256)
fn softmax_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * groups.x;
  if (row >= s.outer) { return; }
  let xs = s.offsets.x + row * s.length;
  let outs = s.offsets.z + row * s.length;
  var top = F(x[xs]);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { top = max(top, F(x[xs + j])); }
  }
  top = lanes_combine(lane, top, true);
  var total = F(0);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) {
      let e = xexp(F(x[xs + j]) - top);
      // Each exponential once, kept in out until the division (EXACT: out holds F).
      if (EXACT) { out[outs + j] = E(e); }
      total = total + e;
    }
  }
  total = lanes_combine(lane, total, false);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) {
      if (EXACT) {
        out[outs + j] = E(F(out[outs + j]) / total);
      } else {
        out[outs + j] = E(xexp(F(x[xs + j]) - top) / total);
      }
    }
  }
}

@compute @workgroup_size(256)
fn log_softmax_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                    @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * groups.x;
  if (row >= s.outer) { return; }
  let xs = s.offsets.x + row * s.length;
  let outs = s.offsets.z + row * s.length;
  var top = F(x[xs]);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { top = max(top, F(x[xs + j])); }
  }
  top = lanes_combine(lane, top, true);
  var total = F(0);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { total = total + xexp(F(x[xs + j]) - top); }
  }
  let log_total = xlog(lanes_combine(lane, total, false));
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { out[outs + j] = E((F(x[xs + j]) - top) - log_total); }
  }
}

@compute @workgroup_size(256)
fn softmax_backward_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                         @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * groups.x;
  if (row >= s.outer) { return; }
  let xs = s.offsets.x + row * s.length;
  let ys = s.offsets.y + row * s.length;
  let outs = s.offsets.z + row * s.length;
  var dot = F(0);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { dot = dot + F(x[xs + j]) * F(y[ys + j]); }
  }
  dot = lanes_combine(lane, dot, false);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { out[outs + j] = E(F(y[ys + j]) * (F(x[xs + j]) - dot)); }
  }
}

@compute @workgroup_size(256)
fn log_softmax_backward_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
                             @builtin(local_invocation_index) lane: u32) {
  let row = wid.x + wid.y * groups.x;
  if (row >= s.outer) { return; }
  let xs = s.offsets.x + row * s.length;
  let ys = s.offsets.y + row * s.length;
  let outs = s.offsets.z + row * s.length;
  var total = F(0);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { total = total + F(x[xs + j]); }
  }
  total = lanes_combine(lane, total, false);
  for (var start = 0u; start < s.length; start = start + LANES) {
    let j = start + lane;
    if (j < s.length) { out[outs + j] = E(F(x[xs + j]) - xexp(F(y[ys + j])) * total); }
  }
}
