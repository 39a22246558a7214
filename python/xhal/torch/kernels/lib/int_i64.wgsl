// Integer helpers for kernels that compute in `alias I = i64;` (the kernel declares the alias).

// A scalar the host passes: the i64's bits, low word first.
fn int_from_bits(lo: u32, hi: u32) -> I { return bitcast<i64>((u64(hi) << 32u) | u64(lo)); }

// start + (the 64-bit word hi:lo modulo range), wrapping, for random integers (random.wgsl); a
// range of 0 is the whole 2^64.
fn int_from_words(lo: u32, hi: u32, start: vec2<u32>, range: vec2<u32>) -> I {
  let word = (u64(hi) << 32u) | u64(lo);
  let span = (u64(range.y) << 32u) | u64(range.x);
  let drawn = select(word % span, word, span == u64(0));
  return bitcast<i64>(((u64(start.y) << 32u) | u64(start.x)) + drawn);
}
