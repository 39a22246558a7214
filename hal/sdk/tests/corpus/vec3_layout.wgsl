// vec3 in storage: array<vec3<f32>> has a 16-byte stride, and in a struct a vec3 takes 12
// bytes with a following f32 packed into its last 4 bytes of alignment padding:
//   struct Particle { position: vec3<f32> @ 0, mass: f32 @ 12, velocity: vec3<f32> @ 16 } size 32
// Stores to a vec3 must not touch the 4 bytes of padding after it (the host fills them with
// a sentinel that must survive).

struct Particle {
    position: vec3<f32>,
    mass: f32,
    velocity: vec3<f32>,
}

@group(0) @binding(0) var<storage, read> points: array<vec3<f32>>;
@group(0) @binding(1) var<storage, read_write> particles: array<Particle>;
@group(0) @binding(2) var<storage, read_write> out: array<vec3<f32>>;

@compute @workgroup_size(16)
fn vec3_layout(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&points) {
        return;
    }
    let p = points[i];
    out[i] = p.zxy + vec3<f32>(1.0);
    particles[i].position += p;
    particles[i].velocity = p * particles[i].mass;
    particles[i].mass = f32(i);
}
