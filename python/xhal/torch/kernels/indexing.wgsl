// Indexing: gathers and scatters by index tensors. Indices are int64 (two words an element,
// the low one first) or int32; the C++ side checks on the host that each is in range, and
// wraps negative ones, before a kernel trusts them.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl indexing.wgsl | xhal run - -e index_select ...

alias E = f32;  // the elements of the data's memory
alias F = f32;  // what sums are computed in
alias V = f32;  // what scatters combine values in: F for floats, i32 or i64 for integers

override WIDE_INDEX: bool = true;  // int64 indices (false: int32)

struct Gather {
  outer: u32,         // the data is [outer, size, inner], contiguous
  size: u32,
  inner: u32,
  count: u32,         // indices
  data_offset: u32,
  index_offset: u32,  // in index elements
  out_offset: u32,
  padding: u32,       // embedding's padding row (0xffffffff: none)
}
var<immediate> q: Gather;

@group(0) @binding(0) var<storage, read> data: array<E>;
@group(0) @binding(1) var<storage, read> index: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<E>;

fn index_at(i: u32) -> u32 {
  if (WIDE_INDEX) { return index[2u * (q.index_offset + i)]; }
  return index[q.index_offset + i];
}

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// out[o, i, j] = data[o, index[i], j]: index_select along the middle dimension.
@compute @workgroup_size(64)
fn index_select(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= q.outer * q.count * q.inner) { return; }
  let j = e % q.inner;
  let i = (e / q.inner) % q.count;
  let o = e / (q.inner * q.count);
  out[q.out_offset + e] = data[q.data_offset + (o * q.size + index_at(i)) * q.inner + j];
}

// The embedding's gradient: row r of out (size rows of inner) sums the gradient rows (data:
// count rows of inner) whose index is r. One invocation per weight element, looping over the
// indices: no atomics, and the same order of additions on every device.
@compute @workgroup_size(64)
fn embedding_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= q.size * q.inner) { return; }
  let row = e / q.inner;
  let j = e % q.inner;
  var sum = F(0);
  if (row != q.padding) {
    for (var i = 0u; i < q.count; i = i + 1u) {
      if (index_at(i) == row) { sum = sum + F(data[q.data_offset + i * q.inner + j]); }
    }
  }
  out[q.out_offset + e] = E(sum);
}

// The embedding's gradient from the indices sorted stably (`sorted` in `index`, the sort's
// order in `sorted_order`, int64): row r sums the gradient rows of its run of the sorted
// indices, found by binary search, in ascending position (as the loop above sums them), so
// each element costs its own rows and a search rather than a look at every index. Launched as
// ceil(inner / 64) x rows workgroups (rows past 65,535 in z).
@group(0) @binding(3) var<storage, read> sorted_order: array<u32>;

// Whether sorted index i comes before row `row`, comparing them as the sort did (signed).
fn sorted_before(i: u32, row: u32) -> bool {
  if (WIDE_INDEX) {
    let high = bitcast<i32>(index[2u * (q.index_offset + i) + 1u]);
    if (high != 0) { return high < 0; }
  } else if (bitcast<i32>(index_at(i)) < 0) {
    return true;
  }
  return index_at(i) < row;
}

fn sorted_is(i: u32, row: u32) -> bool {
  if (WIDE_INDEX && index[2u * (q.index_offset + i) + 1u] != 0u) { return false; }
  return index_at(i) == row;
}

@compute @workgroup_size(64)
fn embedding_backward_sorted(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let j = gid.x;
  let row = gid.y + gid.z * groups.y;
  if (j >= q.inner || row >= q.size) { return; }
  var sum = F(0);
  if (row != q.padding) {
    var low = 0u;
    var high = q.count;
    while (low < high) {
      let middle = low + (high - low) / 2u;
      if (sorted_before(middle, row)) { low = middle + 1u; } else { high = middle; }
    }
    for (var i = low; i < q.count; i = i + 1u) {
      if (!sorted_is(i, row)) { break; }
      sum = sum + F(data[q.data_offset + sorted_order[2u * i] * q.inner + j]);
    }
  }
  out[q.out_offset + row * q.inner + j] = E(sum);
}

// --- gather, scatter and index_add along one dimension -------------------------------------
//
// These walk the output element by element in row-major order of `shape.sizes`; each
// operand's element is its coordinates times its strides (`shape.strides[d]`: output, data,
// index, source), from its offset. The coordinate along `shape.dim` of the data (gather) or
// of the index and source (scatter) is the index's value, or the loop's.

override REDUCE: u32 = 0u;        // a REDUCE_ constant (scatter)
override HAS_ALPHA: bool = false;  // index_add's factor is not 1
override INTEGER_VALUES: bool = false;  // V is an integer type: a mean rounds down

