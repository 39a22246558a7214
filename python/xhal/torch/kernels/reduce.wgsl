// Reductions: each output element combines the input elements that the reduced dimensions
// span: sums, products, means, maxima and minima (with the index of the first one), and the
// truth tests all and any. Max and min keep a NaN, as PyTorch's do.
//
// Entry points:
//   rows    one invocation per output element, for short reductions
//   groups  one workgroup of 256 per output element, each invocation reducing a stride of the
//           elements before the workgroup combines them as a tree, for long ones
//   split   the first of two stages for a few very long reductions: workgroup (p, o) reduces
//           part p (`part` elements) of output element o into partials[o * parts + p], so that
//           every core or compute unit takes a share of one output's elements
//   merge   the second: one workgroup per output element combines its parts
//
// Run one by itself (README.md): cat lib/float_f32.wgsl reduce.wgsl | xhal run - ...

alias SI = f32;  // the elements of the input's memory (u32 for bool bytes)
alias SO = f32;  // the elements of the output's memory
alias A = f32;   // what the reduction accumulates in: f32 or f64 for floats, i32 or i64 for integers, u32 for truth
alias F = f32;   // the floating type that tells a NaN (f64 where A is)

override OP: u32 = 0u;          // an OP_ constant
override BYTES: bool = false;   // the input is bool, a byte an element in 32-bit words
override VALUES: bool = true;   // whether `output` is written
override INDICES: bool = false; // whether `indices` (int64, two words an element) is written
override ADJACENT: bool = false; // split: a sum whose elements run with stride 1 in every output
override RUNS: bool = false;     // groups: a sum over two dimensions, the inner one of stride 1 (a
                                 // convolution's bias gradient: samples, then positions)

const OP_SUM: u32 = 0u;
const OP_MEAN: u32 = 1u;
const OP_PROD: u32 = 2u;
const OP_MAX: u32 = 3u;
const OP_MIN: u32 = 4u;
const OP_ALL: u32 = 5u;         // of the truth of each element, as 0 and 1
const OP_ANY: u32 = 6u;

