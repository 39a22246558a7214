// The fused cells of recurrent networks, which PyTorch's LSTM and GRU call on an accelerator:
// one invocation per unit (batch row b, hidden unit j) computes every gate of that unit from the
// input's and the hidden state's gate pre-activations, forward and backward, in F. Gates are
// stored side by side in a row: [input, forget, cell, output] for the LSTM (4 H wide), [reset,
// input, new] for the GRU (3 H wide). The workspaces hold what the backward passes need, as
// PyTorch's CUDA cells do: the LSTM's four activated gates, the GRU's reset, input and new
// gates, the previous hidden state and the hidden state's new-gate pre-activation.
//
// Each entry point binds its own tensors, from binding 0 up.
//
// Run one by itself (README.md): cat lib/float_f32.wgsl rnn.wgsl | xhal run - -e lstm_cell ...

alias E = f32;  // the elements of the tensors' memory
alias F = f32;  // what the gates are computed in

override HAS_BIAS: bool = false;

struct Cell {
  batch: u32,
  hidden: u32,  // H
  pad0: u32,
  pad1: u32,
}
var<immediate> q: Cell;

fn sigmoid(x: F) -> F { return F(1) / (F(1) + xexp(-x)); }

fn unit(gid: vec3<u32>, groups: vec3<u32>) -> u32 { return gid.x + gid.y * groups.x * 64u; }

// --- LSTM, forward ---
@group(0) @binding(0) var<storage, read> lstm_input_gates: array<E>;
@group(0) @binding(1) var<storage, read> lstm_hidden_gates: array<E>;
@group(0) @binding(2) var<storage, read> lstm_cx: array<E>;
@group(0) @binding(3) var<storage, read> lstm_input_bias: array<E>;
@group(0) @binding(4) var<storage, read> lstm_hidden_bias: array<E>;
@group(0) @binding(5) var<storage, read_write> lstm_hy: array<E>;
@group(0) @binding(6) var<storage, read_write> lstm_cy: array<E>;
@group(0) @binding(7) var<storage, read_write> lstm_workspace: array<E>;

fn lstm_gate(b: u32, gate: u32, j: u32) -> F {
  let k = b * 4u * q.hidden + gate * q.hidden + j;
  var v = F(lstm_input_gates[k]) + F(lstm_hidden_gates[k]);
  if (HAS_BIAS) { v = v + F(lstm_input_bias[gate * q.hidden + j]) + F(lstm_hidden_bias[gate * q.hidden + j]); }
  return v;
}

@compute @workgroup_size(64)
fn lstm_cell(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = unit(gid, groups);
  if (e >= q.batch * q.hidden) { return; }
  let b = e / q.hidden;
  let j = e % q.hidden;
  let input_gate = sigmoid(lstm_gate(b, 0u, j));
  let forget_gate = sigmoid(lstm_gate(b, 1u, j));
  let cell_gate = xtanh(lstm_gate(b, 2u, j));
  let output_gate = sigmoid(lstm_gate(b, 3u, j));
  let cy = forget_gate * F(lstm_cx[e]) + input_gate * cell_gate;
  lstm_cy[e] = E(cy);
  lstm_hy[e] = E(output_gate * xtanh(cy));
  let w = b * 4u * q.hidden + j;
  lstm_workspace[w] = E(input_gate);
  lstm_workspace[w + q.hidden] = E(forget_gate);
  lstm_workspace[w + 2u * q.hidden] = E(cell_gate);
  lstm_workspace[w + 3u * q.hidden] = E(output_gate);
}

// --- LSTM, backward: the gates' gradient (4 H wide) and the previous cell state's ---
@group(0) @binding(0) var<storage, read> lstm_grad_hy: array<E>;   // zeros where PyTorch gives none
@group(0) @binding(1) var<storage, read> lstm_grad_cy: array<E>;
@group(0) @binding(2) var<storage, read> lstm_back_cx: array<E>;
@group(0) @binding(3) var<storage, read> lstm_back_cy: array<E>;
@group(0) @binding(4) var<storage, read> lstm_back_workspace: array<E>;
@group(0) @binding(5) var<storage, read_write> lstm_grad_gates: array<E>;
@group(0) @binding(6) var<storage, read_write> lstm_grad_cx: array<E>;

@compute @workgroup_size(64)
fn lstm_cell_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = unit(gid, groups);
  if (e >= q.batch * q.hidden) { return; }
  let b = e / q.hidden;
  let j = e % q.hidden;
  let w = b * 4u * q.hidden + j;
  let input_gate = F(lstm_back_workspace[w]);
  let forget_gate = F(lstm_back_workspace[w + q.hidden]);
  let cell_gate = F(lstm_back_workspace[w + 2u * q.hidden]);
  let output_gate = F(lstm_back_workspace[w + 3u * q.hidden]);
  let grad_hy = F(lstm_grad_hy[e]);
  let tanh_cy = xtanh(F(lstm_back_cy[e]));
  let grad_output_gate = grad_hy * tanh_cy * (F(1) - output_gate) * output_gate;
  let grad_cy = grad_hy * output_gate * (F(1) - tanh_cy * tanh_cy) + F(lstm_grad_cy[e]);
  let grad_input_gate = grad_cy * cell_gate * (F(1) - input_gate) * input_gate;
  let grad_forget_gate = grad_cy * F(lstm_back_cx[e]) * (F(1) - forget_gate) * forget_gate;
  let grad_cell_gate = grad_cy * input_gate * (F(1) - cell_gate * cell_gate);
  lstm_grad_gates[w] = E(grad_input_gate);
  lstm_grad_gates[w + q.hidden] = E(grad_forget_gate);
  lstm_grad_gates[w + 2u * q.hidden] = E(grad_cell_gate);
  lstm_grad_gates[w + 3u * q.hidden] = E(grad_output_gate);
  lstm_grad_cx[e] = E(grad_cy * forget_gate);
}

