// Sorting along one dimension of a contiguous tensor (sort, argsort, topk, msort), by rank:
// one invocation per element counts the elements of its row that come before it, which is its
// place. Ties keep their order (a stable sort), and a NaN comes after every number (before, in
// descending order), as in PyTorch. Rows are `length` elements `inner` apart, as in scan.wgsl.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl sort.wgsl | xhal run - -e sort ...

alias E = f32;  // the elements of the data's memory
alias F = f32;  // the floating type that tells a NaN

override DESCENDING: bool = false;

struct Rows {
  rows: u32,
  length: u32,
  inner: u32,
  keep: u32,   // places written: the row's length, or topk's k
}
var<immediate> r: Rows;

@group(0) @binding(0) var<storage, read> input: array<E>;
@group(0) @binding(1) var<storage, read_write> values: array<E>;    // rows of `keep` places
@group(0) @binding(2) var<storage, read_write> indices: array<u32>; // int64, two words an element

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// Whether a (at index i) comes before b (at index j).
fn before(a: E, i: u32, b: E, j: u32) -> bool {
  let a_nan = is_nan(F(a));
  let b_nan = is_nan(F(b));
  var first = false;
  var equal = false;
  if (a_nan || b_nan) {
    equal = a_nan && b_nan;
    first = select(b_nan, a_nan, DESCENDING) && !equal;
  } else {
    equal = a == b;
    if (DESCENDING) { first = a > b; } else { first = a < b; }
  }
  return first || (equal && i < j);
}

@compute @workgroup_size(64)
fn sort(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= r.rows * r.length) { return; }
  let row = e / r.length;
  let j = e % r.length;
  let base = (row / r.inner) * r.length * r.inner + row % r.inner;
  let x = input[base + j * r.inner];
  var rank = 0u;
  for (var k = 0u; k < r.length; k = k + 1u) {
    if (k != j && before(input[base + k * r.inner], k, x, j)) { rank = rank + 1u; }
  }
  if (rank >= r.keep) { return; }
  let at = (row / r.inner) * r.keep * r.inner + row % r.inner + rank * r.inner;
  values[at] = x;
  indices[2u * at] = j;
  indices[2u * at + 1u] = 0u;
}
