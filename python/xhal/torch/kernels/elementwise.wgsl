// Elementwise operators: out[i] = op(x0, x1, x2) for every element i of the output, the inputs
// broadcast to the output's shape through their strides. This file is the layout: where each
// operand's element is, how it loads, and the entry points. What `op` computes is in one
// operator file, chosen by the type of the result:
//   elementwise_float.wgsl    floating results, computed in F
//   elementwise_integer.wgsl  integer results, computed in I
//   elementwise_logical.wgsl  bool results: comparisons, tests, logic
// and the math of F and I comes from lib/float_<F>.wgsl and lib/int_<I>.wgsl.
//
// Entry points:
//   main           every operand contiguous ("flat"): element i of each is at its offset + i
//   main_runs      the same, an invocation 16 elements (devices slow to start workgroups)
//   strided        any strides, up to 8 dimensions (the `shape` uniform)
//   strided_runs   the same, an invocation a run along the innermost dimension (CPU devices)
//   main_packed    a packed output, several elements to a 32-bit word (bool: four bytes;
//                  bfloat16: two halves): each invocation owns one word of it
//   strided_packed the same, with strided inputs
//
// Run one by itself (README.md); this adds two vectors (OP 1 is OP_ADD, with alpha = 1.0, whose
// f32 bits are 1065353216):
//   cat lib/float_f32.wgsl lib/int_i32.wgsl elementwise.wgsl elementwise_float.wgsl |
//     xhal run - -e main -n 4 -o OP=1 -b out=zeros:4 -b in0=1,2,3,4 -b in1=10,20,30,40 \
//       -b in2=zeros:1 -s numel=4 -s ndim=1 -s pad0=0 -s pad1=0 -s offsets=0,0,0,0 \
//       -s scalars=1065353216,0,0,0 -s constants=0,0,0,0 -s extra=0,0,0,0

// Type parameters: the loader sets each `alias` to the instantiation's type.
alias SO = f32;  // the elements of the output's memory (u32 for packed bool and bfloat16)
alias S0 = f32;  // the elements of each input's memory (u32 for packed bool and bfloat16)
alias S1 = f32;
alias S2 = f32;
alias F = f32;   // what floating operators compute in: f32 (float16 and float32), or f64
alias I = i32;   // what integer operators compute in: i32, or i64

// Value parameters, given when the kernel is loaded.
override OP: u32 = 1u;        // the operator: an OP_ constant of the operator file
override ARITY: u32 = 2u;     // how many inputs the operator reads (0 to 3)
override BYTES: u32 = 0u;     // bit k: input k is bool, a byte an element in 32-bit words
override HALVES: u32 = 0u;    // bit k: input k is bfloat16, a half-word an element
override PACKING: u32 = 4u;   // the packed entry points: 4 (bool bytes) or 2 (bfloat16 halves)
override IN_OUT: u32 = 0u;    // bit k: input k lives in the output's memory; it is read through `out`
override CONSTANT: u32 = 0u;  // bit k: input k is a scalar of the launch, not memory
override FLOATING: u32 = 0u;  // bit k: input k is floating (logical operators test it as F, not I)

struct Params {
  numel: u32,             // elements of the output
  ndim: u32,              // dimensions of `shape` (the strided entry points)
  pad0: u32,
  pad1: u32,
  offsets: vec4<u32>,     // first element of the output and of inputs 0, 1, 2 in their memory
  scalars: vec4<u32>,     // the operator's scalars a (x, y) and b (z, w), as bits of F or I
  constants: vec4<u32>,   // inputs 0 (x, y) and 1 (z, w) where they are scalars
  extra: vec4<u32>,       // input 2 or the operator's scalar c (x, y); two words (z, w)
}
var<immediate> p: Params;

// Sizes and strides, for the strided entry points: dimension d has size sizes[d / 4][d % 4],
// and strides[d] holds its stride in the output and in inputs 0, 1, 2.
struct Shape {
  sizes: array<vec4<u32>, 2>,
  strides: array<vec4<u32>, 8>,
}
// The shape comes last: a launch's arguments are the bindings its entry point uses, and the
// flat entry points use all but it.
@group(0) @binding(0) var<storage, read_write> out: array<SO>;
@group(0) @binding(1) var<storage, read> in0: array<S0>;
@group(0) @binding(2) var<storage, read> in1: array<S1>;
@group(0) @binding(3) var<storage, read> in2: array<S2>;
@group(0) @binding(4) var<uniform> shape: Shape;

fn has(mask: u32, k: u32) -> bool { return ((mask >> k) & 1u) != 0u; }

// Byte `at` of memory read as words: 0 or 1 for a bool.
fn byte_of(word: u32, at: u32) -> u32 { return (word >> ((at % 4u) * 8u)) & 0xffu; }

// The value of half-word `at` of memory read as words, a bfloat16: the high half of an f32.
fn bfloat16_of(word: u32, at: u32) -> f32 { return bitcast<f32>(((word >> ((at % 2u) * 16u)) & 0xffffu) << 16u); }

