var<immediate> v: vec3<f32>;
@group(0) @binding(0) var<storage, read_write> d: array<vec3<f32>>;
@group(0) @binding(1) var<storage, read_write> one: vec3<f32>;
@group(0) @binding(2) var<storage, read_write> m: mat2x2<f32>;
@group(0) @binding(3) var<storage, read_write> fixed: array<vec3<f32>, 4>;
@compute @workgroup_size(1)
fn vector_block(@builtin(global_invocation_id) id: vec3<u32>) {
  d[id.x + 64u] = v; one = v.zyx; m[1] = v.xy; fixed[id.x % 4u] = d[0];
  var k = v; k[id.x] = 3.0; d[id.x + 128u][id.y] = k.x;
  let w = fixed; d[id.x + 256u] = w[id.z];
}
