// Random numbers of the PyTorch device: one counter-based generator, Philox4x32-10, so that
// every device draws the same bits for the same seed and offset.
//
// The generator's stream is a sequence of 32-bit words. Word w is word w % 4 of the Philox
// block at counter (w / 4 as 64 bits, 0, 0) under the key (the seed's low word, its high
// word). A draw of n elements starts at the generator's offset (a multiple of 4) and takes
// WORDS words an element: element i reads words offset + i * WORDS onwards. WORDS is 1 when the
// draw computes in f32 or i32 and 2 when it computes in f64 or i64, so one invocation, which
// makes 4 elements, reads WORDS blocks. The host then moves the offset past the words the draw
// read, rounded up to a multiple of 4. The C++ side (random_ops.cpp) keeps the seed and offset
// as CUDA does, and the layout makes a draw's elements independent of how many there are, so a
// shard of a tensor (DTensor's offsets) draws what the whole tensor would at those places.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl lib/int_i32.wgsl random.wgsl | xhal run - -e draw ...

alias E = f32;  // the elements of out's memory (and of p's)
alias F = f32;  // what values are computed in
alias I = i32;  // the integers of draw_integers

// The distributions of `draw`, chosen by OP.
const OP_UNIFORM: u32 = 0u;            // a + (b - a) u, never b
const OP_NORMAL: u32 = 1u;             // a + b n, n standard normal (Box-Muller on pairs)
const OP_BERNOULLI: u32 = 2u;          // 1 with probability a
const OP_BERNOULLI_TENSOR: u32 = 3u;   // 1 with probability p[i]
const OP_EXPONENTIAL: u32 = 4u;        // rate a
const OP_CAUCHY: u32 = 5u;             // median a, scale b
const OP_LOG_NORMAL: u32 = 6u;         // exp(a + b n)
const OP_GEOMETRIC: u32 = 7u;          // trials to the first success, success probability a

override OP: u32 = 0u;
override WORDS: u32 = 1u;  // words an element: 1 (f32, i32), 2 (f64, i64)
// A draw captured in a graph: the seed and the replay's first block are read from
// `graph_state`, which the host writes before each replay, and `block` counts from there.
override FROM_STATE: bool = false;

struct Draw {
  key: vec2<u32>,    // the seed: low word, high word
  block: vec2<u32>,  // the first Philox block: the offset / 4, low word, high word
  count: u32,        // elements drawn
  out_offset: u32,   // first element of out (of ints in draw_integers)
  p_offset: u32,     // first element of p
  pad: u32,
  a: vec2<u32>,      // the first parameter's bits (float_from_bits), or the integers' start
  b: vec2<u32>,      // the second parameter's bits, or the integers' range (0: all 2^32 or 2^64)
}
var<immediate> d: Draw;

// Every entry point's first binding (a small placeholder when FROM_STATE is false): the seed's
// low and high words, then the first block's.
@group(0) @binding(0) var<storage, read> graph_state: array<u32, 4>;
@group(0) @binding(1) var<storage, read_write> out: array<E>;
@group(0) @binding(2) var<storage, read> p: array<E>;              // probabilities, dropout's input
@group(0) @binding(3) var<storage, read_write> mask: array<u32>;   // dropout's mask, 4 bytes a word
// Each of the two entry points below has bindings of its own, which no other one shares (a
// binding two entry points use must be at the same place in their launches).
@group(0) @binding(4) var<storage, read_write> ints: array<I>;         // draw_integers
@group(0) @binding(5) var<storage, read> cumulative: array<E>;         // sample_categories
@group(0) @binding(6) var<storage, read_write> samples: array<u32>;    // sample_categories, int64

// --- Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): ten rounds of two 32x32-bit products, bumping the key by the Weyl constants.

const PHILOX_M0: u32 = 0xD2511F53u;
const PHILOX_M1: u32 = 0xCD9E8D57u;
const PHILOX_W0: u32 = 0x9E3779B9u;
const PHILOX_W1: u32 = 0xBB67AE85u;

