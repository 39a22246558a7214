// Pooling in 1, 2 and 3 dimensions (fewer dimensions are a depth and height of 1): max and
// average pooling with kernel, stride, padding and dilation, and adaptive pooling, forward and
// backward, computed in F. Input and output are [planes, D, H, W] (planes = batch x channels),
// contiguous from their first elements. Max pooling records where each maximum was as its
// index in the input's plane (d H W + h W + w), as PyTorch does; a NaN wins.
//
// The backward passes gather: each input element sums the gradients of the outputs whose
// window holds it, so there are no atomics, and one order of additions on every device. Max
// pooling whose windows do not overlap (the usual stride of a whole window) scatters instead
// (`scatter_max`): an input is in one window at most, so there is nothing to sum.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl pool.wgsl | xhal run - -e forward ...

alias E = f32;  // the elements of the data's memory
alias F = f32;  // what averages are computed in

override MODE: u32 = 0u;             // a MODE_ constant
override COUNT_PADDING: bool = true; // average pooling divides by the window with its padding
override EVEN: bool = false;         // adaptive: every output size divides its input size, so the
                                     // windows tile the input, each input in one of them

const MODE_MAX: u32 = 0u;
const MODE_AVERAGE: u32 = 1u;
const MODE_ADAPTIVE_MAX: u32 = 2u;
const MODE_ADAPTIVE_AVERAGE: u32 = 3u;

struct Pooling {
  planes: u32,
  divisor: i32,          // average pooling's divisor override (any sign), 0 for none
  pad0: u32,
  pad1: u32,
  in_size: vec4<u32>,    // D, H, W
  out_size: vec4<u32>,
  kernel: vec4<u32>,
  stride: vec4<u32>,
  padding: vec4<u32>,
  dilation: vec4<u32>,
}
@group(0) @binding(0) var<uniform> q: Pooling;
@group(0) @binding(1) var<storage, read> a: array<E>;              // forward: the input; backward: the output's gradient
@group(0) @binding(2) var<storage, read_write> out: array<E>;      // forward: the output; backward: the input's gradient
@group(0) @binding(3) var<storage, read_write> indices: array<u32>; // int64, two words an element (max pooling)

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

fn volume(size: vec4<u32>) -> u32 { return size.x * size.y * size.z; }

fn coordinates(linear: u32, size: vec4<u32>) -> vec3<u32> {
  return vec3<u32>(linear / (size.y * size.z), (linear / size.z) % size.y, linear % size.z);
}

fn adaptive() -> bool { return MODE == MODE_ADAPTIVE_MAX || MODE == MODE_ADAPTIVE_AVERAGE; }

// Output position o's window along each dimension: its first position (which may be in the
// padding) and how many positions it has, `dilation` apart.
struct Window {
  first: vec3<i32>,
  taps: vec3<u32>,
}

fn window(o: vec3<u32>) -> Window {
  if (adaptive()) {
    // PyTorch's adaptive windows: [floor(o I / O), ceil((o + 1) I / O)).
    let i = q.in_size.xyz;
    let n = q.out_size.xyz;
    let first = (o * i) / n;
    let end = ((o + vec3<u32>(1u)) * i + n - vec3<u32>(1u)) / n;
    return Window(vec3<i32>(first), end - first);
  }
  return Window(vec3<i32>(o * q.stride.xyz) - vec3<i32>(q.padding.xyz), q.kernel.xyz);
}

fn step() -> vec3<i32> {
  if (adaptive()) { return vec3<i32>(1); }
  return vec3<i32>(q.dilation.xyz);
}

fn inside(p: vec3<i32>) -> bool { return all(p >= vec3<i32>(0)) && all(p < vec3<i32>(q.in_size.xyz)); }

fn plane_offset(p: vec3<i32>) -> u32 {
  let u = vec3<u32>(p);
  return (u.x * q.in_size.y + u.y) * q.in_size.z + u.z;
}

// What average pooling divides output o's sum by.
fn divisor(w: Window) -> F {
  if (q.divisor != 0) { return F(q.divisor); }
  if (adaptive()) { return F(w.taps.x * w.taps.y * w.taps.z); }
  // PyTorch's: the window clipped to the padded input, or to the input itself.
  let low = w.first;
  let high = min(w.first + vec3<i32>(q.kernel.xyz), vec3<i32>(q.in_size.xyz + q.padding.xyz));
  if (COUNT_PADDING) {
    let size = high - low;
    return F(size.x * size.y * size.z);
  }
  let size = min(high, vec3<i32>(q.in_size.xyz)) - max(low, vec3<i32>(0));
  return F(size.x * size.y * size.z);
}


// Output o of `plane`, element e of the output.
fn pool_output(plane: u32, o: vec3<u32>, e: u32) {
  let w = window(o);
  let base = plane * volume(q.in_size);
  let s = step();
  let maximum = MODE == MODE_MAX || MODE == MODE_ADAPTIVE_MAX;
  var sum = F(0);
  var best = F(0);
  var best_at = 0xffffffffu;
  for (var kd = 0u; kd < w.taps.x; kd = kd + 1u) {
    for (var kh = 0u; kh < w.taps.y; kh = kh + 1u) {
      for (var kw = 0u; kw < w.taps.z; kw = kw + 1u) {
        let p = w.first + vec3<i32>(vec3<u32>(kd, kh, kw)) * s;
        if (!inside(p)) { continue; }
        let at = plane_offset(p);
        let v = F(a[base + at]);
        if (maximum) {
          if (best_at == 0xffffffffu || (v > best && !is_nan(best)) || (is_nan(v) && !is_nan(best))) {
            best = v;
            best_at = at;
          }
        } else {
          sum = sum + v;
        }
      }
    }
  }
  if (maximum) {
    out[e] = E(best);
    indices[2u * e] = best_at;
    indices[2u * e + 1u] = 0u;
  } else {
    out[e] = E(sum / divisor(w));
  }
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(q.out_size);
  if (e >= q.planes * positions) { return; }
  pool_output(e / positions, coordinates(e % positions, q.out_size), e);
}

