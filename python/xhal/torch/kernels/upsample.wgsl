// Upsampling (and downsampling) by interpolation in 1, 2 and 3 dimensions (fewer dimensions
// are a depth and height of 1): nearest, nearest-exact, and (bi/tri)linear with or without
// aligned corners, forward and backward, computed in F. Input and output are [planes, D, H, W],
// contiguous from their first elements. Source positions follow PyTorch's CPU kernels exactly.
// The backward pass gathers: each input element sums the gradients of the outputs that read
// it, so there are no atomics.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl upsample.wgsl | xhal run - -e forward ...

alias E = f32;  // the elements of the data's memory
alias F = f32;  // what positions and sums are computed in

override MODE: u32 = 0u;           // a MODE_ constant
override ALIGN_CORNERS: bool = false;

const MODE_NEAREST: u32 = 0u;
const MODE_NEAREST_EXACT: u32 = 1u;
const MODE_LINEAR: u32 = 2u;

struct Resize {
  planes: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
  in_size: vec4<u32>,   // D, H, W
  out_size: vec4<u32>,
  scale: vec4<F>,       // input size per output size along D, H, W, as PyTorch computes it
}
@group(0) @binding(0) var<uniform> q: Resize;
@group(0) @binding(1) var<storage, read> a: array<E>;          // forward: the input; backward: the output's gradient
@group(0) @binding(2) var<storage, read_write> out: array<E>;  // forward: the output; backward: the input's gradient

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

fn volume(size: vec4<u32>) -> u32 { return size.x * size.y * size.z; }

fn coordinates(linear: u32, size: vec4<u32>) -> vec3<u32> {
  return vec3<u32>(linear / (size.y * size.z), (linear / size.z) % size.y, linear % size.z);
}

// Where output position o along dimension d reads: the two input positions and their
// weights (nearest: one position, weight 1).
struct Taps {
  low: u32,
  high: u32,
  low_weight: F,
  high_weight: F,
}

fn taps(o: u32, d: u32) -> Taps {
  let size = q.in_size[d];
  let scale = q.scale[d];
  switch MODE {
    case MODE_NEAREST: { return Taps(min(u32(floor(F(o) * scale)), size - 1u), 0u, F(1), F(0)); }
    case MODE_NEAREST_EXACT: { return Taps(min(u32(floor((F(o) + F(0.5)) * scale)), size - 1u), 0u, F(1), F(0)); }
    default: {
      var source = F(o) * scale;
      if (!ALIGN_CORNERS) { source = max((F(o) + F(0.5)) * scale - F(0.5), F(0)); }
      let low = min(u32(floor(source)), size - 1u);
      let high = min(low + 1u, size - 1u);
      let fraction = clamp(source - F(low), F(0), F(1));
      return Taps(low, high, F(1) - fraction, fraction);
    }
  }
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(q.out_size);
  if (e >= q.planes * positions) { return; }
  let o = coordinates(e % positions, q.out_size);
  let base = (e / positions) * volume(q.in_size);
  let td = taps(o.x, 0u);
  let th = taps(o.y, 1u);
  let tw = taps(o.z, 2u);
  var sum = F(0);
  for (var corner = 0u; corner < 8u; corner = corner + 1u) {
    let pick = vec3<bool>((corner & 4u) != 0u, (corner & 2u) != 0u, (corner & 1u) != 0u);
    let weight = select(td.low_weight, td.high_weight, pick.x) * select(th.low_weight, th.high_weight, pick.y) *
                 select(tw.low_weight, tw.high_weight, pick.z);
    if (weight == F(0)) { continue; }
    let p = vec3<u32>(select(td.low, td.high, pick.x), select(th.low, th.high, pick.y), select(tw.low, tw.high, pick.z));
    sum = sum + weight * F(a[base + (p.x * q.in_size.y + p.y) * q.in_size.z + p.z]);
  }
  out[e] = E(sum);
}

// The weight with which output position o along dimension d reads input position i.
fn weight_of(o: u32, i: u32, d: u32) -> F {
  let t = taps(o, d);
  var w = F(0);
  if (t.low == i) { w = w + t.low_weight; }
  if (t.high == i && MODE == MODE_LINEAR) { w = w + t.high_weight; }
  return w;
}

// The outputs along dimension d that can read input position i: [first, last].
fn reach(i: u32, d: u32) -> vec2<u32> {
  let scale = q.scale[d];
  let n = q.out_size[d];
  if (scale <= F(0)) { return vec2<u32>(0u, n - 1u); }
  // Source positions grow with o at `scale` per output; one output of margin on each side
  // covers every rounding of PyTorch's formulas.
  let first = max(F(i) - F(1), F(0)) / scale - F(2);
  let last = (F(i) + F(2)) / scale + F(2);
  return vec2<u32>(u32(max(first, F(0))), u32(min(last, F(n - 1u))));
}

@compute @workgroup_size(64)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(q.in_size);
  if (e >= q.planes * positions) { return; }
  let i = coordinates(e % positions, q.in_size);
  let base = (e / positions) * volume(q.out_size);
  let rd = reach(i.x, 0u);
  let rh = reach(i.y, 1u);
  let rw = reach(i.z, 2u);
  var sum = F(0);
  for (var od = rd.x; od <= rd.y; od = od + 1u) {
    let wd = weight_of(od, i.x, 0u);
    if (wd == F(0)) { continue; }
    for (var oh = rh.x; oh <= rh.y; oh = oh + 1u) {
      let wh = weight_of(oh, i.y, 1u);
      if (wh == F(0)) { continue; }
      for (var ow = rw.x; ow <= rw.y; ow = ow + 1u) {
        let ww = weight_of(ow, i.z, 2u);
        if (ww == F(0)) { continue; }
        sum = sum + wd * wh * ww * F(a[base + (od * q.out_size.y + oh) * q.out_size.z + ow]);
      }
    }
  }
  out[e] = E(sum);
}
