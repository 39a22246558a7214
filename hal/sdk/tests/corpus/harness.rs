//! The table-driven harness of the WGSL corpus: a [`Case`] names its kernel file, entry
//! point, buffers (in binding order), scalars (the members of the kernel's `var<immediate>`
//! block), workgroup count and the features it needs, plus a Rust reference that computes
//! the expected contents of the buffers it checks from the buffers' initial contents.
//! [`run`] loads the kernel on a device, launches it once, reads every buffer back and
//! compares, reporting every mismatch with its index, the observed and the expected value.

use std::ops::Range;
use xhal::{Buffer, Device, ErrorKind, Features, Launch};

/// The contents of one buffer, typed as the kernel sees its elements. `F16` holds IEEE
/// binary16 bit patterns (Rust has no stable `f16`).
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    F16(Vec<u16>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

impl Data {
    fn type_name(&self) -> &'static str {
        match self {
            Data::U32(_) => "u32",
            Data::I32(_) => "i32",
            Data::F32(_) => "f32",
            Data::F16(_) => "f16",
            Data::F64(_) => "f64",
            Data::I64(_) => "i64",
        }
    }

    fn element_size(&self) -> usize {
        match self {
            Data::F16(_) => 2,
            Data::U32(_) | Data::I32(_) | Data::F32(_) => 4,
            Data::F64(_) | Data::I64(_) => 8,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::U32(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F16(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        match self {
            Data::U32(v) => bytemuck::cast_slice(v).to_vec(),
            Data::I32(v) => bytemuck::cast_slice(v).to_vec(),
            Data::F32(v) => bytemuck::cast_slice(v).to_vec(),
            Data::F16(v) => bytemuck::cast_slice(v).to_vec(),
            Data::F64(v) => bytemuck::cast_slice(v).to_vec(),
            Data::I64(v) => bytemuck::cast_slice(v).to_vec(),
        }
    }

    /// Bytes read back from the device, typed like `self`.
    fn same_type_from(&self, bytes: &[u8]) -> Data {
        fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
            bytes
                .chunks_exact(std::mem::size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect()
        }
        match self {
            Data::U32(_) => Data::U32(cast(bytes)),
            Data::I32(_) => Data::I32(cast(bytes)),
            Data::F32(_) => Data::F32(cast(bytes)),
            Data::F16(_) => Data::F16(cast(bytes)),
            Data::F64(_) => Data::F64(cast(bytes)),
            Data::I64(_) => Data::I64(cast(bytes)),
        }
    }

    fn wrong(&self, wanted: &str) -> ! {
        panic!(
            "the reference asked for {wanted} data, but the buffer holds {}",
            self.type_name()
        )
    }

    pub fn u32(&self) -> &[u32] {
        match self {
            Data::U32(v) => v,
            other => other.wrong("u32"),
        }
    }

    pub fn i32(&self) -> &[i32] {
        match self {
            Data::I32(v) => v,
            other => other.wrong("i32"),
        }
    }

    pub fn f32(&self) -> &[f32] {
        match self {
            Data::F32(v) => v,
            other => other.wrong("f32"),
        }
    }

    pub fn f16(&self) -> &[u16] {
        match self {
            Data::F16(v) => v,
            other => other.wrong("f16"),
        }
    }

    pub fn f64(&self) -> &[f64] {
        match self {
            Data::F64(v) => v,
            other => other.wrong("f64"),
        }
    }

    pub fn i64(&self) -> &[i64] {
        match self {
            Data::I64(v) => v,
            other => other.wrong("i64"),
        }
    }

    /// Element `index` as text, floats with their bit pattern so that ULP-level and NaN
    /// differences are visible.
    fn show(&self, index: usize) -> String {
        match self {
            Data::U32(v) => format!("{} ({:#010x})", v[index], v[index]),
            Data::I32(v) => format!("{} ({:#010x})", v[index], v[index]),
            Data::F32(v) => format!("{:e} ({:#010x})", v[index], v[index].to_bits()),
            Data::F16(v) => format!("{:e} ({:#06x})", f16_to_f32(v[index]), v[index]),
            Data::F64(v) => format!("{:e} ({:#018x})", v[index], v[index].to_bits()),
            Data::I64(v) => format!("{} ({:#018x})", v[index], v[index]),
        }
    }
}

/// How observed values must match the reference.
#[derive(Clone, Debug, PartialEq)]
pub enum Tolerance {
    /// Integers equal. Floats equal as values: NaN matches any NaN, and +0 matches -0
    /// (WGSL lets an implementation ignore the sign of a zero).
    Exact,
    /// Floats with identical bit patterns (bit reinterpretation, NaN payloads included).
    Bits,
    /// Floats at most this many representable values apart (ULP steps between the observed
    /// value and the reference rounded to the buffer's type). NaN matches NaN; an infinity
    /// matches only itself.
    Ulps(u64),
    /// Floats within this absolute distance of the reference. NaN matches NaN.
    Absolute(f64),
    /// A different tolerance for every element (for bounds that depend on the input).
    PerElement(Vec<Tolerance>),
    /// The same values in any order (for results whose order depends on scheduling, like
    /// the old values that atomic exchanges return).
    Multiset,
}

/// What one buffer must hold after the launch.
pub struct Expect {
    pub buffer: usize,
    pub values: Data,
    pub tolerance: Tolerance,
}

impl Expect {
    pub fn exact(buffer: usize, values: Data) -> Expect {
        Expect {
            buffer,
            values,
            tolerance: Tolerance::Exact,
        }
    }

    pub fn bits(buffer: usize, values: Data) -> Expect {
        Expect {
            buffer,
            values,
            tolerance: Tolerance::Bits,
        }
    }

    pub fn ulps(buffer: usize, values: Data, ulps: u64) -> Expect {
        Expect {
            buffer,
            values,
            tolerance: Tolerance::Ulps(ulps),
        }
    }

    pub fn per_element(buffer: usize, values: Data, tolerances: Vec<Tolerance>) -> Expect {
        assert_eq!(values.len(), tolerances.len(), "one tolerance per element");
        Expect {
            buffer,
            values,
            tolerance: Tolerance::PerElement(tolerances),
        }
    }

    pub fn multiset(buffer: usize, values: Data) -> Expect {
        Expect {
            buffer,
            values,
            tolerance: Tolerance::Multiset,
        }
    }
}

/// A buffer argument: its initial contents and, for a view, the elements bound.
pub struct Arg {
    pub data: Data,
    pub view: Option<Range<usize>>,
}

type Reference = Box<dyn Fn(&[Data]) -> Vec<Expect>>;

/// One corpus case.
pub struct Case {
    /// File name under `tests/corpus/`.
    pub file: &'static str,
    pub source: &'static str,
    pub entry: &'static str,
    pub workgroups: [u32; 3],
    pub buffers: Vec<Arg>,
    /// The bytes of each member of the kernel's `var<immediate>` block, in order.
    pub scalars: Vec<Vec<u8>>,
    /// Features the kernel needs; a device without them must refuse the module.
    pub needs: Features,
    pub reference: Option<Reference>,
}

impl Case {
    pub fn new((file, source): (&'static str, &'static str), entry: &'static str) -> Case {
        Case {
            file,
            source,
            entry,
            workgroups: [1, 1, 1],
            buffers: Vec::new(),
            scalars: Vec::new(),
            needs: Features(0),
            reference: None,
        }
    }

    pub fn workgroups(mut self, x: u32, y: u32, z: u32) -> Case {
        self.workgroups = [x, y, z];
        self
    }

    /// The next buffer argument, bound whole.
    pub fn buffer(mut self, data: Data) -> Case {
        self.buffers.push(Arg { data, view: None });
        self
    }

    /// The next buffer argument, bound as a view of elements `range`.
    pub fn view(mut self, data: Data, range: Range<usize>) -> Case {
        self.buffers.push(Arg {
            data,
            view: Some(range),
        });
        self
    }

    /// The next member of the `var<immediate>` block.
    pub fn scalar<T: bytemuck::Pod>(mut self, value: T) -> Case {
        self.scalars.push(bytemuck::bytes_of(&value).to_vec());
        self
    }

    pub fn needs(mut self, features: Features) -> Case {
        self.needs = features;
        self
    }

    /// The reference: from the buffers' initial contents (in binding order), what the
    /// checked buffers must hold afterwards.
    pub fn expect(mut self, reference: impl Fn(&[Data]) -> Vec<Expect> + 'static) -> Case {
        self.reference = Some(Box::new(reference));
        self
    }
}

pub use crate::support::{plugin_cpu_device, static_cpu_device};

/// Runs `case` on `device` and checks every expectation; panics with every mismatch.
pub fn run(device: &Device, case: &Case) {
    let what = format!("{}::{} on {}", case.file, case.entry, device.label());
    if !device.has_features(case.needs) {
        // A device without the kernel's features must refuse it clearly: that is the
        // checked outcome on such a device.
        let error = device.load_wgsl(case.source).expect_err(&format!(
            "{what}: the device lacks {:?}, so loading must fail",
            case.needs.names()
        ));
        assert_eq!(error.kind(), ErrorKind::Unsupported, "{what}: {error}");
        for name in case.needs.names() {
            assert!(
                error.message().contains(name),
                "{what}: the error must name `{name}`: {error}"
            );
        }
        return;
    }
    let module = device
        .load_wgsl(case.source)
        .unwrap_or_else(|error| panic!("{what}: loading failed: {error}"));
    let kernel = module
        .kernel(case.entry)
        .unwrap_or_else(|error| panic!("{what}: no kernel: {error}"));
    let stream = device.create_stream().expect("stream");
    let buffers: Vec<Buffer<u8>> = case
        .buffers
        .iter()
        .map(|arg| {
            device
                .alloc_from(&stream, &arg.data.to_bytes())
                .unwrap_or_else(|error| panic!("{what}: allocating a buffer: {error}"))
        })
        .collect();
    let [x, y, z] = case.workgroups;
    let mut launch = Launch::new(&kernel).workgroups(x, y, z);
    for (buffer, arg) in buffers.iter().zip(&case.buffers) {
        launch = match &arg.view {
            None => launch.buffer(buffer),
            Some(range) => {
                let size = arg.data.element_size();
                launch.buffer(buffer.slice(range.start * size..range.end * size))
            }
        };
    }
    for bytes in &case.scalars {
        launch = launch.scalar_bytes(bytes, bytes.len().next_power_of_two().clamp(1, 16));
    }
    stream
        .launch(&launch)
        .unwrap_or_else(|error| panic!("{what}: launch failed: {error}"));
    stream
        .synchronize()
        .unwrap_or_else(|error| panic!("{what}: the kernel failed: {error}"));
    let outputs: Vec<Data> = buffers
        .iter()
        .zip(&case.buffers)
        .map(|(buffer, arg)| arg.data.same_type_from(&stream.read_to_vec(buffer).expect("read back")))
        .collect();
    let inputs: Vec<Data> = case.buffers.iter().map(|arg| arg.data.clone()).collect();
    let reference = case.reference.as_ref().expect("every case has a reference");
    let expectations = reference(&inputs);
    assert!(!expectations.is_empty(), "{what}: the reference checks nothing");
    let mut report = Vec::new();
    for expect in &expectations {
        compare(&outputs[expect.buffer], expect, &mut report);
    }
    assert!(
        report.is_empty(),
        "{what}: {} problem(s)\n{}",
        report.len(),
        report.join("\n")
    );
}

/// Appends a line per mismatch (at most 24 per buffer, then a count) to `report`.
fn compare(observed: &Data, expect: &Expect, report: &mut Vec<String>) {
    let buffer = expect.buffer;
    if observed.len() != expect.values.len() {
        report.push(format!(
            "buffer {buffer}: the reference describes {} elements, the buffer has {}",
            expect.values.len(),
            observed.len()
        ));
        return;
    }
    if expect.tolerance == Tolerance::Multiset {
        let (mut got, mut want) = (sortable(observed), sortable(&expect.values));
        got.sort_unstable();
        want.sort_unstable();
        if got != want {
            report.push(format!(
                "buffer {buffer}: expected the values {want:?} in any order, got {got:?} (sorted)"
            ));
        }
        return;
    }
    let mut mismatches = 0;
    for index in 0..observed.len() {
        let tolerance = match &expect.tolerance {
            Tolerance::PerElement(each) => &each[index],
            other => other,
        };
        if !matches(observed, &expect.values, index, tolerance) {
            mismatches += 1;
            if mismatches <= 24 {
                report.push(format!(
                    "buffer {buffer}[{index}]: got {}, expected {} ({tolerance:?})",
                    observed.show(index),
                    expect.values.show(index)
                ));
            }
        }
    }
    if mismatches > 24 {
        report.push(format!("buffer {buffer}: {} more mismatches", mismatches - 24));
    }
}

/// Integer-like elements as i128, for the multiset comparison.
fn sortable(data: &Data) -> Vec<i128> {
    match data {
        Data::U32(v) => v.iter().map(|&x| x.into()).collect(),
        Data::I32(v) => v.iter().map(|&x| x.into()).collect(),
        Data::I64(v) => v.iter().map(|&x| x.into()).collect(),
        Data::F32(v) => v.iter().map(|&x| x.to_bits().into()).collect(),
        Data::F16(v) => v.iter().map(|&x| x.into()).collect(),
        Data::F64(v) => v.iter().map(|&x| x.to_bits().into()).collect(),
    }
}

fn matches(observed: &Data, expected: &Data, index: usize, tolerance: &Tolerance) -> bool {
    match (observed, expected) {
        (Data::U32(got), Data::U32(want)) => got[index] == want[index],
        (Data::I32(got), Data::I32(want)) => got[index] == want[index],
        (Data::I64(got), Data::I64(want)) => got[index] == want[index],
        (Data::F32(got), Data::F32(want)) => {
            let (got, want) = (got[index], want[index]);
            float_matches(
                got.into(),
                want.into(),
                got.to_bits().into(),
                want.to_bits().into(),
                ordered_f32(got) - ordered_f32(want),
                tolerance,
            )
        }
        (Data::F16(got), Data::F16(want)) => {
            let (got, want) = (got[index], want[index]);
            float_matches(
                f16_to_f32(got).into(),
                f16_to_f32(want).into(),
                got.into(),
                want.into(),
                ordered_f16(got) - ordered_f16(want),
                tolerance,
            )
        }
        (Data::F64(got), Data::F64(want)) => {
            let (got, want) = (got[index], want[index]);
            float_matches(
                got,
                want,
                got.to_bits(),
                want.to_bits(),
                ordered_f64(got).saturating_sub(ordered_f64(want)),
                tolerance,
            )
        }
        _ => false,
    }
}

fn float_matches(got: f64, want: f64, got_bits: u64, want_bits: u64, steps: i64, tolerance: &Tolerance) -> bool {
    if *tolerance == Tolerance::Bits {
        return got_bits == want_bits;
    }
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    match tolerance {
        Tolerance::Ulps(n) => {
            if got.is_infinite() || want.is_infinite() {
                got == want
            } else {
                steps.unsigned_abs() <= *n
            }
        }
        Tolerance::Absolute(bound) => got == want || (got - want).abs() <= *bound,
        _ => got == want,
    }
}

/// Maps a float's bits onto integers in the floats' order, so that the difference of two
/// mapped values counts the representable values between them (+0 and -0 both map to 0).
fn ordered_f32(x: f32) -> i64 {
    let bits = x.to_bits();
    let magnitude = i64::from(bits & 0x7fff_ffff);
    if bits >> 31 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

fn ordered_f16(x: u16) -> i64 {
    let magnitude = i64::from(x & 0x7fff);
    if x >> 15 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

fn ordered_f64(x: f64) -> i64 {
    let bits = x.to_bits();
    let magnitude = (bits & 0x7fff_ffff_ffff_ffff) as i64;
    if bits >> 63 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// IEEE binary16 bits to f32 (exact: every binary16 value is an f32).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits >> 15 == 1 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f32::from(bits & 0x3ff);
    match exponent {
        0 => sign * fraction * 2f32.powi(-24),
        31 if fraction == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + fraction / 1024.0) * 2f32.powi(exponent - 15),
    }
}

/// f64 to the nearest IEEE binary16 (ties to even), overflowing to infinity. Rounding a
/// value that came from one f32 or f64 operation on binary16 inputs gives the correctly
/// rounded binary16 result: f32's 24-bit significand is at least 2 × 11 + 2 bits, so the
/// double rounding is innocuous for +, -, ×, ÷ and sqrt.
pub fn f16_from_f64(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let magnitude = x.abs();
    if magnitude == 0.0 {
        return sign;
    }
    // Work in units of the smallest subnormal, 2^-24: below 2^-14 the spacing is one unit,
    // above it the spacing of the binade.
    // The binade of a normal f64, read from its exponent field (exact, unlike log2).
    let exponent = ((magnitude.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let exponent = exponent.max(-14);
    let spacing = 2f64.powi(exponent - 10);
    let scaled = magnitude / spacing; // exact: a power-of-two scaling
    let mut units = scaled.round_ties_even();
    let mut exponent = exponent;
    if units >= 2048.0 {
        units /= 2.0;
        exponent += 1;
    }
    if exponent > 15 {
        return sign | 0x7c00;
    }
    let units = units as u16;
    if units < 1024 {
        // subnormal (exponent is -14 here)
        return sign | units;
    }
    sign | (((exponent + 15) as u16) << 10) | (units - 1024)
}

/// A small deterministic generator (SplitMix64), so every run sees the same inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    pub fn i32(&mut self) -> i32 {
        self.u32() as i32
    }

    /// Uniform in `lo..hi`.
    pub fn below(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.u32() % (hi - lo)
    }

    /// Uniform in `[lo, hi)`.
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// Uniform in `[lo, hi)`, as an f64 with every bit random.
    pub fn f64(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    /// A multiple of `1 / denominator` in `[lo, hi]`: values whose sums and products stay
    /// exact in f32, for operations whose evaluation order WGSL leaves open.
    pub fn grid(&mut self, lo: i32, hi: i32, denominator: f32) -> f32 {
        let steps = ((hi - lo) as f32 * denominator) as u32 + 1;
        lo as f32 + self.below(0, steps) as f32 / denominator
    }
}
