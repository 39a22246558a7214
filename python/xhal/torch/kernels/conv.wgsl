// Convolutions in 1, 2 and 3 dimensions (fewer dimensions are a depth and height of 1), with
// stride, padding, dilation and groups, computed in F.
//
// The geometry is a convolution's: x [N, C, D, H, W] and w [O, C / G, KD, KH, KW] give y
// [N, O, OD, OH, OW]. Most convolutions are matrix products (conv_ops.cpp runs them with the
// tiled matrix product) of w and the matrix of x's receptive fields, which two entry points
// make and unmake:
//   columns          x's receptive fields (im2col): [N, C * taps, positions], row c * taps + t
//                    holding what kernel tap t of channel c reads at each output position
//                    (0 in the padding); with BATCH_INNER, [N / chunk, C * taps, chunk,
//                    positions], whose rows span a chunk of the batch, for products over it
//   image            the sum back into x's shape (col2im): each element of x-shaped output
//                    adds up the column entries that read it, for the input gradient; from
//                    either layout (BATCH_INNER in one chunk)
//   image_rows       the same where every stride is 1, a run of a row of x an invocation
//                    (CPU devices)
// and three compute a product directly, one invocation per element of what it writes, summing
// its whole receptive field with no intermediate matrix (transposed convolutions, and
// convolutions whose columns would not fit):
//   forward          y = conv(x, w) (+ bias by y's channel)
//   backward_input   x-shaped, from y-shaped and w: a convolution's input gradient, and a
//                    transposed convolution's output (+ bias by x's channel)
//   backward_weight  w-shaped, from x and y: a convolution's weight gradient
// Every tensor is contiguous from its first element.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl conv.wgsl | xhal run - -e forward ...

alias E = f32;  // the elements of the tensors' memory
alias F = f32;  // what sums are computed in

override HAS_BIAS: bool = false;
override BATCH_INNER: bool = false;  // the columns' layout, for `columns` and `image`
override UNIT_STRIDES: bool = false; // `image`: every stride is 1, so no tap divides by one

struct Geometry {
  batch: u32,
  in_channels: u32,      // C
  out_channels: u32,     // O
  groups: u32,
  batch_chunk: u32,      // BATCH_INNER columns: batch elements per chunk (N: one chunk)
  column_lines: u32,     // `columns`: rows of output positions an invocation fills
  in_size: vec4<u32>,    // D, H, W
  out_size: vec4<u32>,   // OD, OH, OW
  kernel: vec4<u32>,     // KD, KH, KW
  stride: vec4<u32>,
  padding: vec4<u32>,
  dilation: vec4<u32>,
}
@group(0) @binding(0) var<uniform> g: Geometry;
@group(0) @binding(1) var<storage, read> a: array<E>;          // forward: x; backward_input: y-shaped; backward_weight: x
@group(0) @binding(2) var<storage, read> b: array<E>;          // forward, backward_input: w; backward_weight: y-shaped
@group(0) @binding(3) var<storage, read_write> out: array<E>;
@group(0) @binding(4) var<storage, read> bias: array<E>;       // last: backward_weight has none

