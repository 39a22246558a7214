// The negative log-likelihood loss (so cross entropy, after log-softmax) forward and backward,
// with class weights, an ignored class and every reduction, computed in F (f32 for float16 and
// float32, f64 for float64). Targets are int64, read by their low words: the C++ side checks
// on the host that every target is a class or the ignored index first.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl loss.wgsl | xhal run - -e nll_none ...

alias E = f32;  // the elements of the floating tensors' memory
alias F = f32;  // what the loss is computed in

override HAS_WEIGHT: bool = false;
override REDUCTION: u32 = 0u;  // 0 none, 1 mean, 2 sum (PyTorch's enumeration)

struct Loss {
  n: u32,              // samples
  classes: u32,
  ignore: i32,         // the ignored class
  pad: u32,
  self_offset: u32,
  self_row: u32,       // strides of the input's sample and class dimensions
  self_column: u32,
  target_offset: u32,  // in int64 elements
  weight_offset: u32,
  out_offset: u32,
  total_offset: u32,
  grad_offset: u32,
  grad_stride: u32,    // the gradient's stride with no reduction (0 for a single value)
  pad0: u32,
  pad1: u32,
  pad2: u32,
}
var<immediate> q: Loss;

// Bindings the forward and backward passes share come first, so that each is the same
// argument of both.
@group(0) @binding(0) var<storage, read> targets: array<u32>;   // int64, two words an element
@group(0) @binding(1) var<storage, read> weight: array<E>;
@group(0) @binding(2) var<storage, read_write> out: array<E>;  // the loss, or the input's gradient
@group(0) @binding(3) var<storage, read> scores: array<E>;     // log-probabilities, samples by classes (forward)
@group(0) @binding(4) var<storage, read_write> total_weight: array<E>;  // (forward)
@group(0) @binding(5) var<storage, read> grad: array<E>;       // the loss's gradient (backward)
@group(0) @binding(6) var<storage, read> total: array<E>;      // the forward pass's total weight (backward)

fn target_of(i: u32) -> i32 { return bitcast<i32>(targets[2u * (q.target_offset + i)]); }

fn weight_of(c: i32) -> F {
  if (HAS_WEIGHT) { return F(weight[q.weight_offset + u32(c)]); }
  return F(1);
}

// Sample i's loss and weight.
fn loss_of(i: u32) -> vec2<F> {
  let t = target_of(i);
  if (t == q.ignore) { return vec2<F>(F(0)); }
  let w = weight_of(t);
  return vec2<F>(-w * F(scores[q.self_offset + i * q.self_row + u32(t) * q.self_column]), w);
}

@compute @workgroup_size(64)
fn nll_none(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= q.n) { return; }
  out[q.out_offset + i] = E(loss_of(i).x);
  if (i == 0u) { total_weight[q.total_offset] = E(0); }
}

var<workgroup> partial: array<vec2<F>, 256>;

// One workgroup sums every sample's loss and weight as a tree.
@compute @workgroup_size(256)
fn nll_reduce(@builtin(local_invocation_index) lane: u32) {
  var sums = vec2<F>(F(0));
  for (var i = lane; i < q.n; i = i + 256u) { sums = sums + loss_of(i); }
  partial[lane] = sums;
  workgroupBarrier();
  for (var width = 128u; width > 0u; width = width / 2u) {
    if (lane < width) { partial[lane] = partial[lane] + partial[lane + width]; }
    workgroupBarrier();
  }
  if (lane == 0u) {
    var loss = partial[0].x;
    if (REDUCTION == 1u) { loss = loss / partial[0].y; }
    out[q.out_offset] = E(loss);
    total_weight[q.total_offset] = E(partial[0].y);
  }
}

// Launched as ceil(classes / 64) x samples workgroups (samples past 65,535 spill into z), so
// that no element costs a division.
@compute @workgroup_size(64)
fn nll_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let c = gid.x;
  let i = gid.y + gid.z * groups.y;
  if (c >= q.classes || i >= q.n) { return; }
  let e = i * q.classes + c;
  let t = target_of(i);
  var value = F(0);
  if (t != q.ignore && u32(t) == c) {
    var g = F(grad[q.grad_offset + i * q.grad_stride]);
    if (REDUCTION == 1u) { g = g / F(total[q.total_offset]); }
    value = -weight_of(t) * g;
  }
  out[q.out_offset + e] = E(value);
}