// The bfloat16 nearest `value` (ties to even), as PyTorch rounds; every NaN becomes 0x7fc0.
fn bfloat16_bits(value: f32) -> u32 {
  let bits = bitcast<u32>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }
  return (bits + 0x7fffu + ((bits >> 16u) & 1u)) >> 16u;
}

// The bits of input k's scalar, when it is one.
fn constant_bits(k: u32) -> vec2<u32> {
  switch k {
    case 0u: { return p.constants.xy; }
    case 1u: { return p.constants.zw; }
    default: { return p.extra.xy; }
  }
}

// Input k's element at `at` (an element of its memory; a byte for bool memory), as F.
fn float_in(k: u32, at: u32) -> F {
  if (has(CONSTANT, k)) {
    let bits = constant_bits(k);
    return float_from_bits(bits.x, bits.y);
  }
  let bytes = has(BYTES, k);
  let halves = has(HALVES, k);
  if (has(IN_OUT, k)) {
    if (bytes) { return F(byte_of(u32(out[at / 4u]), at)); }
    if (halves) { return F(bfloat16_of(u32(out[at / 2u]), at)); }
    return F(out[at]);
  }
  switch k {
    case 0u: {
      if (bytes) { return F(byte_of(u32(in0[at / 4u]), at)); }
      if (halves) { return F(bfloat16_of(u32(in0[at / 2u]), at)); }
      return F(in0[at]);
    }
    case 1u: {
      if (bytes) { return F(byte_of(u32(in1[at / 4u]), at)); }
      if (halves) { return F(bfloat16_of(u32(in1[at / 2u]), at)); }
      return F(in1[at]);
    }
    default: {
      if (bytes) { return F(byte_of(u32(in2[at / 4u]), at)); }
      if (halves) { return F(bfloat16_of(u32(in2[at / 2u]), at)); }
      return F(in2[at]);
    }
  }
}

// The same, as I.
fn int_in(k: u32, at: u32) -> I {
  if (has(CONSTANT, k)) {
    let bits = constant_bits(k);
    return int_from_bits(bits.x, bits.y);
  }
  let bytes = has(BYTES, k);
  let halves = has(HALVES, k);
  if (has(IN_OUT, k)) {
    if (bytes) { return I(byte_of(u32(out[at / 4u]), at)); }
    if (halves) { return I(bfloat16_of(u32(out[at / 2u]), at)); }
    return I(out[at]);
  }
  switch k {
    case 0u: {
      if (bytes) { return I(byte_of(u32(in0[at / 4u]), at)); }
      if (halves) { return I(bfloat16_of(u32(in0[at / 2u]), at)); }
      return I(in0[at]);
    }
    case 1u: {
      if (bytes) { return I(byte_of(u32(in1[at / 4u]), at)); }
      if (halves) { return I(bfloat16_of(u32(in1[at / 2u]), at)); }
      return I(in1[at]);
    }
    default: {
      if (bytes) { return I(byte_of(u32(in2[at / 4u]), at)); }
      if (halves) { return I(bfloat16_of(u32(in2[at / 2u]), at)); }
      return I(in2[at]);
    }
  }
}

// Whether input k's element is not zero (a bool's truth), testing a floating input as F and
// any other as I.
fn truth_in(k: u32, at: u32) -> bool {
  if (has(FLOATING, k)) { return float_in(k, at) != F(0); }
  return int_in(k, at) != I(0);
}

// Dimension `k` from the innermost (k < p.ndim): its size, and its strides in each operand.
fn inner_size(k: u32) -> u32 {
  let d = p.ndim - 1u - k;
  return shape.sizes[d / 4u][d % 4u];
}
fn inner_strides(k: u32) -> vec4<u32> { return shape.strides[p.ndim - 1u - k]; }

// Where element `linear` (row-major in the output's shape) of each operand is. Written out for
// each of the (at most eight) dimensions rather than as a loop: each division is then by a size
// the same in every invocation, which a device may divide by without a division instruction
// (the cpu device keeps its reciprocal), where a loop's would differ from one step to the next.
fn strided_offsets(linear: u32) -> vec4<u32> {
  var at = p.offsets;
  var rest = linear;
  if (p.ndim > 0u) { let size = inner_size(0u); at = at + (rest % size) * inner_strides(0u); rest = rest / size; }
  if (p.ndim > 1u) { let size = inner_size(1u); at = at + (rest % size) * inner_strides(1u); rest = rest / size; }
  if (p.ndim > 2u) { let size = inner_size(2u); at = at + (rest % size) * inner_strides(2u); rest = rest / size; }
  if (p.ndim > 3u) { let size = inner_size(3u); at = at + (rest % size) * inner_strides(3u); rest = rest / size; }
  if (p.ndim > 4u) { let size = inner_size(4u); at = at + (rest % size) * inner_strides(4u); rest = rest / size; }
  if (p.ndim > 5u) { let size = inner_size(5u); at = at + (rest % size) * inner_strides(5u); rest = rest / size; }
  if (p.ndim > 6u) { let size = inner_size(6u); at = at + (rest % size) * inner_strides(6u); rest = rest / size; }
  if (p.ndim > 7u) { let size = inner_size(7u); at = at + (rest % size) * inner_strides(7u); }
  return at;
}

