// Scans and compactions. A scan (cumsum, cumprod, cummax, cummin, logcumsumexp) runs along one
// dimension of a contiguous tensor, one invocation a row: row r has `length` elements `inner`
// apart, from (r / inner) * length * inner + r % inner. Values accumulate in V (f64 for float32
// where the device has it, as PyTorch's CPU accumulates in double; i64 for integers).
// Compactions gather the elements a mask keeps into consecutive places, each at the place a
// prior inclusive scan of the mask gave it, so no two invocations write one place.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl scan.wgsl | xhal run - -e scan ...

alias SI = f32;  // the elements of the input's memory
alias SO = f32;  // the elements of the output's memory
alias V = f32;   // what the scan accumulates in
alias F = f32;   // the floating type that tells a NaN (and computes logcumsumexp)

override OP: u32 = 0u;  // an OP_ constant

const OP_SUM: u32 = 0u;
const OP_PROD: u32 = 1u;
const OP_MAX: u32 = 2u;         // with the index of the running maximum
const OP_MIN: u32 = 3u;
const OP_LOGSUMEXP: u32 = 4u;

struct Rows {
  rows: u32,
  length: u32,
  inner: u32,
  ndim: u32,                      // compactions: dimensions of the input
  sizes: array<vec4<u32>, 2>,     // compactions: the input's sizes
}
@group(0) @binding(0) var<uniform> r: Rows;
@group(0) @binding(1) var<storage, read_write> out: array<SO>;
@group(0) @binding(2) var<storage, read> input: array<SI>;  // compact_coordinates: the mask, as int32
@group(0) @binding(3) var<storage, read_write> indices: array<u32>;  // int64, two words an element
// Compactions: the inclusive scan of the mask (int64), and the mask as int32.
@group(0) @binding(3) var<storage, read> places: array<u32>;
@group(0) @binding(4) var<storage, read> keep: array<u32>;

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// Whether x replaces the running extremum y (a NaN does, and then stays).
fn replaces(x: V, y: V) -> bool {
  let x_nan = is_nan(F(x));
  if (is_nan(F(y))) { return false; }
  if (x_nan) { return true; }
  if (OP == OP_MAX) { return x >= y; }
  return x <= y;
}

@compute @workgroup_size(64)
fn scan(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let row = invocation(gid, groups);
  if (row >= r.rows) { return; }
  let base = (row / r.inner) * r.length * r.inner + row % r.inner;
  var running = V(0);
  var best_at = 0u;
  for (var j = 0u; j < r.length; j = j + 1u) {
    let at = base + j * r.inner;
    let x = V(input[at]);
    if (j == 0u) {
      running = x;
    } else {
      switch OP {
        case OP_SUM: { running = running + x; }
        case OP_PROD: { running = running * x; }
        case OP_LOGSUMEXP: {
          // log(e^a + e^b) from the larger: exact where one dominates, and -inf stays.
          let a = F(running);
          let b = F(x);
          let high = max(a, b);
          let low = min(a, b);
          if (is_inf(high) && high < F(0)) {
            running = V(high);
          } else if (is_nan(a) || is_nan(b)) {
            running = V(a + b);
          } else {
            running = V(high + xlog1p(xexp(low - high)));
          }
        }
        default: {
          if (replaces(x, running)) {
            running = x;
            best_at = j;
          }
        }
      }
    }
    out[at] = SO(running);
    if (OP == OP_MAX || OP == OP_MIN) {
      indices[2u * at] = best_at;
      indices[2u * at + 1u] = 0u;
    }
  }
}

// masked_select: element e of the (broadcast, contiguous) input lands at its place in the mask's scan.
@compute @workgroup_size(64)
fn compact_values(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= r.length) { return; }
  if (keep[e] == 0u) { return; }
  out[places[2u * e] - 1u] = SO(input[e]);
}

// nonzero: element e's coordinates land in row (its place - 1) of an [n, ndim] output (SO: i64);
// the mask is the input.
@compute @workgroup_size(64)
fn compact_coordinates(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= r.length) { return; }
  if (u32(input[e]) == 0u) { return; }
  let row = places[2u * e] - 1u;
  var rest = e;
  for (var k = 0u; k < r.ndim; k = k + 1u) {
    let d = r.ndim - 1u - k;
    let size = r.sizes[d / 4u][d % 4u];
    out[row * r.ndim + d] = SO(rest % size);
    rest = rest / size;
  }
}
