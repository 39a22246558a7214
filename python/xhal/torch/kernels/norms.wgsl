// Normalizations: layer norm, RMS norm, group norm and batch norm (so instance norm), forward
// and backward, computed in F (f32 for float16 and float32, f64 for float64). Every one
// normalizes rows: one workgroup a row, its invocations striding over the row's elements and
// combining their sums as a tree. Element j of row r is at
//   r * row_stride + (j / inner) * outer_stride + j % inner
// so a layer norm's row is a contiguous run of `count` elements, and a batch norm's row is a
// channel: `inner` spatial elements, then the next sample `outer_stride` further on.
//
// Every loop over a row runs the same number of times in every invocation, each element
// behind its own test, so that the cpu device runs it across the invocations; where a row's
// elements are adjacent (ADJACENT), or runs of adjacent elements (RUNS: a batch norm's
// channel, a run per sample), the loops index the buffers themselves, so that those lanes
// load whole vectors.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl norms.wgsl | xhal run - -e forward ...

alias E = f32;  // the elements of the tensors' memory
alias F = f32;  // what the statistics and results are computed in

override MODE: u32 = 0u;        // a MODE_ constant
override HAS_WEIGHT: bool = false;
override HAS_BIAS: bool = false;
override RUNNING: u32 = 0u;     // a RUNNING_ constant (batch norm)
override WG: u32 = 256u;        // invocations a row, a power of two
override ADJACENT: bool = false; // inner >= count: element j of row r is at r * row_stride + j
override RUNS: bool = false;     // a row is count / inner runs of inner adjacent elements (batch norm)

const MODE_LAYER: u32 = 0u;     // affine by element within the row
const MODE_RMS: u32 = 1u;       // the same, scaling by the root mean square, with no mean taken out
const MODE_GROUP: u32 = 2u;     // affine by channel: row r is group r % groups of a sample
const MODE_BATCH: u32 = 3u;     // affine by row: row r is channel r

const RUNNING_NONE: u32 = 0u;   // statistics of the rows themselves
const RUNNING_UPDATE: u32 = 1u; // those, and the running statistics updated with them
const RUNNING_USE: u32 = 2u;    // the running statistics instead (evaluation)

struct Norm {
  rows: u32,
  count: u32,           // elements a row
  inner: u32,
  outer_stride: u32,
  row_stride: u32,
  groups: u32,          // group norm: groups a sample
  group_channels: u32,  // group norm: channels a group
  spatial: u32,         // group norm: elements a channel
  eps: vec2<u32>,       // bits of F
  momentum: vec2<u32>,  // bits of F (batch norm's running statistics)
  part_rows: u32,       // affine_gradients: rows a part sums
  pad0: u32,
  pad1: u32,
  pad2: u32,
}
var<immediate> q: Norm;

@group(0) @binding(0) var<storage, read> x: array<E>;
@group(0) @binding(1) var<storage, read> weight: array<E>;
@group(0) @binding(2) var<storage, read> bias: array<E>;
@group(0) @binding(3) var<storage, read_write> out: array<E>;        // forward: y; backward: dx
@group(0) @binding(4) var<storage, read_write> mean: array<E>;       // per row (backward: read)
@group(0) @binding(5) var<storage, read_write> rstd: array<E>;       // per row: 1 / sqrt(var + eps)
@group(0) @binding(6) var<storage, read_write> running_mean: array<E>;
@group(0) @binding(7) var<storage, read_write> running_var: array<E>;
// The backward pass binds the gradients where the forward pass has what they are of.
@group(0) @binding(2) var<storage, read> dy: array<E>;
@group(0) @binding(6) var<storage, read_write> grad_weight: array<E>;  // batch norm's, by channel
@group(0) @binding(7) var<storage, read_write> grad_bias: array<E>;

// affine_gradients: each part's sums, by column: (weight's, bias's).
@group(0) @binding(8) var<storage, read_write> part_sums: array<vec2<F>>;

var<workgroup> partial: array<vec2<F>, WG>;

// Where an invocation is in its row: element j is run j / inner, element j % inner of it. The
// loops over a row step j by WG, and move the cursor by adding, so that no element costs a
// division.
struct Cursor {
  run: u32,
  within: u32,
}

