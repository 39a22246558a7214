// Scaled dot-product attention as one kernel a pass, with an online softmax (a running
// maximum and sum, so the scores of a row are never stored), an optional additive or boolean
// mask broadcast to [batch, heads, queries, keys], and causal masking (query i sees keys j <= i,
// PyTorch's top-left alignment). Computed in F. A row whose every key is masked gives zeros,
// as PyTorch's CPU does.
//
// Entry points, one invocation a row:
//   forward             (b, h, i): out_i and the row's log-sum-exp
//   backward_query      (b, h, i): dq_i
//   backward_key_value  (b, h, j): dk_j and dv_j
// The backward passes take delta_i = dout_i . out_i from the caller beside the log-sum-exp,
// and recompute each probability from the scores and the saved log-sum-exp.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl attention.wgsl | xhal run - -e forward ...

alias E = f32;  // the elements of the tensors' memory
alias F = f32;  // what scores and sums are computed in
alias M = f32;  // the elements of the mask's memory: E for an additive mask, u32 for bool bytes

override MASK: u32 = 0u;        // a MASK_ constant
override CAUSAL: bool = false;

const MASK_NONE: u32 = 0u;
const MASK_ADDITIVE: u32 = 1u;  // a floating mask, added to the scores
const MASK_BOOL: u32 = 2u;      // a bool mask: false hides the key

// A row's accumulator holds this many elements of a value (or key) row at a time; longer
// heads take more than one sweep over the keys (or queries).
const CHUNK: u32 = 128u;

struct Shapes {
  batch: u32,
  heads: u32,
  key_heads: u32,          // heads of k and v (grouped-query attention shares them)
  queries: u32,            // L
  keys: u32,               // S
  head_size: u32,          // E, of q and k
  value_size: u32,         // Ev, of v and out
  scale_low: u32,          // the scale's bits as F, low word first
  scale_high: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
  q_strides: vec4<u32>,    // batch, head, row, element
  k_strides: vec4<u32>,
  v_strides: vec4<u32>,
  mask_strides: vec4<u32>,
  do_strides: vec4<u32>,   // the output's gradient
  offsets: vec4<u32>,      // first element of q, k, v and the mask
  do_offset: u32,
  pad3: u32,
  pad4: u32,
  pad5: u32,
}
@group(0) @binding(0) var<uniform> s: Shapes;
@group(0) @binding(1) var<storage, read> query: array<E>;
@group(0) @binding(2) var<storage, read> key: array<E>;
@group(0) @binding(3) var<storage, read> value: array<E>;
@group(0) @binding(4) var<storage, read> mask: array<M>;
// forward: the output [b, h, i, Ev]; backward_query: dq [b, h, i, E]; backward_key_value: dk
// [b, h, j, E] followed by dv [b, h, j, Ev]. Contiguous.
@group(0) @binding(5) var<storage, read_write> out: array<E>;
// Per row [b, h, i]: the log-sum-exp (written forward), then, for the backward passes,
// delta_i = dout_i . out_i.
@group(0) @binding(6) var<storage, read_write> stats: array<F>;
@group(0) @binding(7) var<storage, read> grad_out: array<E>;   // backward: the output's gradient

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

fn scale() -> F { return float_from_bits(s.scale_low, s.scale_high); }

fn q_at(b: u32, h: u32, i: u32, d: u32) -> F {
  return F(query[s.offsets.x + b * s.q_strides.x + h * s.q_strides.y + i * s.q_strides.z + d * s.q_strides.w]);
}

fn k_at(b: u32, h: u32, j: u32, d: u32) -> F {
  let kh = h / (s.heads / s.key_heads);
  return F(key[s.offsets.y + b * s.k_strides.x + kh * s.k_strides.y + j * s.k_strides.z + d * s.k_strides.w]);
}

fn v_at(b: u32, h: u32, j: u32, d: u32) -> F {
  let kh = h / (s.heads / s.key_heads);
  return F(value[s.offsets.z + b * s.v_strides.x + kh * s.v_strides.y + j * s.v_strides.z + d * s.v_strides.w]);
}

