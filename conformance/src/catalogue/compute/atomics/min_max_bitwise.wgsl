@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> unsigned_results: array<atomic<u32>, 5>;
@group(0) @binding(2) var<storage, read_write> signed_results: array<atomic<i32>, 2>;

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    atomicMin(&unsigned_results[0], v);
    atomicMax(&unsigned_results[1], v);
    atomicAnd(&unsigned_results[2], v);
    atomicOr(&unsigned_results[3], v);
    atomicXor(&unsigned_results[4], v);
    atomicMin(&signed_results[0], bitcast<i32>(v));
    atomicMax(&signed_results[1], bitcast<i32>(v));
}