fn invocation(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

fn volume(size: vec4<u32>) -> u32 { return size.x * size.y * size.z; }

// The coordinates of `linear` in a row-major volume.
fn coordinates(linear: u32, size: vec4<u32>) -> vec3<u32> {
  return vec3<u32>(linear / (size.y * size.z), (linear / size.z) % size.y, linear % size.z);
}

fn offset_in(c: vec3<u32>, size: vec4<u32>) -> u32 { return (c.x * size.y + c.y) * size.z + c.z; }

// The input position output position `o` reads through kernel tap `k`, as signed coordinates:
// outside the input where padding is.
fn source(o: vec3<u32>, k: vec3<u32>) -> vec3<i32> {
  return vec3<i32>(o * g.stride.xyz + k * g.dilation.xyz) - vec3<i32>(g.padding.xyz);
}

fn inside(p: vec3<i32>, size: vec4<u32>) -> bool {
  return all(p >= vec3<i32>(0)) && all(p < vec3<i32>(size.xyz));
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(g.out_size);
  if (e >= g.batch * g.out_channels * positions) { return; }
  let o = coordinates(e % positions, g.out_size);
  let oc = (e / positions) % g.out_channels;
  let n = e / (positions * g.out_channels);
  let group_in = g.in_channels / g.groups;
  let first_channel = (oc / (g.out_channels / g.groups)) * group_in;
  let taps = volume(g.kernel);
  var sum = F(0);
  for (var c = 0u; c < group_in; c = c + 1u) {
    let x_base = (n * g.in_channels + first_channel + c) * volume(g.in_size);
    let w_base = (oc * group_in + c) * taps;
    for (var t = 0u; t < taps; t = t + 1u) {
      let p = source(o, coordinates(t, g.kernel));
      if (inside(p, g.in_size)) {
        sum = sum + F(a[x_base + offset_in(vec3<u32>(p), g.in_size)]) * F(b[w_base + t]);
      }
    }
  }
  if (HAS_BIAS) { sum = sum + F(bias[oc]); }
  out[e] = E(sum);
}

@compute @workgroup_size(64)
fn backward_input(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let positions = volume(g.in_size);
  if (e >= g.batch * g.in_channels * positions) { return; }
  let i = vec3<i32>(coordinates(e % positions, g.in_size));
  let ci = (e / positions) % g.in_channels;
  let n = e / (positions * g.in_channels);
  let group_in = g.in_channels / g.groups;
  let group_out = g.out_channels / g.groups;
  let c = ci % group_in;
  let first_out = (ci / group_in) * group_out;
  let taps = volume(g.kernel);
  var sum = F(0);
  for (var t = 0u; t < taps; t = t + 1u) {
    let k = coordinates(t, g.kernel);
    // The output position whose tap k reads i, where there is one: o * stride = i + padding - k * dilation.
    let reach = i + vec3<i32>(g.padding.xyz) - vec3<i32>(k * g.dilation.xyz);
    let stride = vec3<i32>(g.stride.xyz);
    if (any(reach < vec3<i32>(0)) || any(reach % stride != vec3<i32>(0))) { continue; }
    let o = reach / stride;
    if (!inside(o, g.out_size)) { continue; }
    let at = offset_in(vec3<u32>(o), g.out_size);
    for (var j = 0u; j < group_out; j = j + 1u) {
      let oc = first_out + j;
      sum = sum + F(a[(n * g.out_channels + oc) * volume(g.out_size) + at]) * F(b[(oc * group_in + c) * taps + t]);
    }
  }
  if (HAS_BIAS) { sum = sum + F(bias[ci]); }
  out[e] = E(sum);
}

@compute @workgroup_size(64)
fn backward_weight(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = invocation(gid, groups);
  let taps = volume(g.kernel);
  let group_in = g.in_channels / g.groups;
  if (e >= g.out_channels * group_in * taps) { return; }
  let t = e % taps;
  let c = (e / taps) % group_in;
  let oc = e / (taps * group_in);
  let ci = (oc / (g.out_channels / g.groups)) * group_in + c;
  let k = coordinates(t, g.kernel);
  let positions = volume(g.out_size);
  var sum = F(0);
  for (var n = 0u; n < g.batch; n = n + 1u) {
    let x_base = (n * g.in_channels + ci) * volume(g.in_size);
    let y_base = (n * g.out_channels + oc) * positions;
    for (var l = 0u; l < positions; l = l + 1u) {
      let p = source(coordinates(l, g.out_size), k);
      if (inside(p, g.in_size)) {
        sum = sum + F(a[x_base + offset_in(vec3<u32>(p), g.in_size)]) * F(b[y_base + l]);
      }
    }
  }
  out[e] = E(sum);
}

@compute @workgroup_size(64)
fn columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  _ = &b;  // unread, bound so that `out` is the same argument in every entry point
  // One invocation per g.column_lines rows of output positions (a depth and height, all
  // widths) of one row of the matrix: the inner loops step through x's rows with the stride,
  // and the divisions that place the invocation are paid once for all its lines (a CPU takes
  // many lines an invocation, a GPU one).
  let e = invocation(gid, groups);
  let lines = g.out_size.x * g.out_size.y;
  let chunks = (lines + g.column_lines - 1u) / g.column_lines;
  let taps = volume(g.kernel);
  let rows = g.in_channels * taps;
  if (e >= g.batch * rows * chunks) { return; }
  let first_line = e % chunks * g.column_lines;
  let end_line = min(first_line + g.column_lines, lines);
  let row = (e / chunks) % rows;
  let n = e / (chunks * rows);
  let k = coordinates(row % taps, g.kernel);
  let width = g.out_size.z;
  var first = ((n * rows + row) * lines + first_line) * width;
  if (BATCH_INNER) {
    let chunk = n / g.batch_chunk;
    first = (((chunk * rows + row) * g.batch_chunk + n % g.batch_chunk) * lines + first_line) * width;
  }
  let x_plane = (n * g.in_channels + row / taps) * g.in_size.x * g.in_size.y * g.in_size.z;
  // Output positions [0, inner_first) of a line read the left padding, [inner_first,
  // inner_end) the row, the rest the right padding: three loops with no test per element.
  let start = i32(k.z * g.dilation.z) - i32(g.padding.z);
  let stride = i32(g.stride.z);
  let inner_first = min(u32(max((stride - 1 - start) / stride, 0)), width);
  let inner_end = max(min(u32(max((i32(g.in_size.z) - start + stride - 1) / stride, 0)), width), inner_first);
  var od = first_line / g.out_size.y;
  var oh = first_line % g.out_size.y;
  for (var line = first_line; line < end_line; line = line + 1u) {
    let pd = i32(od * g.stride.x + k.x * g.dilation.x) - i32(g.padding.x);
    let ph = i32(oh * g.stride.y + k.y * g.dilation.y) - i32(g.padding.y);
    if (pd < 0 || pd >= i32(g.in_size.x) || ph < 0 || ph >= i32(g.in_size.y)) {
      for (var ow = 0u; ow < width; ow = ow + 1u) { out[first + ow] = E(0); }
    } else {
      let x_row = x_plane + (u32(pd) * g.in_size.y + u32(ph)) * g.in_size.z;
      for (var ow = 0u; ow < inner_first; ow = ow + 1u) { out[first + ow] = E(0); }
      // The read position as an affine function of `ow` (modulo 2^32, the same positions as
      // stepping by the stride): the cpu device then checks the whole run once, before the loop.
      let read_origin = x_row + u32(start);
      if (g.stride.z == 1u) {
        // Adjacent reads, which a CPU copies as whole vectors.
        for (var ow = inner_first; ow < inner_end; ow = ow + 1u) { out[first + ow] = a[read_origin + ow]; }
      } else {
        for (var ow = inner_first; ow < inner_end; ow = ow + 1u) {
          out[first + ow] = a[read_origin + ow * g.stride.z];
        }
      }
      for (var ow = inner_end; ow < width; ow = ow + 1u) { out[first + ow] = E(0); }
    }
    first = first + width;
    oh = oh + 1u;
    if (oh == g.out_size.y) {
      oh = 0u;
      od = od + 1u;
    }
  }
}

