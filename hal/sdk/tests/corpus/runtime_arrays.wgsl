// Runtime-sized arrays and arrayLength: a bare array bound as a view that starts 64 elements
// into its buffer, a struct whose last member is a runtime-sized array (its length counts
// the elements after the header), and the output array itself. Launched with more
// invocations than elements: each array is indexed only below its length.

struct Framed {
    count: u32,
    pad: u32,
    data: array<u32>,
}

@group(0) @binding(0) var<storage, read_write> view: array<u32>;
@group(0) @binding(1) var<storage, read_write> framed: Framed;
@group(0) @binding(2) var<storage, read_write> lengths: array<u32>;

@compute @workgroup_size(64)
fn lengths_and_views(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let n = arrayLength(&view);
    let m = arrayLength(&framed.data);
    if i == 0u {
        lengths[0] = n;
        lengths[1] = m;
        lengths[2] = arrayLength(&lengths);
    }
    if i < n {
        view[i] = view[i] * 2u + 1u;
    }
    if i < m {
        framed.data[i] += framed.count + i;
    }
}