fn do_at(b: u32, h: u32, i: u32, d: u32) -> F {
  return F(grad_out[s.do_offset + b * s.do_strides.x + h * s.do_strides.y + i * s.do_strides.z + d * s.do_strides.w]);
}

// Whether query i sees key j, and what the mask adds to their score.
fn visible(b: u32, h: u32, i: u32, j: u32) -> bool {
  if (CAUSAL && j > i) { return false; }
  if (MASK == MASK_BOOL) {
    let at = s.offsets.w + b * s.mask_strides.x + h * s.mask_strides.y + i * s.mask_strides.z + j * s.mask_strides.w;
    return ((u32(mask[at / 4u]) >> ((at % 4u) * 8u)) & 0xffu) != 0u;
  }
  return true;
}

fn bias(b: u32, h: u32, i: u32, j: u32) -> F {
  if (MASK != MASK_ADDITIVE) { return F(0); }
  return F(mask[s.offsets.w + b * s.mask_strides.x + h * s.mask_strides.y + i * s.mask_strides.z + j * s.mask_strides.w]);
}

fn score(b: u32, h: u32, i: u32, j: u32) -> F {
  var dot = F(0);
  for (var d = 0u; d < s.head_size; d = d + 1u) { dot = dot + q_at(b, h, i, d) * k_at(b, h, j, d); }
  return dot * scale() + bias(b, h, i, j);
}

fn row(e: u32) -> vec3<u32> {
  return vec3<u32>(e / (s.heads * s.queries), (e / s.queries) % s.heads, e % s.queries);
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= s.batch * s.heads * s.queries) { return; }
  let r = row(e);
  let b = r.x;
  let h = r.y;
  let i = r.z;
  var top = F(0);
  var total = F(0);
  for (var first = 0u; first < s.value_size; first = first + CHUNK) {
    var acc: array<F, CHUNK>;
    let width = min(CHUNK, s.value_size - first);
    top = F(0);
    total = F(0);
    var seen = false;
    for (var j = 0u; j < s.keys; j = j + 1u) {
      if (!visible(b, h, i, j)) { continue; }
      let x = score(b, h, i, j);
      if (is_inf(x) && x < F(0)) { continue; }
      // The running maximum rises to x: what was summed so far shrinks by exp(top - x).
      var weight = F(1);
      if (!seen || x > top) {
        let shrink = select(F(0), xexp(top - x), seen);
        total = total * shrink;
        for (var d = 0u; d < width; d = d + 1u) { acc[d] = acc[d] * shrink; }
        top = x;
        seen = true;
      } else {
        weight = xexp(x - top);
      }
      total = total + weight;
      for (var d = 0u; d < width; d = d + 1u) { acc[d] = acc[d] + weight * v_at(b, h, j, first + d); }
    }
    for (var d = 0u; d < width; d = d + 1u) {
      var o = F(0);
      if (total > F(0)) { o = acc[d] / total; }
      out[e * s.value_size + first + d] = E(o);
    }
  }
  // A row that sees no key has a log-sum-exp of +inf, so that its probabilities are 0.
  if (total > F(0)) {
    stats[e] = top + xlog(total);
  } else {
    stats[e] = float_infinity();
  }
}

// The probability of key j for query i, from the saved log-sum-exp.
fn probability(b: u32, h: u32, i: u32, j: u32) -> F {
  if (!visible(b, h, i, j)) { return F(0); }
  let x = score(b, h, i, j);
  let row_lse = stats[(b * s.heads + h) * s.queries + i];
  if (is_inf(row_lse) || (is_inf(x) && x < F(0))) { return F(0); }
  return xexp(x - row_lse);
}

// dP_ij = dout_i . v_j
fn grad_probability(b: u32, h: u32, i: u32, j: u32) -> F {
  var dot = F(0);
  for (var d = 0u; d < s.value_size; d = d + 1u) { dot = dot + do_at(b, h, i, d) * v_at(b, h, j, d); }
  return dot;
}

