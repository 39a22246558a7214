// Integer helpers for kernels that compute in `alias I = i32;` (the kernel declares the alias).

// A scalar the host passes: the i32's bits in `lo`.
fn int_from_bits(lo: u32, hi: u32) -> I { return bitcast<i32>(lo); }

// start + (the word hi:lo modulo range), wrapping, for random integers (random.wgsl); a range of 0
// is the whole 2^32. Only the low words count: an i32 draw takes one word.
fn int_from_words(lo: u32, hi: u32, start: vec2<u32>, range: vec2<u32>) -> I {
  let drawn = select(lo % range.x, lo, range.x == 0u);
  return bitcast<i32>(start.x + drawn);
}