// Output element o reduces the elements at input_offset + its kept coordinates times their
// strides + each reduced coordinate times its stride; dimension d of each kind has size
// sizes[d / 4][d % 4].
struct Layout {
  numel: u32,            // output elements
  kept: u32,             // kept dimensions
  reduced: u32,          // reduced dimensions
  count: u32,            // elements reduced into each output
  input_offset: u32,
  output_offset: u32,
  indices_offset: u32,
  part: u32,             // elements of each part (split), or parts of each output (merge)
  kept_sizes: array<vec4<u32>, 2>,
  kept_strides: array<vec4<u32>, 2>,
  reduced_sizes: array<vec4<u32>, 2>,
  reduced_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> shape: Layout;
@group(0) @binding(1) var<storage, read> input: array<SI>;
@group(0) @binding(2) var<storage, read_write> output: array<SO>;
@group(0) @binding(3) var<storage, read_write> indices: array<u32>;
// The parts' states, for split and merge: output element o's part p is at o * parts + p.
@group(0) @binding(4) var<storage, read_write> partial_values: array<A>;
@group(0) @binding(5) var<storage, read_write> partial_indices: array<u32>;

const EMPTY: u32 = 0xffffffffu;  // the index of a state that has seen no element

// What a reduction has seen so far: its value and, for max and min, where that value was.
struct State {
  value: A,
  index: u32,
}

fn load(at: u32) -> A {
  if (BYTES) { return A((u32(input[at / 4u]) >> ((at % 4u) * 8u)) & 0xffu); }
  if (OP == OP_ALL || OP == OP_ANY) {
    let v = F(input[at]);
    return select(A(0), A(1), v != F(0) || is_nan(v));
  }
  return A(input[at]);
}

fn first_element(o: u32) -> u32 {
  var rest = o;
  var at = shape.input_offset;
  for (var k = 0u; k < shape.kept; k = k + 1u) {
    let d = shape.kept - 1u - k;
    let size = shape.kept_sizes[d / 4u][d % 4u];
    at = at + (rest % size) * shape.kept_strides[d / 4u][d % 4u];
    rest = rest / size;
  }
  return at;
}

// Where reduced element j of the output whose first element is at `base` is.
fn element(base: u32, j: u32) -> u32 {
  if (shape.reduced == 1u) { return base + j * shape.reduced_strides[0].x; }
  var rest = j;
  var at = base;
  for (var k = 0u; k < shape.reduced; k = k + 1u) {
    let d = shape.reduced - 1u - k;
    let size = shape.reduced_sizes[d / 4u][d % 4u];
    at = at + (rest % size) * shape.reduced_strides[d / 4u][d % 4u];
    rest = rest / size;
  }
  return at;
}

// Whether value x beats y for max (`larger`) or min: a NaN beats any number.
fn beats(x: A, y: A, larger: bool) -> bool {
  let x_nan = is_nan(F(x));
  let y_nan = is_nan(F(y));
  if (x_nan || y_nan) { return x_nan && !y_nan; }
  if (larger) { return x > y; }
  return x < y;
}

fn same(x: A, y: A) -> bool {
  let x_nan = is_nan(F(x));
  let y_nan = is_nan(F(y));
  return (x_nan && y_nan) || (!x_nan && !y_nan && x == y);
}

// Combines two states; of equal maxima (minima), the first index wins, as in PyTorch.
fn combine(a: State, b: State) -> State {
  if (a.index == EMPTY) { return b; }
  if (b.index == EMPTY) { return a; }
  switch OP {
    case OP_SUM, OP_MEAN: { return State(a.value + b.value, a.index); }
    case OP_PROD: { return State(a.value * b.value, a.index); }
    case OP_ALL: { return State(min(a.value, b.value), a.index); }
    case OP_ANY: { return State(max(a.value, b.value), a.index); }
    default: {
      let larger = OP == OP_MAX;
      if (beats(b.value, a.value, larger) || (same(b.value, a.value) && b.index < a.index)) { return b; }
      return a;
    }
  }
}

fn finish(o: u32, state: State) {
  var value = state.value;
  if (OP == OP_MEAN) { value = value / A(shape.count); }
  if (VALUES) { output[shape.output_offset + o] = SO(value); }
  if (INDICES) {
    indices[2u * (shape.indices_offset + o)] = state.index;
    indices[2u * (shape.indices_offset + o) + 1u] = 0u;
  }
}

@compute @workgroup_size(64)
fn rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let o = gid.x + gid.y * groups.x * 64u;
  if (o >= shape.numel) { return; }
  let base = first_element(o);
  if (OP == OP_SUM || OP == OP_MEAN) {
    // Four partial sums, element j in sum j % 4, so that long rows lose less to rounding;
    // four elements a step, each sum a variable of its own (a vector indexed by j % 4 costs
    // a CPU a bounds check and a select on every element).
    var sum0 = A(0);
    var sum1 = A(0);
    var sum2 = A(0);
    var sum3 = A(0);
    let whole = shape.count / 4u * 4u;
    for (var j = 0u; j < whole; j = j + 4u) {
      sum0 = sum0 + load(element(base, j));
      sum1 = sum1 + load(element(base, j + 1u));
      sum2 = sum2 + load(element(base, j + 2u));
      sum3 = sum3 + load(element(base, j + 3u));
    }
    let rest = shape.count - whole;
    if (rest > 0u) { sum0 = sum0 + load(element(base, whole)); }
    if (rest > 1u) { sum1 = sum1 + load(element(base, whole + 1u)); }
    if (rest > 2u) { sum2 = sum2 + load(element(base, whole + 2u)); }
    finish(o, State((sum0 + sum1) + (sum2 + sum3), 0u));
    return;
  }
  var state = State(A(0), EMPTY);
  for (var j = 0u; j < shape.count; j = j + 1u) {
    state = combine(state, State(load(element(base, j)), j));
  }
  finish(o, state);
}

var<workgroup> shared_values: array<A, 256>;
var<workgroup> shared_indices: array<u32, 256>;

var<workgroup> group_sums: array<A, 16>;

// The 256 lanes' states combined in an order that is the same on every backend; lane 0 gets
// the whole (the callers read it there). Sums add 16 groups of 16 lanes and then the 16 group
// sums, with two barriers: a tree's eight steps cost eight barriers, each a loop over the
// invocations on a device that runs them one after another (the cpu device). Lanes fill from
// the first, so a sum's first lane has seen an element whenever any has.
fn workgroup_combine(lane: u32, state: State) -> State {
  if (OP == OP_SUM || OP == OP_MEAN) {
    shared_values[lane] = select(A(0), state.value, state.index != EMPTY);
    workgroupBarrier();
    if (lane < 16u) {
      var sum = A(0);
      for (var i = 0u; i < 16u; i = i + 1u) { sum = sum + shared_values[lane * 16u + i]; }
      group_sums[lane] = sum;
    }
    workgroupBarrier();
    var total = A(0);
    if (lane == 0u) {
      for (var i = 0u; i < 16u; i = i + 1u) { total = total + group_sums[i]; }
    }
    return State(total, state.index);
  }
  shared_values[lane] = state.value;
  shared_indices[lane] = state.index;
  workgroupBarrier();
  for (var width = 128u; width > 0u; width = width / 2u) {
    if (lane < width) {
      let merged = combine(State(shared_values[lane], shared_indices[lane]),
                           State(shared_values[lane + width], shared_indices[lane + width]));
      shared_values[lane] = merged.value;
      shared_indices[lane] = merged.index;
    }
    workgroupBarrier();
  }
  return State(shared_values[0], shared_indices[0]);
}