// An output row's run of up to RUN adjacent outputs, for `scatter_max_runs`.
const RUN: u32 = 64u;

struct Run {
  plane: u32,
  first: vec3<u32>,  // the run's first output
  count: u32,
  e: u32,            // its element of the output
}

// Invocation t's run, or a count of 0 past the last.
fn run_of(t: u32) -> Run {
  let runs_per_row = (q.out_size.z + RUN - 1u) / RUN;
  let lines = q.out_size.x * q.out_size.y;
  if (t >= q.planes * lines * runs_per_row) { return Run(0u, vec3<u32>(0u), 0u, 0u); }
  let ow = t % runs_per_row * RUN;
  let line = t / runs_per_row % lines;
  let plane = t / (runs_per_row * lines);
  let first = vec3<u32>(line / q.out_size.y, line % q.out_size.y, ow);
  return Run(plane, first, min(RUN, q.out_size.z - ow), (plane * lines + line) * q.out_size.z + ow);
}

// The outputs along one dimension whose windows can hold input position i: [first, last].
fn reach(i: i32, d: u32) -> vec2<i32> {
  if (adaptive()) {
    let n = i32(q.out_size[d]);
    let size = i32(q.in_size[d]);
    return vec2<i32>((i * n) / size, min(((i + 1) * n + size - 1) / size, n) - 1);
  }
  let s = i32(q.stride[d]);
  let extent = i32(q.dilation[d]) * (i32(q.kernel[d]) - 1);
  // o s - padding <= i and i <= o s - padding + extent.
  let high = (i + i32(q.padding[d])) / s;
  let low_numerator = i + i32(q.padding[d]) - extent;
  var low = 0;
  if (low_numerator > 0) { low = (low_numerator + s - 1) / s; }
  return vec2<i32>(low, min(high, i32(q.out_size[d]) - 1));
}

// Whether output o's window holds input position p (on the dilation grid).
fn holds(o: vec3<u32>, p: vec3<i32>) -> bool {
  let w = window(o);
  let offset = p - w.first;
  let s = step();
  return all(offset >= vec3<i32>(0)) && all(offset % s == vec3<i32>(0)) && all(offset / s < vec3<i32>(w.taps));
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(q.in_size);
  if (e >= q.planes * positions) { return; }
  let plane = e / positions;
  let at = e % positions;
  let p = vec3<i32>(coordinates(at, q.in_size));
  if (EVEN && MODE == MODE_ADAPTIVE_AVERAGE) {
    // The one window that holds p, and its size, without a search.
    let size = q.in_size.xyz / q.out_size.xyz;
    let o = vec3<u32>(p) / size;
    let k = plane * volume(q.out_size) + (o.x * q.out_size.y + o.y) * q.out_size.z + o.z;
    out[e] = E(F(a[k]) / F(size.x * size.y * size.z));
    return;
  }
  let rd = reach(p.x, 0u);
  let rh = reach(p.y, 1u);
  let rw = reach(p.z, 2u);
  let base = plane * volume(q.out_size);
  let maximum = MODE == MODE_MAX || MODE == MODE_ADAPTIVE_MAX;
  var sum = F(0);
  for (var od = rd.x; od <= rd.y; od = od + 1) {
    for (var oh = rh.x; oh <= rh.y; oh = oh + 1) {
      for (var ow = rw.x; ow <= rw.y; ow = ow + 1) {
        let o = vec3<u32>(vec3<i32>(od, oh, ow));
        let k = base + (o.x * q.out_size.y + o.y) * q.out_size.z + o.z;
        if (maximum) {
          if (indices[2u * k] == at) { sum = sum + F(a[k]); }
        } else if (holds(o, p)) {
          sum = sum + F(a[k]) / divisor(window(o));
        }
      }
    }
  }
  out[e] = E(sum);
}

// Max pooling's backward pass where no two windows overlap (each stride at least its window's
// extent). Launched as ceil(outputs a plane / 64) x planes workgroups (planes past 65,535 in
// z), over an `out` the caller zeroed: each output's gradient goes to the input its index
// names, which no other output's window holds. An index outside its output's window is
// ignored, as the gathering pass ignores it.
// Output o of `plane` (element k of the output) gives its gradient to the input its index names.
fn scatter_one(plane: u32, o: vec3<u32>, k: u32) {
  let at = indices[2u * k];
  if (indices[2u * k + 1u] != 0u || at >= volume(q.in_size)) { return; }
  if (holds(o, vec3<i32>(coordinates(at, q.in_size)))) {
    out[plane * volume(q.in_size) + at] = a[k];
  }
}

@compute @workgroup_size(64)
fn scatter_max(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let o = gid.x;
  let plane = gid.y + gid.z * groups.y;
  let outputs = volume(q.out_size);
  if (o >= outputs || plane >= q.planes) { return; }
  scatter_one(plane, coordinates(o, q.out_size), plane * outputs + o);
}

// `scatter_max` a run of a row of outputs an invocation, for devices that run an invocation at
// a time (CPUs): the divisions that place an output are paid once a run.
@compute @workgroup_size(64)
fn scatter_max_runs(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let r = run_of(invocation(gid, groups));
  for (var j = 0u; j < r.count; j = j + 1u) {
    scatter_one(r.plane, r.first + vec3<u32>(0u, 0u, j), r.e + j);
  }
}