fn cursor_at(j: u32) -> Cursor { return Cursor(j / q.inner, j % q.inner); }

// The cursor WG elements further on; `step` is cursor_at(WG).
fn advance(c: Cursor, step: Cursor) -> Cursor {
  var next = Cursor(c.run + step.run, c.within + step.within);
  if (next.within >= q.inner) {
    next.within = next.within - q.inner;
    next.run = next.run + 1u;
  }
  return next;
}

fn at(r: u32, c: Cursor) -> u32 { return r * q.row_stride + c.run * q.outer_stride + c.within; }

fn channel(r: u32, j: u32) -> u32 {
  switch MODE {
    case MODE_GROUP: { return (r % q.groups) * q.group_channels + j / q.spatial; }
    case MODE_BATCH: { return r; }
    default: { return j; }
  }
}

fn scale(r: u32, j: u32) -> F {
  if (HAS_WEIGHT) { return F(weight[channel(r, j)]); }
  return F(1);
}

fn shift(r: u32, j: u32) -> F {
  if (HAS_BIAS) { return F(bias[channel(r, j)]); }
  return F(0);
}

// The sum over the workgroup of each invocation's `value`; every invocation gets it.
fn workgroup_sum(lane: u32, value: vec2<F>) -> vec2<F> {
  partial[lane] = value;
  workgroupBarrier();
  for (var width = WG / 2u; width > 0u; width = width / 2u) {
    if (lane < width) { partial[lane] = partial[lane] + partial[lane + width]; }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(WG)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
           @builtin(local_invocation_index) lane: u32) {
  let r = wid.x + wid.y * groups.x;
  if (r >= q.rows) { return; }
  let step = cursor_at(WG);
  let n = F(q.count);
  let eps = float_from_bits(q.eps.x, q.eps.y);
  var m = F(0);
  var inverse = F(0);
  if (RUNNING == RUNNING_USE) {
    m = F(running_mean[r]);
    inverse = F(1) / xsqrt(F(running_var[r]) + eps);
  } else {
    var sum = F(0);
    if (MODE != MODE_RMS && RUNS) {
      for (var run = 0u; run < q.count / q.inner; run = run + 1u) {
        let base = r * q.row_stride + run * q.outer_stride;
        for (var start = 0u; start < q.inner; start = start + WG) {
          let j = start + lane;
          if (j < q.inner) { sum = sum + F(x[base + j]); }
        }
      }
      m = workgroup_sum(lane, vec2<F>(sum, F(0))).x / n;
    } else if (MODE != MODE_RMS) {
      var c = cursor_at(lane);
      for (var start = 0u; start < q.count; start = start + WG) {
        let j = start + lane;
        if (j < q.count) {
          if (ADJACENT) {
            sum = sum + F(x[r * q.row_stride + j]);
          } else {
            sum = sum + F(x[at(r, c)]);
            c = advance(c, step);
          }
        }
      }
      m = workgroup_sum(lane, vec2<F>(sum, F(0))).x / n;
    }
    // The variance from the deviations, in a second pass: sums of squares lose the small
    // variance of large values.
    var squares = F(0);
    if (RUNS) {
      for (var run = 0u; run < q.count / q.inner; run = run + 1u) {
        let base = r * q.row_stride + run * q.outer_stride;
        for (var start = 0u; start < q.inner; start = start + WG) {
          let j = start + lane;
          if (j < q.inner) {
            let d = F(x[base + j]) - m;
            squares = squares + d * d;
          }
        }
      }
    }
    var c = cursor_at(lane);
    for (var start = 0u; start < select(q.count, 0u, RUNS); start = start + WG) {
      let j = start + lane;
      if (j < q.count) {
        var d = F(0);
        if (ADJACENT) {
          d = F(x[r * q.row_stride + j]) - m;
        } else {
          d = F(x[at(r, c)]) - m;
          c = advance(c, step);
        }
        squares = squares + d * d;
      }
    }
    let variance = workgroup_sum(lane, vec2<F>(squares, F(0))).x / n;
    inverse = F(1) / xsqrt(variance + eps);
    if (lane == 0u && RUNNING == RUNNING_UPDATE) {
      let momentum = float_from_bits(q.momentum.x, q.momentum.y);
      let unbiased = variance * n / max(n - F(1), F(1));
      running_mean[r] = E((F(1) - momentum) * F(running_mean[r]) + momentum * m);
      running_var[r] = E((F(1) - momentum) * F(running_var[r]) + momentum * unbiased);
    }
  }
  if (RUNS) {
    // A batch norm's affine parameters are its channel's, one for the whole row.
    let a = inverse * scale(r, 0u);
    let b = shift(r, 0u);
    for (var run = 0u; run < q.count / q.inner; run = run + 1u) {
      let base = r * q.row_stride + run * q.outer_stride;
      for (var start = 0u; start < q.inner; start = start + WG) {
        let j = start + lane;
        if (j < q.inner) { out[base + j] = E((F(x[base + j]) - m) * a + b); }
      }
    }
  }
  var c = cursor_at(lane);
  for (var start = 0u; start < select(q.count, 0u, RUNS); start = start + WG) {
    let j = start + lane;
    if (j < q.count) {
      if (ADJACENT && (MODE == MODE_LAYER || MODE == MODE_RMS)) {
        // The weight and bias by element, indexed here too.
        let k = r * q.row_stride + j;
        var y = (F(x[k]) - m) * inverse;
        if (HAS_WEIGHT) { y = y * F(weight[j]); }
        if (HAS_BIAS) { y = y + F(bias[j]); }
        out[k] = E(y);
      } else if (ADJACENT) {
        let k = r * q.row_stride + j;
        out[k] = E((F(x[k]) - m) * inverse * scale(r, j) + shift(r, j));
      } else {
        let k = at(r, c);
        out[k] = E((F(x[k]) - m) * inverse * scale(r, j) + shift(r, j));
        c = advance(c, step);
      }
    }
  }
  if (lane == 0u && RUNNING != RUNNING_USE) {
    mean[r] = E(m);
    rstd[r] = E(inverse);
  }
}

// dx from dy and the saved statistics of each row; for batch norm also the weight's and
// bias's gradients, a row being a channel.
@compute @workgroup_size(WG)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
            @builtin(local_invocation_index) lane: u32) {
  let r = wid.x + wid.y * groups.x;
  if (r >= q.rows) { return; }
  let n = F(q.count);
  let m = F(mean[r]);
  let inverse = F(rstd[r]);
  // g = dy * weight; the sums of g and of g * xhat over the row.
  var sums = vec2<F>(F(0));
  var raw = vec2<F>(F(0));
  if (RUNS) {
    // A batch norm's channel: the weight is one for the whole row.
    let w = scale(r, 0u);
    for (var run = 0u; run < q.count / q.inner; run = run + 1u) {
      let base = r * q.row_stride + run * q.outer_stride;
      for (var start = 0u; start < q.inner; start = start + WG) {
        let j = start + lane;
        if (j < q.inner) {
          let d = F(dy[base + j]);
          let xhat = (F(x[base + j]) - m) * inverse;
          raw = raw + vec2<F>(d, d * xhat);
        }
      }
    }
    sums = raw * w;
  }
  let step = cursor_at(WG);
  var c = cursor_at(lane);
  for (var start = 0u; start < select(q.count, 0u, RUNS); start = start + WG) {
    let j = start + lane;
    if (j < q.count) {
      var k = 0u;
      var d = F(0);
      var xhat = F(0);
      var g = F(0);
      if (ADJACENT && (MODE == MODE_LAYER || MODE == MODE_RMS)) {
        d = F(dy[r * q.row_stride + j]);
        xhat = (F(x[r * q.row_stride + j]) - m) * inverse;
        g = d;
        if (HAS_WEIGHT) { g = d * F(weight[j]); }
      } else {
        if (ADJACENT) { k = r * q.row_stride + j; } else { k = at(r, c); c = advance(c, step); }
        d = F(dy[k]);
        xhat = (F(x[k]) - m) * inverse;
        g = d * scale(r, j);
      }
      sums = sums + vec2<F>(g, g * xhat);
      raw = raw + vec2<F>(d, d * xhat);
    }
  }
  let total = workgroup_sum(lane, sums);
  var weight_sums = vec2<F>(F(0));
  if (MODE == MODE_BATCH) { weight_sums = workgroup_sum(lane, raw); }
  var mean_g = total.x / n;
  let mean_gx = total.y / n;
  if (MODE == MODE_RMS) { mean_g = F(0); }
  if (RUNS) {
    let w = scale(r, 0u);
    for (var run = 0u; run < q.count / q.inner; run = run + 1u) {
      let base = r * q.row_stride + run * q.outer_stride;
      for (var start = 0u; start < q.inner; start = start + WG) {
        let j = start + lane;
        if (j < q.inner) {
          let g = F(dy[base + j]) * w;
          if (RUNNING == RUNNING_USE) {
            out[base + j] = E(g * inverse);
          } else {
            let xhat = (F(x[base + j]) - m) * inverse;
            out[base + j] = E(inverse * (g - mean_g - xhat * mean_gx));
          }
        }
      }
    }
  }
  c = cursor_at(lane);
  for (var start = 0u; start < select(q.count, 0u, RUNS); start = start + WG) {
    let j = start + lane;
    if (j < q.count) {
      if (ADJACENT && (MODE == MODE_LAYER || MODE == MODE_RMS) && RUNNING != RUNNING_USE) {
        let k = r * q.row_stride + j;
        var g = F(dy[k]);
        if (HAS_WEIGHT) { g = g * F(weight[j]); }
        let xhat = (F(x[k]) - m) * inverse;
        out[k] = E(inverse * (g - mean_g - xhat * mean_gx));
      } else {
        var k = 0u;
        if (ADJACENT) { k = r * q.row_stride + j; } else { k = at(r, c); c = advance(c, step); }
        let g = F(dy[k]) * scale(r, j);
        if (RUNNING == RUNNING_USE) {
          // Evaluation: the statistics are constants.
          out[k] = E(g * inverse);
        } else {
          let xhat = (F(x[k]) - m) * inverse;
          out[k] = E(inverse * (g - mean_g - xhat * mean_gx));
        }
      }
    }
  }
  if (lane == 0u && MODE == MODE_BATCH) {
    grad_weight[r] = E(weight_sums.y);
    grad_bias[r] = E(weight_sums.x);
  }
}

