// atomicStore, atomicExchange and atomicLoad on one storage cell, in one workgroup of 64.
// Invocation 0 stores 1000; after a barrier every invocation swaps in its own id + 1 and
// records the value it took out; after another barrier invocation 0 records what is left.
// Whatever the order, the 65 recorded values are {1000, 1, 2, ..., 64}.

@group(0) @binding(0) var<storage, read_write> cell: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> seen: array<u32, 65>;

@compute @workgroup_size(64)
fn exchange(@builtin(local_invocation_index) l: u32) {
    if l == 0u {
        atomicStore(&cell, 1000u);
    }
    storageBarrier();
    seen[l] = atomicExchange(&cell, l + 1u);
    storageBarrier();
    if l == 0u {
        seen[64] = atomicLoad(&cell);
    }
}
