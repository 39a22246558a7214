var<immediate> n: u32;
@group(0) @binding(0) var<storage, read_write> d: array<u32>;
@compute @workgroup_size(1)
fn scalar_block() { d[0] = n; }