@compute @workgroup_size(256)
fn groups(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) count: vec3<u32>,
          @builtin(local_invocation_index) lane: u32) {
  let o = wid.x + wid.y * count.x;
  if (o >= shape.numel) { return; }
  let base = first_element(o);
  var state = State(A(0), EMPTY);
  if (RUNS) {
    // Run by run of the inner dimension, the invocations along it: neighbours read
    // neighbouring elements, and no element costs a division.
    let runs = shape.reduced_sizes[0].x;
    let run_stride = shape.reduced_strides[0].x;
    let inner = shape.reduced_sizes[0].y;
    var total = A(0);
    for (var run = 0u; run < runs; run = run + 1u) {
      let first = base + run * run_stride;
      for (var start = 0u; start < inner; start = start + 256u) {
        let j = start + lane;
        if (j < inner) { total = total + load(first + j); }
      }
    }
    if (lane < inner && runs > 0u) { state = State(total, lane); }
  } else {
    for (var j = lane; j < shape.count; j = j + 256u) {
      state = combine(state, State(load(element(base, j)), j));
    }
  }
  let total = workgroup_combine(lane, state);
  if (lane == 0u) { finish(o, total); }
}

@compute @workgroup_size(256)
fn split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) count: vec3<u32>,
         @builtin(local_invocation_index) lane: u32) {
  // Every entry point's bindings are 0 to 3 first, so that each sits at the same argument.
  _ = &output;
  _ = &indices;
  let part = wid.x;
  let o = wid.y;
  let base = first_element(o);
  let start = part * shape.part;
  let end = min(shape.count, start + shape.part);
  var state = State(A(0), EMPTY);
  if (ADJACENT) {
    // Sixteen elements a step in each invocation, 256 apart, so that neighbouring invocations
    // read neighbouring elements (coalesced on a GPU, vector loads on the cpu device, which
    // runs these steps across the invocations) and each step's fixed cost is shared by many.
    // The elements past the last whole step, 256 at a time.
    let first = base + start;
    let count = end - start;
    let whole = count / 4096u * 4096u;
    var total = A(0);
    for (var step = 0u; step < whole; step = step + 4096u) {
      let k = first + step + lane;
      let quarter0 = (A(input[k]) + A(input[k + 256u])) + (A(input[k + 512u]) + A(input[k + 768u]));
      let quarter1 = (A(input[k + 1024u]) + A(input[k + 1280u])) + (A(input[k + 1536u]) + A(input[k + 1792u]));
      let quarter2 = (A(input[k + 2048u]) + A(input[k + 2304u])) + (A(input[k + 2560u]) + A(input[k + 2816u]));
      let quarter3 = (A(input[k + 3072u]) + A(input[k + 3328u])) + (A(input[k + 3584u]) + A(input[k + 3840u]));
      total = total + ((quarter0 + quarter1) + (quarter2 + quarter3));
    }
    for (var step = whole; step < count; step = step + 256u) {
      let j = step + lane;
      if (j < count) { total = total + load(first + j); }
    }
    if (start + lane < end) { state = State(total, start + lane); }
  } else if ((OP == OP_SUM || OP == OP_MEAN) && shape.reduced == 1u) {
    // A plain sum along one stride: no state to combine per element.
    let stride = shape.reduced_strides[0].x;
    var total = A(0);
    for (var j = start + lane; j < end; j = j + 256u) {
      total = total + load(base + j * stride);
    }
    if (start + lane < end) { state = State(total, start + lane); }
  } else {
    for (var j = start + lane; j < end; j = j + 256u) {
      state = combine(state, State(load(element(base, j)), j));
    }
  }
  let total = workgroup_combine(lane, state);
  if (lane == 0u) {
    partial_values[o * count.x + part] = total.value;
    partial_indices[o * count.x + part] = total.index;
  }
}

@compute @workgroup_size(256)
fn merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) count: vec3<u32>,
         @builtin(local_invocation_index) lane: u32) {
  _ = &input;
  let o = wid.x + wid.y * count.x;
  if (o >= shape.numel) { return; }
  var state = State(A(0), EMPTY);
  for (var p = lane; p < shape.part; p = p + 256u) {
    let at = o * shape.part + p;
    state = combine(state, State(partial_values[at], partial_indices[at]));
  }
  let total = workgroup_combine(lane, state);
  if (lane == 0u) { finish(o, total); }
}