// `image` where every stride is 1, for devices that run an invocation at a time (CPUs): an
// invocation sums a run of up to 64 adjacent elements of one row of x, tap by tap, each tap's
// column entries for the run being adjacent too. The taps are added in `image`'s order, from
// zero, so both give the same sums bit for bit; this one divides once a run, not five times
// an element.
const IMAGE_RUN: u32 = 64u;

@compute @workgroup_size(64)
fn image_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  _ = &b;  // unread, as in columns
  let width = g.in_size.z;
  let runs_per_row = (width + IMAGE_RUN - 1u) / IMAGE_RUN;
  let lines_in = g.in_size.x * g.in_size.y;
  let e = invocation(gid, groups);
  if (e >= g.batch * g.in_channels * lines_in * runs_per_row) { return; }
  let run_first = e % runs_per_row * IMAGE_RUN;
  let count = min(IMAGE_RUN, width - run_first);
  let line = e / runs_per_row % lines_in;
  let plane = e / (runs_per_row * lines_in);  // n * C + c
  let c = plane % g.in_channels;
  let n = plane / g.in_channels;
  let id = line / g.in_size.y;
  let ih = line % g.in_size.y;
  let positions = volume(g.out_size);
  let taps = volume(g.kernel);
  var first = plane * taps * positions;
  var row_step = positions;
  if (BATCH_INNER) {
    first = (c * taps * g.batch + n) * positions;
    row_step = g.batch * positions;
  }
  var sums: array<F, IMAGE_RUN>;
  var t = 0u;
  for (var kd = 0u; kd < g.kernel.x; kd = kd + 1u) {
    let od = i32(id + g.padding.x) - i32(kd * g.dilation.x);
    for (var kh = 0u; kh < g.kernel.y; kh = kh + 1u) {
      let oh = i32(ih + g.padding.y) - i32(kh * g.dilation.y);
      let line_ok = od >= 0 && od < i32(g.out_size.x) && oh >= 0 && oh < i32(g.out_size.y);
      for (var kw = 0u; kw < g.kernel.z; kw = kw + 1u) {
        if (line_ok) {
          // Element j of the run reads output column run_first + j + shift, where inside.
          let shift = i32(g.padding.z) - i32(kw * g.dilation.z) + i32(run_first);
          let lo = u32(clamp(-shift, 0, i32(count)));
          let hi = u32(clamp(i32(g.out_size.z) - shift, i32(lo), i32(count)));
          let base = i32(first + t * row_step + (u32(od) * g.out_size.y + u32(oh)) * g.out_size.z) + shift;
          for (var j = lo; j < hi; j = j + 1u) {
            sums[j] = sums[j] + F(a[u32(base + i32(j))]);
          }
        }
        t = t + 1u;
      }
    }
  }
  let out_first = (plane * lines_in + line) * width + run_first;
  for (var j = 0u; j < count; j = j + 1u) { out[out_first + j] = E(sums[j]); }
}