// Layer norm's and RMS norm's affine gradients over a part of the rows: for each column j,
// the sums over the part's rows r of dy[r, j] * xhat[r, j] (the weight's) and of dy[r, j]
// (the bias's), into part_sums[part * count + j]; the caller sums the parts. Launched as
// ceil(count / 256) x parts workgroups: an invocation a column, neighbours along the row, so
// that they read neighbouring elements of each row; each row's statistics are staged once
// for the workgroup.
const COLUMNS: u32 = 256u;
var<workgroup> row_stats: array<vec2<F>, 64>;  // mean and rstd of the rows being summed

@compute @workgroup_size(256)
fn affine_gradients(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  // Unread, bound so that every binding it shares with the other entry points is the same
  // argument of each.
  _ = &weight;
  _ = &out;
  let j = wid.x * COLUMNS + lane;
  let part = wid.y;
  let first = part * q.part_rows;
  let end = min(q.rows, first + q.part_rows);
  var sums = vec2<F>(F(0));
  for (var block = first; block < end; block = block + 64u) {
    if (lane < 64u && block + lane < end) {
      var m = F(0);
      if (MODE != MODE_RMS) { m = F(mean[block + lane]); }
      row_stats[lane] = vec2<F>(m, F(rstd[block + lane]));
    }
    workgroupBarrier();
    let rows = min(64u, end - block);
    for (var i = 0u; i < rows; i = i + 1u) {
      if (j < q.count) {
        let k = (block + i) * q.row_stride + j;
        let d = F(dy[k]);
        let stats = row_stats[i];
        sums = sums + vec2<F>(d * ((F(x[k]) - stats.x) * stats.y), d);
      }
    }
    workgroupBarrier();
  }
  if (j < q.count) { part_sums[part * q.count + j] = sums; }
}
