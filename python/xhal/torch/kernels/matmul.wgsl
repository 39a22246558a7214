// Matrix products: out[b] = alpha a[b] b[b] (+ beta bias[b]) for a batch of matrices of any
// strides (a stride of 0 broadcasts), accumulated in F: f32 for float16 and float32 (as
// PyTorch's CPU does), f64 for float64. One invocation per output element.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl matmul.wgsl | xhal run - ...

alias E = f32;  // the elements of the operands' memory
alias F = f32;  // what products accumulate in

override HAS_BIAS: bool = false;

struct Product {
  batch: u32,
  m: u32,
  n: u32,
  k: u32,
  offsets: vec4<u32>,       // first element of a, b, bias and out
  a_strides: vec4<u32>,     // batch, row, column
  b_strides: vec4<u32>,
  bias_strides: vec4<u32>,
  scalars: vec4<u32>,       // alpha (x, y) and beta (z, w), as bits of F
}
var<immediate> q: Product;

@group(0) @binding(0) var<storage, read> a: array<E>;
@group(0) @binding(1) var<storage, read> b: array<E>;
@group(0) @binding(2) var<storage, read> bias: array<E>;
@group(0) @binding(3) var<storage, read_write> out: array<E>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.x + gid.y * groups.x * 64u;
  if (i >= q.batch * q.m * q.n) { return; }
  let column = i % q.n;
  let row = (i / q.n) % q.m;
  let matrix = i / (q.n * q.m);
  var a_at = q.offsets.x + matrix * q.a_strides.x + row * q.a_strides.y;
  var b_at = q.offsets.y + matrix * q.b_strides.x + column * q.b_strides.z;
  // Four partial sums, so that long products lose less to rounding.
  var partial = vec4<F>(F(0));
  for (var kk = 0u; kk < q.k; kk = kk + 1u) {
    partial[kk % 4u] = partial[kk % 4u] + F(a[a_at]) * F(b[b_at]);
    a_at = a_at + q.a_strides.z;
    b_at = b_at + q.b_strides.y;
  }
  var value = float_from_bits(q.scalars.x, q.scalars.y) * ((partial.x + partial.y) + (partial.z + partial.w));
  if (HAS_BIAS) {
    let at = q.offsets.z + matrix * q.bias_strides.x + row * q.bias_strides.y + column * q.bias_strides.z;
    value = value + float_from_bits(q.scalars.z, q.scalars.w) * F(bias[at]);
  }
  out[q.offsets.w + i] = E(value);
}