@compute @workgroup_size(64)
fn image(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  _ = &b;  // unread, as in columns
  let e = invocation(gid, groups);
  let volume_in = volume(g.in_size);
  if (e >= g.batch * g.in_channels * volume_in) { return; }
  let i = coordinates(e % volume_in, g.in_size);
  let c = (e / volume_in) % g.in_channels;
  let n = e / (volume_in * g.in_channels);
  let positions = volume(g.out_size);
  let taps = volume(g.kernel);
  // Where tap t's entry for output position p is: first + t * row_step + p.
  var first = (n * g.in_channels + c) * taps * positions;
  var row_step = positions;
  if (BATCH_INNER) {
    first = (c * taps * g.batch + n) * positions;
    row_step = g.batch * positions;
  }
  var sum = F(0);
  // Tap (kd, kh, kw) reads i from output position o where o * stride = i + padding - k *
  // dilation, if that is a whole multiple inside the output; each dimension is tested once
  // for all the taps that share it.
  var t = 0u;
  for (var kd = 0u; kd < g.kernel.x; kd = kd + 1u) {
    let rd = i32(i.x + g.padding.x) - i32(kd * g.dilation.x);
    var od = u32(max(rd, 0));
    var depth_ok = rd >= 0 && od < g.out_size.x;
    if (!UNIT_STRIDES) {
      od = od / g.stride.x;
      depth_ok = rd >= 0 && u32(rd) % g.stride.x == 0u && od < g.out_size.x;
    }
    for (var kh = 0u; kh < g.kernel.y; kh = kh + 1u) {
      let rh = i32(i.y + g.padding.y) - i32(kh * g.dilation.y);
      var oh = u32(max(rh, 0));
      var height_ok = depth_ok && rh >= 0 && oh < g.out_size.y;
      if (!UNIT_STRIDES) {
        oh = oh / g.stride.y;
        height_ok = depth_ok && rh >= 0 && u32(rh) % g.stride.y == 0u && oh < g.out_size.y;
      }
      let line = (od * g.out_size.y + oh) * g.out_size.z;
      for (var kw = 0u; kw < g.kernel.z; kw = kw + 1u) {
        let rw = i32(i.z + g.padding.z) - i32(kw * g.dilation.z);
        var ow = u32(max(rw, 0));
        var width_ok = height_ok && rw >= 0 && ow < g.out_size.z;
        if (!UNIT_STRIDES) {
          ow = ow / g.stride.z;
          width_ok = height_ok && rw >= 0 && u32(rw) % g.stride.z == 0u && ow < g.out_size.z;
        }
        if (width_ok) {
          sum = sum + F(a[first + t * row_step + line + ow]);
        }
        t = t + 1u;
      }
    }
  }
  out[e] = E(sum);
}
