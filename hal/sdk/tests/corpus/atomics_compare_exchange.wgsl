// atomicCompareExchangeWeak in retry loops, the way kernels build atomics the hardware does
// not have, under contention from several workgroups:
//   state[0]: a wrapping add,
//   state[1]: a saturating add, capped at 40000 (order-independent for unsigned addends),
//   state[2]: a slot allocator; each invocation claims a slot and writes its id + 1 there.
// A weak exchange may fail spuriously, so each loop retries until `exchanged`.

@group(0) @binding(0) var<storage, read> values: array<u32>;
@group(0) @binding(1) var<storage, read_write> state: array<atomic<u32>, 3>;
@group(0) @binding(2) var<storage, read_write> slots: array<u32>;

const CAP: u32 = 40000u;

@compute @workgroup_size(64)
fn cas(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = values[id.x];

    var old = atomicLoad(&state[0]);
    loop {
        let result = atomicCompareExchangeWeak(&state[0], old, old + v);
        if result.exchanged {
            break;
        }
        old = result.old_value;
    }

    var current = atomicLoad(&state[1]);
    loop {
        let next = min(current + v, CAP);
        let result = atomicCompareExchangeWeak(&state[1], current, next);
        if result.exchanged {
            break;
        }
        current = result.old_value;
    }

    var slot = atomicLoad(&state[2]);
    loop {
        let result = atomicCompareExchangeWeak(&state[2], slot, slot + 1u);
        if result.exchanged {
            break;
        }
        slot = result.old_value;
    }
    slots[slot] = id.x + 1u;
}