// The high word of the 64-bit product a * b, from 16-bit halves (WGSL has no wide product).
// No partial sum overflows: the middle one is at most (2^16 - 1)^2 + 2 (2^16 - 1) < 2^32.
fn mul_hi(a: u32, b: u32) -> u32 {
  let a_lo = a & 0xffffu;
  let a_hi = a >> 16u;
  let b_lo = b & 0xffffu;
  let b_hi = b >> 16u;
  let lo_lo = a_lo * b_lo;
  let hi_lo = a_hi * b_lo;
  let lo_hi = a_lo * b_hi;
  let middle = (lo_lo >> 16u) + (hi_lo & 0xffffu) + lo_hi;
  return a_hi * b_hi + (hi_lo >> 16u) + (middle >> 16u);
}

fn philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
  var c = counter;
  var k = key;
  for (var round = 0u; round < 10u; round = round + 1u) {
    let hi0 = mul_hi(PHILOX_M0, c.x);
    let lo0 = PHILOX_M0 * c.x;
    let hi1 = mul_hi(PHILOX_M1, c.z);
    let lo1 = PHILOX_M1 * c.z;
    c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k = k + vec2<u32>(PHILOX_W0, PHILOX_W1);
  }
  return c;
}

// a + b as 64-bit numbers, low word first.
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn draw_key() -> vec2<u32> {
  if (FROM_STATE) { return vec2<u32>(graph_state[0], graph_state[1]); }
  return d.key;
}

fn first_block() -> vec2<u32> {
  if (FROM_STATE) { return add64(vec2<u32>(graph_state[2], graph_state[3]), d.block); }
  return d.block;
}

// Block `first + step` of the stream.
fn block(first: vec2<u32>, step: u32) -> vec4<u32> {
  let at = add64(first, vec2<u32>(step, 0u));
  return philox(vec4<u32>(at.x, at.y, 0u, 0u), draw_key());
}

// The 4 * WORDS words of invocation t, which makes elements 4t to 4t + 3.
struct Words {
  w: array<u32, 8>,
}

fn words_of(t: u32) -> Words {
  var r: Words;
  let first = block(first_block(), t * WORDS);
  r.w[0] = first.x;
  r.w[1] = first.y;
  r.w[2] = first.z;
  r.w[3] = first.w;
  if (WORDS == 2u) {
    let second = block(first_block(), t * WORDS + 1u);
    r.w[4] = second.x;
    r.w[5] = second.y;
    r.w[6] = second.z;
    r.w[7] = second.w;
  }
  return r;
}

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// A uniform value in [0, 1) from element k's words: the top 24 bits of one word for f32, 53
// bits of two for f64, each a multiple of 2^-24 or 2^-53, so exact in F.
fn unit(r: Words, k: u32) -> F {
  if (WORDS == 1u) {
    return F(r.w[k] >> 8u) * F(5.9604644775390625e-8);
  }
  let lo = r.w[2u * k];
  let hi = r.w[2u * k + 1u];
  return (F(hi >> 11u) * F(4294967296.0) + F(lo)) * F(1.1102230246251565e-16);
}

// The standard normal values of the 4 elements: Box-Muller on the pairs (0, 1) and (2, 3),
// the cosine for the even element and the sine for the odd one. 1 - u is in (0, 1], so the log
// is finite. Each pair's log and square root are computed once.
fn standard_normals(r: Words) -> array<F, 4> {
  var n: array<F, 4>;
  for (var pair = 0u; pair < 4u; pair = pair + 2u) {
    let radius = xsqrt(F(-2) * xlog(F(1) - unit(r, pair)));
    let angle = F(6.283185307179586) * unit(r, pair + 1u);
    n[pair] = radius * xcos(angle);
    n[pair + 1u] = radius * xsin(angle);
  }
  return n;
}

fn parameter_a() -> F { return float_from_bits(d.a.x, d.a.y); }
fn parameter_b() -> F { return float_from_bits(d.b.x, d.b.y); }

