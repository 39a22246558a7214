// Integer helpers for kernels that compute in `alias I = i32;` (the kernel declares the alias).

// A scalar the host passes: the i32's bits in `lo`.
fn int_from_bits(lo: u32, hi: u32) -> I { return bitcast<i32>(lo); }