const REDUCE_ASSIGN: u32 = 0u;  // the last element written wins
const REDUCE_SUM: u32 = 1u;
const REDUCE_PROD: u32 = 2u;
const REDUCE_MEAN: u32 = 3u;
const REDUCE_MAX: u32 = 4u;
const REDUCE_MIN: u32 = 5u;

struct Along {
  ndim: u32,
  dim: u32,
  numel: u32,             // output elements
  count: u32,             // scatter: the index's size along dim
  include_self: u32,      // scatter: the output's own value takes part
  pad0: u32,
  alpha: vec2<u32>,       // index_add's factor, bits of F
  sizes: array<vec4<u32>, 2>,        // the output's
  index_sizes: array<vec4<u32>, 2>,  // scatter: the index's (and the source's)
  strides: array<vec4<u32>, 8>,      // output, data, index, source, per dimension
  offsets: vec4<u32>,
}
@group(0) @binding(0) var<uniform> along: Along;
@group(0) @binding(1) var<storage, read> along_data: array<E>;
@group(0) @binding(2) var<storage, read> along_index: array<u32>;  // int64 or int32 (WIDE_INDEX)
@group(0) @binding(3) var<storage, read_write> along_out: array<E>;
@group(0) @binding(4) var<storage, read> along_source: array<E>;

fn along_index_at(at: u32) -> u32 {
  if (WIDE_INDEX) { return along_index[2u * at]; }
  return along_index[at];
}

fn size_of(sizes: array<vec4<u32>, 2>, d: u32) -> u32 { return sizes[d / 4u][d % 4u]; }

// Row-major coordinates of `linear` in the output, as offsets into each operand; the
// coordinate along `dim` goes into w (as a coordinate, not an offset).
struct Place {
  offsets: vec4<u32>,  // output, data, index, source, without their `dim` coordinate
  coordinate: u32,     // the coordinate along `dim`
  outside: bool,       // scatter: past the index's shape in a dimension other than `dim`
}

fn place_of(linear: u32) -> Place {
  var rest = linear;
  var at = along.offsets;
  var coordinate = 0u;
  var outside = false;
  for (var k = 0u; k < along.ndim; k = k + 1u) {
    let d = along.ndim - 1u - k;
    let size = size_of(along.sizes, d);
    let c = rest % size;
    rest = rest / size;
    if (d == along.dim) {
      coordinate = c;
      at.x = at.x + c * along.strides[d].x;
    } else {
      at = at + c * along.strides[d];
      outside = outside || c >= size_of(along.index_sizes, d);
    }
  }
  return Place(at, coordinate, outside);
}

// out[p] = data[p with its dim coordinate index[p]]: torch.gather, over the index's shape.
@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= along.numel) { return; }
  let p = place_of(e);
  let index_at = p.offsets.z + p.coordinate * along.strides[along.dim].z;
  let data_at = p.offsets.y + along_index_at(index_at) * along.strides[along.dim].y;
  along_out[p.offsets.x] = along_data[data_at];
}

fn combine(reduce: u32, a: V, b: V) -> V {
  switch reduce {
    case REDUCE_SUM, REDUCE_MEAN: { return a + b; }
    case REDUCE_PROD: { return a * b; }
    case REDUCE_MAX: { return select(max(a, b), a + b, is_nan(F(a)) || is_nan(F(b))); }
    case REDUCE_MIN: { return select(min(a, b), a + b, is_nan(F(a)) || is_nan(F(b))); }
    default: { return b; }
  }
}

// Output element o (of the data's shape) gathers what the index scatters into it: each
// element along `dim` of the index (and source) whose index is o's coordinate, in order, so
// the last one wins an assignment and sums have one order. index_add is this with a
// one-dimensional index broadcast over the other dimensions, and a factor.
@compute @workgroup_size(64)
fn scatter(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= along.numel) { return; }
  let p = place_of(e);
  let data_at = p.offsets.y + p.coordinate * along.strides[along.dim].y;
  var value = V(along_data[data_at]);
  var count = 0u;
  var seen = along.include_self != 0u;
  if (!p.outside) {
    let alpha = float_from_bits(along.alpha.x, along.alpha.y);
    for (var i = 0u; i < along.count; i = i + 1u) {
      if (along_index_at(p.offsets.z + i * along.strides[along.dim].z) != p.coordinate) { continue; }
      var source = V(along_source[p.offsets.w + i * along.strides[along.dim].w]);
      if (HAS_ALPHA) { source = V(alpha * F(source)); }
      if (seen) { value = combine(REDUCE, value, source); } else { value = source; }
      seen = true;
      count = count + 1u;
    }
  }
  if (REDUCE == REDUCE_MEAN && count > 0u) {
    let divisor = V(count + select(0u, 1u, along.include_self != 0u));
    var mean = value / divisor;
    // Integer division truncates; PyTorch's integer mean is the floor.
    if (INTEGER_VALUES && value < V(0) && mean * divisor != value) { mean = mean - V(1); }
    value = mean;
  }
  along_out[p.offsets.x] = E(value);
}

