// state[0]: a running maximum; state[1]: the next free slot. Weak exchanges may fail
// spuriously, so every loop retries with the value it saw.
@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>, 2>;
@group(0) @binding(2) var<storage, read_write> slots: array<u32>;

@compute @workgroup_size(64)
fn cas(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&values) {
        return;
    }
    let v = values[id.x];
    var seen = atomicLoad(&state[0]);
    while seen < v {
        let result = atomicCompareExchangeWeak(&state[0], seen, v);
        if result.exchanged {
            break;
        }
        seen = result.old_value;
    }
    var slot = atomicLoad(&state[1]);
    loop {
        let result = atomicCompareExchangeWeak(&state[1], slot, slot + 1u);
        if result.exchanged {
            break;
        }
        slot = result.old_value;
    }
    slots[min(slot, arrayLength(&slots) - 1u)] = id.x + 1u;
}