@compute @workgroup_size(64)
fn backward_query(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= s.batch * s.heads * s.queries) { return; }
  let r = row(e);
  let b = r.x;
  let h = r.y;
  let i = r.z;
  let row_delta = stats[s.batch * s.heads * s.queries + e];
  for (var first = 0u; first < s.head_size; first = first + CHUNK) {
    var acc: array<F, CHUNK>;
    let width = min(CHUNK, s.head_size - first);
    for (var j = 0u; j < s.keys; j = j + 1u) {
      let p = probability(b, h, i, j);
      if (p == F(0)) { continue; }
      let ds = p * (grad_probability(b, h, i, j) - row_delta);
      for (var d = 0u; d < width; d = d + 1u) { acc[d] = acc[d] + ds * k_at(b, h, j, first + d); }
    }
    for (var d = 0u; d < width; d = d + 1u) { out[e * s.head_size + first + d] = E(acc[d] * scale()); }
  }
}

// dk_j and dv_j for key j of head h; with grouped-query attention, each query head writes its
// own, which the caller sums over the heads that share a key head.
@compute @workgroup_size(64)
fn backward_key_value(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= s.batch * s.heads * s.keys) { return; }
  let b = e / (s.heads * s.keys);
  let h = (e / s.keys) % s.heads;
  let j = e % s.keys;
  let deltas = s.batch * s.heads * s.queries + (b * s.heads + h) * s.queries;
  let dv_at = s.batch * s.heads * s.keys * s.head_size + e * s.value_size;
  if (s.head_size <= CHUNK && s.value_size <= CHUNK) {
    // Both gradients in one sweep over the queries: each probability is computed once (the
    // sums are the same, in the same order, as the two sweeps below).
    var dk: array<F, CHUNK>;
    var dv: array<F, CHUNK>;
    for (var i = 0u; i < s.queries; i = i + 1u) {
      let p = probability(b, h, i, j);
      if (p == F(0)) { continue; }
      let ds = p * (grad_probability(b, h, i, j) - stats[deltas + i]);
      for (var d = 0u; d < s.head_size; d = d + 1u) { dk[d] = dk[d] + ds * q_at(b, h, i, d); }
      for (var d = 0u; d < s.value_size; d = d + 1u) { dv[d] = dv[d] + p * do_at(b, h, i, d); }
    }
    for (var d = 0u; d < s.head_size; d = d + 1u) { out[e * s.head_size + d] = E(dk[d] * scale()); }
    for (var d = 0u; d < s.value_size; d = d + 1u) { out[dv_at + d] = E(dv[d]); }
    return;
  }
  for (var first = 0u; first < s.head_size; first = first + CHUNK) {
    var acc: array<F, CHUNK>;
    let width = min(CHUNK, s.head_size - first);
    for (var i = 0u; i < s.queries; i = i + 1u) {
      let p = probability(b, h, i, j);
      if (p == F(0)) { continue; }
      let ds = p * (grad_probability(b, h, i, j) - stats[deltas + i]);
      for (var d = 0u; d < width; d = d + 1u) { acc[d] = acc[d] + ds * q_at(b, h, i, first + d); }
    }
    for (var d = 0u; d < width; d = d + 1u) { out[e * s.head_size + first + d] = E(acc[d] * scale()); }
  }
  for (var first = 0u; first < s.value_size; first = first + CHUNK) {
    var acc: array<F, CHUNK>;
    let width = min(CHUNK, s.value_size - first);
    for (var i = 0u; i < s.queries; i = i + 1u) {
      let p = probability(b, h, i, j);
      if (p == F(0)) { continue; }
      for (var d = 0u; d < width; d = d + 1u) { acc[d] = acc[d] + p * do_at(b, h, i, first + d); }
    }
    for (var d = 0u; d < width; d = d + 1u) { out[dv_at + first + d] = E(acc[d]); }
  }
}