// Workgroups past 65,535 spill into y.
fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 256u; }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = invocation(gid, groups);
  if (i >= p.numel) { return; }
  let at = p.offsets + vec4<u32>(i);
  out[at.x] = element(i, at);
}

// `main` with each invocation FLAT_RUNS elements, a workgroup's 256 a step apart: for devices
// that pay much for each workgroup they start (PoCL, lavapipe), which a tuning pass finds
// (elementwise_ops.cpp). Neighbouring invocations still take neighbouring elements.
override FLAT_RUNS: u32 = 16u;

@compute @workgroup_size(256)
fn main_runs(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) groups: vec3<u32>) {
  let first = (wid.x + wid.y * groups.x) * FLAT_RUNS * 256u;
  for (var run = 0u; run < FLAT_RUNS; run = run + 1u) {
    let i = first + run * 256u + lane;
    if (i < p.numel) {
      let at = p.offsets + vec4<u32>(i);
      out[at.x] = element(i, at);
    }
  }
}

@compute @workgroup_size(256)
fn strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = invocation(gid, groups);
  if (i >= p.numel) { return; }
  let at = strided_offsets(i);
  out[at.x] = element(i, at);
}

// `strided` with each invocation a run of up to RUN_LENGTH elements along the innermost
// dimension (`shape`'s last): the divisions that find an element's operands are paid once a
// run, and each later element is a step of the innermost strides. For devices that run an
// invocation at a time (CPUs), where those divisions are most of a permutation's cost.
override RUN_LENGTH: u32 = 64u;

@compute @workgroup_size(256)
fn strided_runs(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  let last = p.ndim - 1u;
  let inner = shape.sizes[last / 4u][last % 4u];
  let runs_per_row = (inner + RUN_LENGTH - 1u) / RUN_LENGTH;
  if (t >= p.numel / inner * runs_per_row) { return; }
  let start = t % runs_per_row * RUN_LENGTH;
  let first = t / runs_per_row * inner + start;
  let count = min(RUN_LENGTH, inner - start);
  let step = shape.strides[last];
  var at = strided_offsets(first);
  for (var j = 0u; j < count; j = j + 1u) {
    out[at.x] = element(first + j, at);
    at = at + step;
  }
}

// A bool or bfloat16 output is bytes or half-words, which WGSL cannot store one at a time:
// each invocation owns one word of the (contiguous) output and sets the elements of it that the
// tensor covers, so that no two invocations write the same word, and elements beside the
// tensor keep their value.
const NONE: u32 = 0xffffffffu;

// The word invocation t owns, or NONE past the output.
fn packed_word(t: u32) -> u32 {
  let first = p.offsets.x;
  if (t >= (first + p.numel + PACKING - 1u) / PACKING - first / PACKING) { return NONE; }
  return first / PACKING + t;
}

// The output element in slot j of word w, or NONE where the slot is beside the tensor.
fn element_of_slot(w: u32, j: u32) -> u32 {
  let slot = w * PACKING + j;
  if (slot < p.offsets.x || slot - p.offsets.x >= p.numel) { return NONE; }
  return slot - p.offsets.x;
}

// Element i's bits in its slot: 0 or 1 for a bool, the bfloat16 of its value otherwise.
fn packed_element(i: u32, at: vec4<u32>) -> u32 {
  if (PACKING == 4u) { return select(0u, 1u, element_bool(i, at)); }
  return bfloat16_bits(f32(element_float(i, at)));
}

fn with_slot(word: u32, j: u32, bits: u32) -> u32 {
  let width = 32u / PACKING;
  let shift = j * width;
  let mask = ((1u << width) - 1u) << shift;
  return (word & ~mask) | (bits << shift);
}

@compute @workgroup_size(256)
fn main_packed(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = packed_word(invocation(gid, groups));
  if (w == NONE) { return; }
  var word = u32(out[w]);
  for (var j = 0u; j < PACKING; j = j + 1u) {
    let e = element_of_slot(w, j);
    if (e != NONE) { word = with_slot(word, j, packed_element(e, p.offsets + vec4<u32>(e))); }
  }
  out[w] = SO(word);
}

@compute @workgroup_size(256)
fn strided_packed(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = packed_word(invocation(gid, groups));
  if (w == NONE) { return; }
  var word = u32(out[w]);
  for (var j = 0u; j < PACKING; j = j + 1u) {
    let e = element_of_slot(w, j);
    if (e != NONE) { word = with_slot(word, j, packed_element(e, strided_offsets(e))); }
  }
  out[w] = SO(word);
}