fn value(r: Words, normal: F, k: u32, i: u32) -> E {
  let a = parameter_a();
  let b = parameter_b();
  switch (OP) {
    case OP_UNIFORM: {
      // Rounded to E, a value next to b may become b, which the interval excludes.
      let v = E(a + (b - a) * unit(r, k));
      return select(v, E(a), v >= E(b) && b > a);
    }
    case OP_NORMAL: { return E(a + b * normal); }
    case OP_BERNOULLI: { return E(select(F(0), F(1), unit(r, k) < a)); }
    case OP_BERNOULLI_TENSOR: { return E(select(F(0), F(1), unit(r, k) < F(p[d.p_offset + i]))); }
    case OP_EXPONENTIAL: {
      // -log(1 - u) / rate, with 1 - u in (0, 1]: finite and never negative.
      return E(-xlog1p(-unit(r, k)) / a);
    }
    case OP_CAUCHY: { return E(a + b * xtan(F(3.141592653589793) * (unit(r, k) - F(0.5)))); }
    case OP_LOG_NORMAL: { return E(xexp(a + b * normal)); }
    case OP_GEOMETRIC: {
      // The least k >= 1 with (1 - a)^k <= 1 - u: ceil(log(1 - u) / log(1 - a)).
      let trials = ceil(xlog1p(-unit(r, k)) / xlog1p(-a));
      return E(max(trials, F(1)));
    }
    default: { return E(0); }
  }
}

// Each invocation makes 4 elements of out (contiguous from out_offset).
@compute @workgroup_size(64)
fn draw(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  if (t >= (d.count + 3u) / 4u) { return; }
  let r = words_of(t);
  var normals: array<F, 4>;
  if (OP == OP_NORMAL || OP == OP_LOG_NORMAL) { normals = standard_normals(r); }
  for (var k = 0u; k < 4u; k = k + 1u) {
    let i = 4u * t + k;
    if (i < d.count) { out[d.out_offset + i] = value(r, normals[k], k, i); }
  }
}

// Dropout's forward pass: each element of p (the input) kept with probability a = 1 - the
// dropout probability and scaled by b = 1 / a, or zeroed; the mask's bytes say which (1: kept).
// Each invocation writes one whole word of the mask, which starts at a word.
@compute @workgroup_size(64)
fn dropout(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  if (t >= (d.count + 3u) / 4u) { return; }
  let r = words_of(t);
  let keep = parameter_a();
  let scale = parameter_b();
  var kept_bits = 0u;
  for (var k = 0u; k < 4u; k = k + 1u) {
    let i = 4u * t + k;
    if (i < d.count) {
      let kept = unit(r, k) < keep;
      out[d.out_offset + i] = E(select(F(0), F(p[d.p_offset + i]) * scale, kept));
      kept_bits = kept_bits | (select(0u, 1u, kept) << (8u * k));
    }
  }
  mask[t] = kept_bits;
}

// Integers from `start` (a) up to start + range - 1 (range in b; 0 is the whole 2^32 or 2^64),
// as the remainder of one word (i32) or two (i64) by the range.
@compute @workgroup_size(64)
fn draw_integers(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  if (t >= (d.count + 3u) / 4u) { return; }
  let r = words_of(t);
  for (var k = 0u; k < 4u; k = k + 1u) {
    let i = 4u * t + k;
    if (i < d.count) {
      if (WORDS == 1u) {
        ints[d.out_offset + i] = int_from_words(r.w[k], 0u, d.a, d.b);
      } else {
        ints[d.out_offset + i] = int_from_words(r.w[2u * k], r.w[2u * k + 1u], d.a, d.b);
      }
    }
  }
}

// Samples of categorical distributions with replacement: `cumulative` holds each row's sums
// (`categories` of them, the last the row's total), and sample j of row q is the first category
// whose cumulative sum exceeds u times the total, for the uniform u of element q * samples + j.
// The samples are int64, two words each. a: the samples per row (its low word), b: categories.
@compute @workgroup_size(64)
fn sample_categories(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  if (t >= (d.count + 3u) / 4u) { return; }
  let r = words_of(t);
  let per_row = d.a.x;
  let categories = d.b.x;
  for (var k = 0u; k < 4u; k = k + 1u) {
    let i = 4u * t + k;
    if (i < d.count) {
      let row = d.p_offset + (i / per_row) * categories;
      let target_sum = unit(r, k) * F(cumulative[row + categories - 1u]);
      // The first place whose sum is above target_sum; a category of probability 0 has the
      // sum of the one before it, so it is never chosen.
      var low = 0u;
      var high = categories - 1u;
      while (low < high) {
        let middle = (low + high) / 2u;
        if (F(cumulative[row + middle]) > target_sum) { high = middle; } else { low = middle + 1u; }
      }
      samples[2u * (d.out_offset + i)] = low;
      samples[2u * (d.out_offset + i) + 1u] = 0u;
    }
  }
}