// --- GRU, forward ---
@group(0) @binding(0) var<storage, read> gru_input_gates: array<E>;
@group(0) @binding(1) var<storage, read> gru_hidden_gates: array<E>;
@group(0) @binding(2) var<storage, read> gru_hx: array<E>;
@group(0) @binding(3) var<storage, read> gru_input_bias: array<E>;
@group(0) @binding(4) var<storage, read> gru_hidden_bias: array<E>;
@group(0) @binding(5) var<storage, read_write> gru_hy: array<E>;
@group(0) @binding(6) var<storage, read_write> gru_workspace: array<E>;  // 5 H wide

fn gru_input(b: u32, gate: u32, j: u32) -> F {
  var v = F(gru_input_gates[b * 3u * q.hidden + gate * q.hidden + j]);
  if (HAS_BIAS) { v = v + F(gru_input_bias[gate * q.hidden + j]); }
  return v;
}

fn gru_hidden(b: u32, gate: u32, j: u32) -> F {
  var v = F(gru_hidden_gates[b * 3u * q.hidden + gate * q.hidden + j]);
  if (HAS_BIAS) { v = v + F(gru_hidden_bias[gate * q.hidden + j]); }
  return v;
}

@compute @workgroup_size(64)
fn gru_cell(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = unit(gid, groups);
  if (e >= q.batch * q.hidden) { return; }
  let b = e / q.hidden;
  let j = e % q.hidden;
  let reset_gate = sigmoid(gru_input(b, 0u, j) + gru_hidden(b, 0u, j));
  let input_gate = sigmoid(gru_input(b, 1u, j) + gru_hidden(b, 1u, j));
  let hidden_new = gru_hidden(b, 2u, j);
  let new_gate = xtanh(gru_input(b, 2u, j) + reset_gate * hidden_new);
  let hx = F(gru_hx[e]);
  gru_hy[e] = E(new_gate + input_gate * (hx - new_gate));
  let w = b * 5u * q.hidden + j;
  gru_workspace[w] = E(reset_gate);
  gru_workspace[w + q.hidden] = E(input_gate);
  gru_workspace[w + 2u * q.hidden] = E(new_gate);
  gru_workspace[w + 3u * q.hidden] = E(hx);
  gru_workspace[w + 4u * q.hidden] = E(hidden_new);
}

// --- GRU, backward: the input's and the hidden state's gate gradients (3 H wide), and the
// previous hidden state's ---
@group(0) @binding(0) var<storage, read> gru_grad_hy: array<E>;
@group(0) @binding(1) var<storage, read> gru_back_workspace: array<E>;
@group(0) @binding(2) var<storage, read_write> gru_grad_input_gates: array<E>;
@group(0) @binding(3) var<storage, read_write> gru_grad_hidden_gates: array<E>;
@group(0) @binding(4) var<storage, read_write> gru_grad_hx: array<E>;

@compute @workgroup_size(64)
fn gru_cell_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = unit(gid, groups);
  if (e >= q.batch * q.hidden) { return; }
  let b = e / q.hidden;
  let j = e % q.hidden;
  let w = b * 5u * q.hidden + j;
  let reset_gate = F(gru_back_workspace[w]);
  let input_gate = F(gru_back_workspace[w + q.hidden]);
  let new_gate = F(gru_back_workspace[w + 2u * q.hidden]);
  let hx = F(gru_back_workspace[w + 3u * q.hidden]);
  let hidden_new = F(gru_back_workspace[w + 4u * q.hidden]);
  let grad_hy = F(gru_grad_hy[e]);
  let grad_input_gate = grad_hy * (hx - new_gate) * (F(1) - input_gate) * input_gate;
  let grad_new_input = grad_hy * (F(1) - input_gate) * (F(1) - new_gate * new_gate);
  let grad_new_hidden = grad_new_input * reset_gate;
  let grad_reset_gate = grad_new_input * hidden_new * (F(1) - reset_gate) * reset_gate;
  let g = b * 3u * q.hidden + j;
  gru_grad_input_gates[g] = E(grad_reset_gate);
  gru_grad_input_gates[g + q.hidden] = E(grad_input_gate);
  gru_grad_input_gates[g + 2u * q.hidden] = E(grad_new_input);
  gru_grad_hidden_gates[g] = E(grad_reset_gate);
  gru_grad_hidden_gates[g + q.hidden] = E(grad_input_gate);
  gru_grad_hidden_gates[g + 2u * q.hidden] = E(grad_new_hidden);
  gru_grad_hx[e] = E(grad_hy * input_gate);
}
