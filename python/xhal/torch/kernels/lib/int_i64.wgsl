// Integer helpers for kernels that compute in `alias I = i64;` (the kernel declares the alias).

// A scalar the host passes: the i64's bits, low word first.
fn int_from_bits(lo: u32, hi: u32) -> I { return bitcast<i64>((u64(hi) << 32u) | u64(lo)); }
