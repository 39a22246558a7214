@group(0) @binding(0) var<storage, read_write> cell: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32, 6>;

@compute @workgroup_size(1)
fn probe() {
    let miss = atomicCompareExchangeWeak(&cell, 3u, 9u);
    out[0] = miss.old_value;
    out[1] = u32(miss.exchanged);
    out[2] = atomicLoad(&cell);
    // A weak exchange may fail spuriously while the value matches: retry a bounded number
    // of times.
    var old = 0u;
    var exchanged = false;
    for (var tries = 0u; tries < 1000u; tries++) {
        let hit = atomicCompareExchangeWeak(&cell, 5u, 9u);
        old = hit.old_value;
        exchanged = hit.exchanged;
        if exchanged || old != 5u {
            break;
        }
    }
    out[3] = old;
    out[4] = u32(exchanged);
    out[5] = atomicLoad(&cell);
}