// --- Advanced indexing: x[i0, i1, i2] and x[i0, i1, i2] = v ---------------------------------
//
// As PyTorch lays it out: the indexed data is restrided so that its indexed dimensions have
// stride 0 and the index tensors' broadcast shape takes their place; the index tensors are
// expanded to the result's shape. Element e of the result is then at the restrided data's
// offset plus each index's value times its dimension's stride. Indices may be negative (from
// the end); the C++ side checks that each is within its dimension.

struct Advanced {
  ndim: u32,
  numel: u32,             // elements of the result
  indices: u32,           // index tensors, 1 to 3
  target_numel: u32,      // index_put with accumulation: elements of the data
  sizes: array<vec4<u32>, 2>,    // the result's
  strides: array<vec4<u32>, 8>,  // per dimension: the restrided data's, and each index's
  value_strides: array<vec4<u32>, 2>,  // index_put: the values', broadcast to the result
  indexed_strides: vec4<u32>,    // each indexed dimension's stride in the data
  indexed_sizes: vec4<u32>,      // and its size
  offsets: vec4<u32>,            // the data's and each index's first element
  value_offset: u32,
  out_offset: u32,
  target_ndim: u32,              // index_put with accumulation: the data's own shape
  pad: u32,
  target_sizes: array<vec4<u32>, 2>,
  target_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> adv: Advanced;
@group(0) @binding(1) var<storage, read> adv_data: array<E>;
@group(0) @binding(2) var<storage, read_write> adv_out: array<E>;
@group(0) @binding(3) var<storage, read> adv_index0: array<u32>;  // int64, two words an element
@group(0) @binding(4) var<storage, read> adv_index1: array<u32>;
@group(0) @binding(5) var<storage, read> adv_index2: array<u32>;
// index_put: the data is written, and the values read.
@group(0) @binding(1) var<storage, read_write> put_data: array<E>;
@group(0) @binding(2) var<storage, read> put_values: array<E>;

fn vector_of(v: array<vec4<u32>, 2>, d: u32) -> u32 { return v[d / 4u][d % 4u]; }

// Index k's value at `at`, wrapped from the end when negative, times its dimension's stride.
fn indexed_offset(k: u32, at: u32) -> u32 {
  var word = 0u;
  switch k {
    case 0u: { word = adv_index0[2u * at]; }
    case 1u: { word = adv_index1[2u * at]; }
    default: { word = adv_index2[2u * at]; }
  }
  var value = bitcast<i32>(word);
  if (value < 0) { value = value + i32(adv.indexed_sizes[k]); }
  return u32(value) * adv.indexed_strides[k];
}

// Where result element e reads (or index_put writes) in the data, and where its values are.
fn advanced_place(e: u32) -> vec2<u32> {
  var rest = e;
  var at = adv.offsets;
  var value_at = adv.value_offset;
  for (var k = 0u; k < adv.ndim; k = k + 1u) {
    let d = adv.ndim - 1u - k;
    let c = rest % vector_of(adv.sizes, d);
    rest = rest / vector_of(adv.sizes, d);
    at = at + c * adv.strides[d];
    value_at = value_at + c * vector_of(adv.value_strides, d);
  }
  var destination = at.x;
  for (var k = 0u; k < adv.indices; k = k + 1u) { destination = destination + indexed_offset(k, at[k + 1u]); }
  return vec2<u32>(destination, value_at);
}

@compute @workgroup_size(64)
fn index_gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= adv.numel) { return; }
  adv_out[adv.out_offset + e] = adv_data[advanced_place(e).x];
}

// index_put without accumulation: where two index positions name one element, which value
// lands is left open, as in PyTorch.
@compute @workgroup_size(64)
fn index_put(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  if (e >= adv.numel) { return; }
  let place = advanced_place(e);
  put_data[place.x] = put_values[place.y];
}

// index_put with accumulation: data element t (row-major in the data's shape) adds every
// value whose index positions name it, in the result's order, so sums have one order.
@compute @workgroup_size(64)
fn index_accumulate(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let t = invocation(gid, groups);
  if (t >= adv.target_numel) { return; }
  var rest = t;
  var here = 0u;
  for (var k = 0u; k < adv.target_ndim; k = k + 1u) {
    let d = adv.target_ndim - 1u - k;
    here = here + (rest % vector_of(adv.target_sizes, d)) * vector_of(adv.target_strides, d);
    rest = rest / vector_of(adv.target_sizes, d);
  }
  here = here + adv.offsets.x;
  var sum = V(put_data[here]);
  for (var e = 0u; e < adv.numel; e = e + 1u) {
    let place = advanced_place(e);
    if (place.x == here) { sum = sum + V(put_values[place.y]); }
  }
  put_data[here] = E(sum);
}
