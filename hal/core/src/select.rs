//! Finding and choosing a device: the `XHAL_DEVICE` grammar ([`DeviceSelector`]) and the
//! [`Selector`] that code uses, with policies and requirements.
//!
//! `XHAL_DEVICE` is a comma-separated list of terms:
//!
//! ```text
//! selector := term (',' term)*          whitespace around terms is allowed
//! term     := '!'? atom
//! atom     := '*' | WORD | WORD ':' device
//! device   := '*' | INDEX | TYPEWORD
//! WORD     := [a-z][a-z0-9_-]*          a backend name, or a device-type word
//! TYPEWORD := cpu | gpu | discrete | discrete_gpu | integrated | integrated_gpu
//!           | accelerator | other
//! ```
//!
//! - A bare `WORD` matches the devices of backend `WORD` and, when `WORD` is a type word, every
//!   device of that type: `cpu` matches the `cpu` backend and any CPU; `gpu` matches integrated
//!   and discrete GPUs of every backend.
//! - `vulkan:0` is device 0 of backend `vulkan`, `vulkan:*` any of its devices, `vulkan:gpu`
//!   its GPUs.
//! - `!term` excludes whatever the term matches, wherever it appears in the list.
//! - Positive terms are an order of preference (`cuda,vulkan,cpu`) and restrict the choice to
//!   what they name. A list of only negative terms (`!cpu`) allows anything not excluded.
//!
//! Every choice explains itself: [`Selector::choose`] returns an [`Explanation`] with a verdict
//! for every candidate, and an error that lists what is present when nothing was chosen.

use crate::backend::{DeviceInfo, DeviceType, Features, KernelFormat};
use crate::error::{Error, ErrorKind, Result};
use std::ffi::OsString;
use std::fmt;

/// The environment variable read by [`Selector::from_env`].
pub const ENV_VAR: &str = "XHAL_DEVICE";

/// Longest piece of user text quoted in a message, in characters; longer text is shortened so
/// that a pasted megabyte does not become a megabyte of error message.
const QUOTE_LIMIT: usize = 64;

/// Width of the window of selector text echoed above the caret of a syntax error.
const ECHO_WIDTH: usize = 72;

// ---------------------------------------------------------------------------------------------
// The grammar's values
// ---------------------------------------------------------------------------------------------

/// A device-type word of the grammar. `discrete` and `discrete_gpu` (and the two spellings of
/// integrated) are one value: they mean the same set of devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeWord {
    Cpu,
    Gpu,
    DiscreteGpu,
    IntegratedGpu,
    Accelerator,
    Other,
}

impl TypeWord {
    /// Every spelling the grammar accepts; the order is the one error messages list.
    const SPELLINGS: [(&'static str, TypeWord); 8] = [
        ("cpu", TypeWord::Cpu),
        ("gpu", TypeWord::Gpu),
        ("discrete", TypeWord::DiscreteGpu),
        ("discrete_gpu", TypeWord::DiscreteGpu),
        ("integrated", TypeWord::IntegratedGpu),
        ("integrated_gpu", TypeWord::IntegratedGpu),
        ("accelerator", TypeWord::Accelerator),
        ("other", TypeWord::Other),
    ];

    fn from_word(word: &str) -> Option<TypeWord> {
        TypeWord::SPELLINGS
            .iter()
            .find(|(spelling, _)| *spelling == word)
            .map(|(_, value)| *value)
    }

    /// The spelling `Display` writes: the long forms, the same names as [`DeviceType::name`].
    fn canonical(self) -> &'static str {
        match self {
            TypeWord::Cpu => "cpu",
            TypeWord::Gpu => "gpu",
            TypeWord::DiscreteGpu => "discrete_gpu",
            TypeWord::IntegratedGpu => "integrated_gpu",
            TypeWord::Accelerator => "accelerator",
            TypeWord::Other => "other",
        }
    }

    fn matches(self, device_type: DeviceType) -> bool {
        type_bit(device_type) & self.mask() != 0
    }

    /// The device types this word covers, as a set of [`type_bit`]s.
    fn mask(self) -> u8 {
        match self {
            TypeWord::Cpu => type_bit(DeviceType::Cpu),
            TypeWord::Gpu => type_bit(DeviceType::IntegratedGpu) | type_bit(DeviceType::DiscreteGpu),
            TypeWord::DiscreteGpu => type_bit(DeviceType::DiscreteGpu),
            TypeWord::IntegratedGpu => type_bit(DeviceType::IntegratedGpu),
            TypeWord::Accelerator => type_bit(DeviceType::Accelerator),
            TypeWord::Other => type_bit(DeviceType::Other),
        }
    }
}

/// Device types as a 5-bit set, so that [`DeviceSelector::may_use_backend`] can prove that a
/// set of terms covers every type a backend could report.
fn type_bit(device_type: DeviceType) -> u8 {
    match device_type {
        DeviceType::Cpu => 1,
        DeviceType::IntegratedGpu => 2,
        DeviceType::DiscreteGpu => 4,
        DeviceType::Accelerator => 8,
        DeviceType::Other => 16,
    }
}

/// Every device type.
const ALL_TYPES: u8 = 31;

/// The part after `WORD:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DevicePattern {
    Any,
    Index(u32),
    Type(TypeWord),
}

/// What one term names, before negation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    /// `*`: every device.
    Any,
    /// A bare word: a backend, and also a device type when the word is a type word. The word
    /// keeps its spelling (`discrete` stays `discrete`) because it is also a backend name.
    Word {
        word: String,
        device_type: Option<TypeWord>,
    },
    /// `backend:device`.
    Device { backend: String, device: DevicePattern },
}

/// What one term can match among the devices of one backend whose devices are not known yet.
struct Reach {
    /// Device types it may match.
    types: u8,
    /// True when it matches every device of those types, whatever its index.
    every_index: bool,
}

impl Atom {
    fn matches(&self, backend: &str, index: u32, device_type: DeviceType) -> bool {
        match self {
            Atom::Any => true,
            Atom::Word {
                word,
                device_type: word_type,
            } => word == backend || word_type.is_some_and(|t| t.matches(device_type)),
            Atom::Device { backend: named, device } => {
                named == backend
                    && match device {
                        DevicePattern::Any => true,
                        DevicePattern::Index(wanted) => *wanted == index,
                        DevicePattern::Type(t) => t.matches(device_type),
                    }
            }
        }
    }

    fn reach(&self, backend: &str) -> Reach {
        let everything = Reach {
            types: ALL_TYPES,
            every_index: true,
        };
        let nothing = Reach {
            types: 0,
            every_index: true,
        };
        match self {
            Atom::Any => everything,
            Atom::Word { word, .. } if word == backend => everything,
            Atom::Word { device_type, .. } => Reach {
                types: device_type.map_or(0, TypeWord::mask),
                every_index: true,
            },
            Atom::Device { backend: named, .. } if named != backend => nothing,
            Atom::Device { device, .. } => match device {
                DevicePattern::Any => everything,
                // Device 3 may be of any type, but it is only one device: excluding it does not
                // exclude the backend.
                DevicePattern::Index(_) => Reach {
                    types: ALL_TYPES,
                    every_index: false,
                },
                DevicePattern::Type(t) => Reach {
                    types: t.mask(),
                    every_index: true,
                },
            },
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Any => f.write_str("*"),
            Atom::Word { word, .. } => f.write_str(word),
            Atom::Device { backend, device } => match device {
                DevicePattern::Any => write!(f, "{backend}:*"),
                DevicePattern::Index(index) => write!(f, "{backend}:{index}"),
                DevicePattern::Type(t) => write!(f, "{backend}:{}", t.canonical()),
            },
        }
    }
}

/// One term of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    negated: bool,
    atom: Atom,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated {
            f.write_str("!")?;
        }
        self.atom.fmt(f)
    }
}

/// How a selector judges one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    /// Matched by the positive term with this index (0-based, counting every term).
    Term(usize),
    /// The selector has no positive terms and excludes nothing that applies.
    Allowed,
    /// Excluded by the negative term with this index.
    Excluded(usize),
    /// The selector has positive terms and none of them matches.
    NotNamed,
}

/// A parsed selector in the `XHAL_DEVICE` grammar: which devices may be used, in which order
/// of preference.
///
/// Parse with [`DeviceSelector::parse`] (or `str::parse`), or with [`DeviceSelector::parse_from`]
/// when the text comes from somewhere other than `XHAL_DEVICE`; `Display` writes the canonical
/// text, which parses back to an equal selector.
///
/// The selector remembers its [origin](DeviceSelector::origin), the name that messages give
/// its text's source. The origin takes no part in equality: two selectors are equal when they
/// have the same terms, wherever their text came from.
#[derive(Debug, Clone)]
pub struct DeviceSelector {
    terms: Vec<Term>,
    origin: String,
}

impl PartialEq for DeviceSelector {
    fn eq(&self, other: &DeviceSelector) -> bool {
        self.terms == other.terms
    }
}

impl Eq for DeviceSelector {}

impl DeviceSelector {
    /// Parses the `XHAL_DEVICE` grammar (see the [module documentation](self)); the same as
    /// [`DeviceSelector::parse_from`] with origin [`ENV_VAR`].
    ///
    /// Errors are of kind [`ErrorKind::Selection`] and name the column (counted in characters,
    /// from 1) of the problem, followed by the text and a caret under that column.
    pub fn parse(text: &str) -> Result<DeviceSelector> {
        DeviceSelector::parse_from(text, ENV_VAR)
    }

    /// Parses `text`, which came from `origin`: the name that messages give its source, such
    /// as `XHAL_DEVICE`, a command-line argument's name (`SELECTOR`) or a setting's. Parse
    /// errors, verdicts, explanations and the errors of [`Selector::choose`] name `origin`
    /// where [`DeviceSelector::parse`] would name `XHAL_DEVICE`.
    pub fn parse_from(text: &str, origin: &str) -> Result<DeviceSelector> {
        Parser::new(text, origin).selector()
    }

    /// Where the selector's text came from, as given to [`DeviceSelector::parse_from`]:
    /// [`ENV_VAR`] for [`DeviceSelector::parse`] and `str::parse`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// False only when no device of `backend` can ever be accepted by this selector, whatever
    /// devices the backend reports; the loader then skips `libxhal_<backend>.so` unloaded.
    ///
    /// The rule: a term *reaches* the device types it can match on this backend (every type for
    /// `*`, for the backend's own name and for `backend:*` or `backend:INDEX`; the word's types for
    /// a type word; none for another backend's name). The backend may be used when the types the
    /// positive terms reach (every type when there are none) are not all covered by negative
    /// terms that reach every index. `!backend:0` covers no type, because device 1 may exist, so
    /// the answer is conservative: `true` can still mean that nothing will match, but `false` is
    /// a proof.
    ///
    /// `!cpu` does return `false` for the `cpu` backend: a bare word matches every device of the
    /// backend of that name whatever type it reports, so all of them are excluded.
    pub fn may_use_backend(&self, backend: &str) -> bool {
        let mut wanted = 0u8;
        let mut excluded = 0u8;
        let mut has_positive = false;
        for term in &self.terms {
            let reach = term.atom.reach(backend);
            if term.negated {
                if reach.every_index {
                    excluded |= reach.types;
                }
            } else {
                has_positive = true;
                wanted |= reach.types;
            }
        }
        if !has_positive {
            wanted = ALL_TYPES;
        }
        wanted & !excluded != 0
    }

    /// The backends that positive terms name explicitly, in order of first appearance, without
    /// repeats: the word of every `WORD:device` term, and every bare word that is not a device
    /// type. `xhal doctor` reports those it could not load.
    pub fn named_backends(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for term in self.terms.iter().filter(|term| !term.negated) {
            let name = match &term.atom {
                Atom::Device { backend, .. } => backend,
                Atom::Word {
                    word,
                    device_type: None,
                } => word,
                _ => continue,
            };
            if !names.iter().any(|known| known == name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// True when the selector accepts device `index` of `backend`, of type `device_type`: no
    /// term excludes it, and a positive term names it or there is no positive term.
    pub fn accepts(&self, backend: &str, index: u32, device_type: DeviceType) -> bool {
        matches!(
            self.evaluate(backend, index, device_type),
            Match::Term(_) | Match::Allowed
        )
    }

    fn has_positive_terms(&self) -> bool {
        self.terms.iter().any(|term| !term.negated)
    }

    /// An exclusion wins wherever it appears in the list; otherwise the first positive term
    /// that matches decides.
    fn evaluate(&self, backend: &str, index: u32, device_type: DeviceType) -> Match {
        let mut first_positive = None;
        for (position, term) in self.terms.iter().enumerate() {
            if term.atom.matches(backend, index, device_type) {
                if term.negated {
                    return Match::Excluded(position);
                }
                first_positive.get_or_insert(position);
            }
        }
        match first_positive {
            Some(position) => Match::Term(position),
            None if self.has_positive_terms() => Match::NotNamed,
            None => Match::Allowed,
        }
    }

    fn term(&self, position: usize) -> String {
        self.terms.get(position).map(Term::to_string).unwrap_or_default()
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, term) in self.terms.iter().enumerate() {
            if position > 0 {
                f.write_str(",")?;
            }
            term.fmt(f)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for DeviceSelector {
    type Err = Error;

    fn from_str(text: &str) -> Result<DeviceSelector> {
        DeviceSelector::parse(text)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// A hand-written recursive-descent parser over characters, so that columns count characters
/// (what a person sees) rather than bytes.
struct Parser<'t> {
    text: &'t str,
    /// The name of the text's source, for messages.
    origin: &'t str,
    chars: Vec<char>,
    position: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
}

impl<'t> Parser<'t> {
    fn new(text: &'t str, origin: &'t str) -> Parser<'t> {
        Parser {
            text,
            origin,
            chars: text.chars().collect(),
            position: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.position += 1;
        }
    }

    fn selector(mut self) -> Result<DeviceSelector> {
        if self.chars.iter().all(|c| c.is_whitespace()) {
            return Err(self.error(0, "empty selector: expected a backend name, a device type or '*'"));
        }
        let mut terms = Vec::new();
        loop {
            self.skip_whitespace();
            let term = self.term()?;
            let glued = self.position;
            self.skip_whitespace();
            match self.peek() {
                None => {
                    terms.push(term);
                    return Ok(DeviceSelector {
                        terms,
                        origin: self.origin.to_string(),
                    });
                }
                Some(',') => {
                    let comma = self.position;
                    self.position += 1;
                    self.skip_whitespace();
                    if self.peek().is_none() {
                        return Err(self.error(comma, "trailing ',': expected a term after it"));
                    }
                }
                Some(':') if self.position != glued && matches!(term.atom, Atom::Word { .. }) => {
                    return Err(self.error(self.position, "no whitespace is allowed before ':'"));
                }
                Some(_) => {
                    let expected = if matches!(term.atom, Atom::Word { .. }) && self.position == glued {
                        "':', ',' or the end"
                    } else {
                        "',' or the end"
                    };
                    let message = format!("expected {expected} after `{}`", shorten(&term.to_string()));
                    return Err(self.error(self.position, &message));
                }
            }
            terms.push(term);
        }
    }

    fn term(&mut self) -> Result<Term> {
        let negated = self.peek() == Some('!');
        if negated {
            self.position += 1;
            if self.peek() == Some('!') {
                return Err(self.error(self.position, "'!' repeated: a term is negated at most once"));
            }
        }
        let atom = self.atom(negated)?;
        Ok(Term { negated, atom })
    }

    fn atom(&mut self, negated: bool) -> Result<Atom> {
        match self.peek() {
            Some('*') => {
                self.position += 1;
                Ok(Atom::Any)
            }
            Some(c) if c.is_ascii_lowercase() => {
                let word = self.word()?;
                if self.peek() == Some(':') {
                    self.position += 1;
                    let device = self.device()?;
                    Ok(Atom::Device { backend: word, device })
                } else {
                    let device_type = TypeWord::from_word(&word);
                    Ok(Atom::Word { word, device_type })
                }
            }
            Some(c) if c.is_ascii_uppercase() => Err(self.uppercase_error(self.position)),
            _ if negated => Err(self.error(self.position, "expected a backend name, a device type or '*' after '!'")),
            Some(',') => Err(self.error(
                self.position,
                "empty term: expected a backend name, a device type, '*' or '!'",
            )),
            _ => Err(self.error(self.position, "expected a backend name, a device type, '*' or '!'")),
        }
    }

    /// Reads `[a-z][a-z0-9_-]*`; the caller has seen the first letter.
    fn word(&mut self) -> Result<String> {
        let start = self.position;
        while self.peek().is_some_and(is_word_char) {
            self.position += 1;
        }
        // `cuDA` would otherwise read as `cu` followed by junk; say what is wrong instead.
        if self.peek().is_some_and(|c| c.is_ascii_uppercase()) {
            let message = format!("names are lowercase: expected `{}`", shorten(&self.lowered_word(start)));
            return Err(self.error(self.position, &message));
        }
        Ok(self
            .chars
            .get(start..self.position)
            .unwrap_or_default()
            .iter()
            .collect())
    }

    fn device(&mut self) -> Result<DevicePattern> {
        let start = self.position;
        match self.peek() {
            Some('*') => {
                self.position += 1;
                Ok(DevicePattern::Any)
            }
            Some(c) if c.is_ascii_digit() => {
                let mut value: Option<u32> = Some(0);
                while let Some(digit) = self.peek().and_then(|c| c.to_digit(10)) {
                    value = value.and_then(|v| v.checked_mul(10)).and_then(|v| v.checked_add(digit));
                    self.position += 1;
                }
                match value {
                    Some(index) => Ok(DevicePattern::Index(index)),
                    None => {
                        let digits: String = self
                            .chars
                            .get(start..self.position)
                            .unwrap_or_default()
                            .iter()
                            .collect();
                        let message = format!(
                            "device index {} is too large (the largest is {})",
                            shorten(&digits),
                            u32::MAX
                        );
                        Err(self.error(start, &message))
                    }
                }
            }
            Some(c) if c.is_ascii_lowercase() => {
                let word = self.word()?;
                TypeWord::from_word(&word).map(DevicePattern::Type).ok_or_else(|| {
                    let spellings: Vec<&str> = TypeWord::SPELLINGS.iter().map(|(s, _)| *s).collect();
                    let message = format!(
                        "unknown device type `{}`: expected a device index, '*' or one of {}",
                        shorten(&word),
                        spellings.join(", ")
                    );
                    self.error(start, &message)
                })
            }
            Some(c) if c.is_ascii_uppercase() => Err(self.uppercase_error(start)),
            _ => Err(self.error(start, "expected a device index, '*' or a device type")),
        }
    }

    /// The word starting at `start`, read leniently and lowercased, to suggest in an error.
    fn lowered_word(&self, start: usize) -> String {
        self.chars
            .iter()
            .skip(start)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '-')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    }

    fn uppercase_error(&self, at: usize) -> Error {
        let message = format!("names are lowercase: expected `{}`", shorten(&self.lowered_word(at)));
        self.error(at, &message)
    }

    fn error(&self, at: usize, what: &str) -> Error {
        Error::new(ErrorKind::Selection, self.located(at, what))
    }

    /// `<origin> "<text>": <what> at column N` (`XHAL_DEVICE "cuda,,cpu": ...`), then the text
    /// and a caret under column N.
    fn located(&self, at: usize, what: &str) -> String {
        // A caret does not show an invisible character, so name those.
        let found = match self.chars.get(at) {
            Some(c) if !c.is_ascii_graphic() => format!(", found {c:?}"),
            _ => String::new(),
        };
        let (echo, caret) = self.echo(at);
        format!(
            "{} {:?}: {what} at column {}{found}\n  {echo}\n  {}^",
            self.origin,
            shorten(self.text),
            at + 1,
            " ".repeat(caret)
        )
    }

    /// The text to print above the caret, and the caret's offset in it. Long text is windowed
    /// around the column; control characters become spaces so that one character stays one
    /// column and the message stays three lines.
    fn echo(&self, at: usize) -> (String, usize) {
        let length = self.chars.len();
        let (start, end) = if length <= ECHO_WIDTH {
            (0, length)
        } else {
            let start = at.saturating_sub(ECHO_WIDTH / 2).min(length - ECHO_WIDTH);
            (start, start + ECHO_WIDTH)
        };
        let mut echo = String::new();
        let mut caret = at - start;
        if start > 0 {
            echo.push('…');
            caret += 1;
        }
        let window = self.chars.get(start..end).unwrap_or_default();
        echo.extend(window.iter().map(|c| if c.is_control() { ' ' } else { *c }));
        if end < length {
            echo.push('…');
        }
        (echo, caret)
    }
}

/// `text`, cut to [`QUOTE_LIMIT`] characters with an ellipsis when longer.
fn shorten(text: &str) -> String {
    if text.chars().count() <= QUOTE_LIMIT {
        text.to_string()
    } else {
        let mut short: String = text.chars().take(QUOTE_LIMIT).collect();
        short.push('…');
        short
    }
}

// ---------------------------------------------------------------------------------------------
// Choosing
// ---------------------------------------------------------------------------------------------

/// How to order the devices that pass the selector and the requirements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Discrete GPU, then integrated GPU, accelerator, other, CPU. The default: the fastest
    /// device is usually the one with its own memory.
    #[default]
    PreferDiscreteGpu,
    /// CPU first, then the same order as [`Policy::PreferDiscreteGpu`]: for debugging, and for
    /// work too small to pay for a transfer.
    PreferCpu,
    /// Only devices the device selector matches, strictly in the order of its terms and then
    /// in discovery order; device types play no part. Choosing fails without a device selector.
    Explicit,
}

impl Policy {
    /// The policy's name in explanations: `prefer-discrete-gpu`, `prefer-cpu`, `explicit`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::PreferDiscreteGpu => "prefer-discrete-gpu",
            Policy::PreferCpu => "prefer-cpu",
            Policy::Explicit => "explicit",
        }
    }

    /// Position of a device type in this policy's order, 0 first.
    fn type_rank(self, device_type: DeviceType) -> usize {
        let gpu_first = match device_type {
            DeviceType::DiscreteGpu => 0,
            DeviceType::IntegratedGpu => 1,
            DeviceType::Accelerator => 2,
            DeviceType::Other => 3,
            DeviceType::Cpu => 4,
        };
        match self {
            Policy::PreferDiscreteGpu => gpu_first,
            Policy::PreferCpu if device_type == DeviceType::Cpu => 0,
            Policy::PreferCpu => gpu_first + 1,
            Policy::Explicit => 0,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device that could be chosen, as discovery found it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The backend's name.
    pub backend: &'a str,
    /// The device's index within its backend.
    pub index: u32,
    /// What the backend reports about the device.
    pub info: &'a DeviceInfo,
}

impl Candidate<'_> {
    /// `vulkan:0 (llvmpipe)`, or `vulkan:0` for a device without a name.
    fn label(&self) -> String {
        if self.info.name.is_empty() {
            format!("{}:{}", self.backend, self.index)
        } else {
            format!("{}:{} ({})", self.backend, self.index, self.info.name)
        }
    }

    /// `cpu:0 (xhal CPU reference device 0, cpu)`: the label with the device type, for the
    /// list of what is present.
    fn described(&self) -> String {
        if self.info.name.is_empty() {
            format!("{}:{} ({})", self.backend, self.index, self.info.device_type)
        } else {
            format!(
                "{}:{} ({}, {})",
                self.backend, self.index, self.info.name, self.info.device_type
            )
        }
    }
}

/// The judgement on one candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// The device: `vulkan:0 (llvmpipe)`.
    pub device: String,
    /// True when the device may be chosen.
    pub accepted: bool,
    /// Place among the accepted devices, 1 for the best; `None` when rejected.
    pub rank: Option<usize>,
    /// Why, in words: "matches term 2 \`vulkan:*\`; discrete GPU", "excluded by \`!cpu\`",
    /// "lacks feature f64", "has 1.0 GiB, needs 2.0 GiB"...
    pub reason: String,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rank {
            Some(rank) if self.accepted => write!(f, "#{rank} {}: {}", self.device, self.reason),
            _ => write!(f, "-- {}: rejected: {}", self.device, self.reason),
        }
    }
}

/// Every candidate judged and the accepted ones ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranking {
    /// Indices into the candidates of the accepted devices, best first.
    pub accepted: Vec<usize>,
    /// One verdict per candidate, in the candidates' order.
    pub verdicts: Vec<Verdict>,
}

/// Why a device was chosen, and what became of every other candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Explanation {
    /// One line, e.g. "chose cpu:0 (xhal CPU reference device 0): first match of term 1 \`cpu\`
    /// in XHAL_DEVICE=cpu", where `XHAL_DEVICE` is the selector's
    /// [origin](DeviceSelector::origin).
    pub summary: String,
    /// One verdict per candidate, in the candidates' order.
    pub verdicts: Vec<Verdict>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)?;
        for verdict in &self.verdicts {
            write!(f, "\n  {verdict}")?;
        }
        Ok(())
    }
}

/// The chosen device and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Index into the candidates.
    pub index: usize,
    /// Why this one.
    pub explanation: Explanation,
}

/// Chooses a device: an optional [`DeviceSelector`] (usually `XHAL_DEVICE`), a [`Policy`] and
/// requirements. Devices failing the selector or a requirement are rejected; the rest are
/// ordered by the first positive term that matches them, then by the policy's type order,
/// then in discovery order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    policy: Policy,
    devices: Option<DeviceSelector>,
    features: Features,
    min_memory: u64,
    kernel_formats: Vec<KernelFormat>,
}

/// Why a candidate was rejected, as far as the error message of [`Selector::choose`] cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rejection {
    Excluded,
    NotNamed,
    NoSelector,
    Requirements,
}

/// The internal judgement on one candidate, from which verdicts and messages are written.
struct Judgement {
    /// The positive term that matched, if any.
    term: Option<usize>,
    rejection: Option<Rejection>,
    reason: String,
}

impl Selector {
    /// Policy [`Policy::PreferDiscreteGpu`], no requirements, no device selector.
    pub fn new() -> Selector {
        Selector::default()
    }

    /// [`Selector::new`] with the device selector of `XHAL_DEVICE` when it is set to something
    /// other than whitespace; a value that does not parse, or is not UTF-8, is an error of kind
    /// [`ErrorKind::Selection`].
    pub fn from_env() -> Result<Selector> {
        Selector::from_env_value(std::env::var_os(ENV_VAR))
    }

    /// The body of [`Selector::from_env`], apart so that tests need not change the process's
    /// environment, which other threads may be reading.
    fn from_env_value(value: Option<OsString>) -> Result<Selector> {
        let Some(value) = value else {
            return Ok(Selector::new());
        };
        let Some(text) = value.to_str() else {
            return Err(Error::new(
                ErrorKind::Selection,
                format!("{ENV_VAR} is not valid UTF-8: {value:?}"),
            ));
        };
        // Whitespace only is taken as unset, like empty: `XHAL_DEVICE= ` is not a request.
        if text.trim().is_empty() {
            return Ok(Selector::new());
        }
        tracing::debug!("{ENV_VAR}={text}");
        Selector::parse(text)
    }

    /// [`Selector::new`] with the device selector parsed from `text`, which came from
    /// `XHAL_DEVICE` as far as messages tell.
    pub fn parse(text: &str) -> Result<Selector> {
        Selector::parse_from(text, ENV_VAR)
    }

    /// [`Selector::new`] with the device selector parsed from `text`, which came from `origin`
    /// (see [`DeviceSelector::parse_from`]).
    pub fn parse_from(text: &str, origin: &str) -> Result<Selector> {
        Ok(Selector::new().with_devices(DeviceSelector::parse_from(text, origin)?))
    }

    /// Uses `devices` as the device selector, replacing any other.
    pub fn with_devices(mut self, devices: DeviceSelector) -> Selector {
        self.devices = Some(devices);
        self
    }

    /// Orders devices by `policy`.
    pub fn policy(mut self, policy: Policy) -> Selector {
        self.policy = policy;
        self
    }

    /// Rejects devices lacking any of `features`; calls add up.
    pub fn require_features(mut self, features: Features) -> Selector {
        self.features = self.features | features;
        self
    }

    /// Rejects devices with less than `bytes` of memory in all (`DeviceInfo::total_memory`; free
    /// memory changes from moment to moment, so it would make the choice unrepeatable). A later
    /// call replaces an earlier one.
    pub fn min_memory(mut self, bytes: u64) -> Selector {
        self.min_memory = bytes;
        self
    }

    /// Adds `format` to the kernel formats the application can provide; a device must accept at
    /// least one of them.
    pub fn require_kernel_format(mut self, format: KernelFormat) -> Selector {
        if !self.kernel_formats.contains(&format) {
            self.kernel_formats.push(format);
        }
        self
    }

    /// The device selector, if one was given.
    pub fn device_selector(&self) -> Option<&DeviceSelector> {
        self.devices.as_ref()
    }

    /// Judges every candidate and orders the accepted ones, best first.
    pub fn rank(&self, candidates: &[Candidate<'_>]) -> Ranking {
        let judgements: Vec<Judgement> = candidates.iter().map(|c| self.judge(c)).collect();
        self.ranking(candidates, &judgements)
    }

    /// The best candidate, with an explanation; when none is accepted, an error of kind
    /// [`ErrorKind::Selection`] that lists what is present and why each device was rejected.
    pub fn choose(&self, candidates: &[Candidate<'_>]) -> Result<Choice> {
        let judgements: Vec<Judgement> = candidates.iter().map(|c| self.judge(c)).collect();
        let ranking = self.ranking(candidates, &judgements);
        let best = ranking.accepted.first().copied();
        let Some((index, candidate)) = best.and_then(|i| Some((i, candidates.get(i)?))) else {
            return Err(Error::new(
                ErrorKind::Selection,
                self.nothing_accepted(candidates, &judgements),
            ));
        };
        let term = judgements.get(index).and_then(|j| j.term);
        let summary = self.summary(candidates, &judgements, &ranking, candidate, term);
        tracing::debug!("{summary}");
        Ok(Choice {
            index,
            explanation: Explanation {
                summary,
                verdicts: ranking.verdicts,
            },
        })
    }

    fn judge(&self, candidate: &Candidate<'_>) -> Judgement {
        let info = candidate.info;
        let rejected = |rejection, reason: String| Judgement {
            term: None,
            rejection: Some(rejection),
            reason,
        };
        let outcome = self.devices.as_ref().map(|devices| {
            (
                devices,
                devices.evaluate(candidate.backend, candidate.index, info.device_type),
            )
        });
        let term = match outcome {
            Some((devices, Match::Excluded(position))) => {
                return rejected(Rejection::Excluded, format!("excluded by `{}`", devices.term(position)));
            }
            Some((devices, Match::NotNamed)) => {
                return rejected(
                    Rejection::NotNamed,
                    format!("not named by {}={devices}", devices.origin),
                );
            }
            Some((_, Match::Term(position))) => Some(position),
            Some((_, Match::Allowed)) => None,
            None if self.policy == Policy::Explicit => {
                return rejected(
                    Rejection::NoSelector,
                    "policy explicit needs a device selector, and there is none".to_string(),
                );
            }
            None => None,
        };

        let mut failures = Vec::new();
        if !info.features.contains(self.features) {
            let missing = Features(self.features.0 & !info.features.0);
            let noun = if missing.0.count_ones() == 1 {
                "feature"
            } else {
                "features"
            };
            failures.push(format!("lacks {noun} {}", feature_list(missing)));
        }
        if info.total_memory < self.min_memory {
            let (has, needs) = (format_bytes(info.total_memory), format_bytes(self.min_memory));
            // Rounding can make two different sizes print alike; then only bytes tell them apart.
            if has == needs {
                failures.push(format!(
                    "has {} bytes, needs {} bytes",
                    info.total_memory, self.min_memory
                ));
            } else {
                failures.push(format!("has {has}, needs {needs}"));
            }
        }
        if !self.kernel_formats.is_empty()
            && !self
                .kernel_formats
                .iter()
                .any(|format| info.kernel_formats.contains(format))
        {
            let accepts = if info.kernel_formats.is_empty() {
                "none".to_string()
            } else {
                format_list(&info.kernel_formats)
            };
            failures.push(format!(
                "accepts none of the kernel formats {} (it accepts {accepts})",
                format_list(&self.kernel_formats)
            ));
        }
        if !failures.is_empty() {
            return rejected(Rejection::Requirements, failures.join("; "));
        }

        let kind = type_description(info.device_type);
        let reason = match (term, &self.devices) {
            (Some(position), Some(devices)) => {
                format!("matches term {} `{}`; {kind}", position + 1, devices.term(position))
            }
            _ => kind.to_string(),
        };
        Judgement {
            term,
            rejection: None,
            reason,
        }
    }

    fn ranking(&self, candidates: &[Candidate<'_>], judgements: &[Judgement]) -> Ranking {
        let mut accepted: Vec<usize> = judgements
            .iter()
            .enumerate()
            .filter(|(_, judgement)| judgement.rejection.is_none())
            .map(|(index, _)| index)
            .collect();
        // The sort is stable and the index is part of the key anyway: discovery order breaks ties.
        accepted.sort_by_key(|&index| {
            let term = judgements.get(index).and_then(|j| j.term).unwrap_or(0);
            let kind = candidates
                .get(index)
                .map_or(0, |c| self.policy.type_rank(c.info.device_type));
            (term, kind, index)
        });
        let verdicts = candidates
            .iter()
            .zip(judgements)
            .enumerate()
            .map(|(index, (candidate, judgement))| Verdict {
                device: candidate.label(),
                accepted: judgement.rejection.is_none(),
                rank: accepted.iter().position(|&a| a == index).map(|p| p + 1),
                reason: judgement.reason.clone(),
            })
            .collect();
        Ranking { accepted, verdicts }
    }

    fn summary(
        &self,
        candidates: &[Candidate<'_>],
        judgements: &[Judgement],
        ranking: &Ranking,
        chosen: &Candidate<'_>,
        term: Option<usize>,
    ) -> String {
        let label = chosen.label();
        // `XHAL_DEVICE=cuda,cpu`, or `SELECTOR=cuda,cpu` for a selector from elsewhere.
        let selector = self
            .devices
            .as_ref()
            .map(|devices| format!("{}={devices}", devices.origin))
            .unwrap_or_default();
        if let (Some(position), Some(devices)) = (term, &self.devices) {
            let mut summary = format!(
                "chose {label}: first match of term {} `{}` in {selector}",
                position + 1,
                devices.term(position)
            );
            let rivals = ranking
                .accepted
                .iter()
                .filter(|&&i| judgements.get(i).and_then(|j| j.term) == Some(position))
                .count();
            if rivals > 1 {
                summary.push_str(&match self.policy {
                    Policy::Explicit => {
                        format!("; {rivals} devices match it, taken in discovery order")
                    }
                    policy => format!(
                        "; {rivals} devices match it, ordered by policy {policy}, \
                         then discovery order"
                    ),
                });
            }
            return summary;
        }
        if self.policy == Policy::Explicit {
            return format!(
                "chose {label}: first device in discovery order that {selector} \
                 allows (policy explicit)"
            );
        }
        let mut notes = vec![chosen.info.device_type.name().to_string()];
        let (wanted, is_wanted): (&str, fn(DeviceType) -> bool) = match self.policy {
            Policy::PreferCpu => ("CPU", |t| t == DeviceType::Cpu),
            _ => ("GPU", DeviceType::is_gpu),
        };
        if !is_wanted(chosen.info.device_type) {
            let present = candidates.iter().any(|c| is_wanted(c.info.device_type));
            notes.push(if present {
                format!("no {wanted} accepted")
            } else {
                format!("no {wanted} present")
            });
        }
        if self.devices.is_some() {
            notes.push(selector);
        }
        format!("chose {label}: best by policy {} ({})", self.policy, notes.join("; "))
    }

    fn nothing_accepted(&self, candidates: &[Candidate<'_>], judgements: &[Judgement]) -> String {
        let failed_requirements = judgements.iter().any(|j| j.rejection == Some(Rejection::Requirements));
        let mut message = match &self.devices {
            None if self.policy == Policy::Explicit => {
                "policy explicit needs a device selector (set XHAL_DEVICE or call \
                 Selector::with_devices)"
                    .to_string()
            }
            Some(devices) if failed_requirements => format!(
                "of the devices {} \"{devices}\" matches, none meets the requirements ({})",
                devices.origin,
                self.requirements()
            ),
            Some(devices) => format!("{} \"{devices}\" matches no device", devices.origin),
            None if failed_requirements => {
                format!("no device meets the requirements ({})", self.requirements())
            }
            None => "no device is present".to_string(),
        };

        let present: Vec<String> = candidates
            .iter()
            .zip(judgements)
            .map(|(candidate, judgement)| match judgement.rejection {
                // "Not named" repeats the head of the message; the others add to it.
                Some(Rejection::Excluded | Rejection::Requirements) => {
                    format!("{} [{}]", candidate.described(), judgement.reason)
                }
                _ => candidate.described(),
            })
            .collect();
        if present.is_empty() {
            if self.devices.is_some() || self.policy == Policy::Explicit || failed_requirements {
                message.push_str("; present: none");
            }
        } else {
            message.push_str("; present: ");
            message.push_str(&present.join(", "));
        }

        let mut backends: Vec<&str> = Vec::new();
        for candidate in candidates {
            if !backends.contains(&candidate.backend) {
                backends.push(candidate.backend);
            }
        }
        let absent: Vec<String> = self
            .devices
            .as_ref()
            .map(DeviceSelector::named_backends)
            .unwrap_or_default()
            .into_iter()
            .filter(|name| !backends.contains(&name.as_str()))
            .collect();
        if !absent.is_empty() {
            let quoted: Vec<String> = absent.iter().map(|name| format!("\"{name}\"")).collect();
            let verb = if absent.len() == 1 { "backend" } else { "backends" };
            let is = if absent.len() == 1 { "is" } else { "are" };
            let others = if backends.is_empty() {
                "no backend reported a device".to_string()
            } else {
                format!("backends present: {}", backends.join(", "))
            };
            message.push_str(&format!("; {verb} {} {is} not present ({others})", quoted.join(", ")));
        }
        message
    }

    /// The requirements in words, for the error when no device meets them.
    fn requirements(&self) -> String {
        let mut parts = Vec::new();
        if self.features.0 != 0 {
            parts.push(format!("features {}", feature_list(self.features)));
        }
        if self.min_memory > 0 {
            parts.push(format!("at least {} of memory", format_bytes(self.min_memory)));
        }
        if !self.kernel_formats.is_empty() {
            parts.push(format!("a kernel format of {}", format_list(&self.kernel_formats)));
        }
        parts.join("; ")
    }
}

/// `discrete GPU`, `CPU`...: a device type in the words of a reason.
fn type_description(device_type: DeviceType) -> &'static str {
    match device_type {
        DeviceType::Cpu => "CPU",
        DeviceType::IntegratedGpu => "integrated GPU",
        DeviceType::DiscreteGpu => "discrete GPU",
        DeviceType::Accelerator => "accelerator",
        DeviceType::Other => "other device",
    }
}

/// Feature names, with bits this host has no name for written in hex.
fn feature_list(features: Features) -> String {
    let mut names: Vec<String> = features.names().into_iter().map(String::from).collect();
    let known = Features::ALL.iter().fold(0, |bits, (feature, _)| bits | feature.0);
    let unknown = features.0 & !known;
    if unknown != 0 {
        names.push(format!("{unknown:#x}"));
    }
    names.join(", ")
}

fn format_list(formats: &[KernelFormat]) -> String {
    formats
        .iter()
        .map(|format| format.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `2.0 GiB`, `512.0 MiB`, `100 bytes`.
fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// A device with everything a test does not care about filled in plausibly.
    fn device(name: &str, device_type: DeviceType) -> DeviceInfo {
        DeviceInfo {
            name: name.to_string(),
            vendor: "test".to_string(),
            vendor_id: 0,
            device_id: 0,
            device_type,
            uuid: [0; 16],
            pci_bus_id: None,
            driver_version: "1".to_string(),
            total_memory: 8 * GIB,
            free_memory: 8 * GIB,
            max_allocation_size: 8 * GIB,
            max_workgroup_size: [1024, 1024, 64],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_workgroup_memory: 49152,
            subgroup_size: 32,
            max_buffer_arguments: 16,
            max_scalar_block_size: 256,
            buffer_offset_alignment: 256,
            features: Features::F16 | Features::F64 | Features::I64,
            kernel_formats: vec![KernelFormat::WGSL, KernelFormat::SPIRV_SHADER],
        }
    }

    fn cpu_reference() -> DeviceInfo {
        DeviceInfo {
            kernel_formats: vec![KernelFormat::CPU_BUILTIN, KernelFormat::WGSL],
            ..device("xhal CPU reference device 0", DeviceType::Cpu)
        }
    }

    fn candidates<'a>(list: &'a [(&'a str, u32, DeviceInfo)]) -> Vec<Candidate<'a>> {
        list.iter()
            .map(|(backend, index, info)| Candidate {
                backend,
                index: *index,
                info,
            })
            .collect()
    }

    /// A mixed machine, listed in an order that no policy prefers, so ordering shows.
    fn machine() -> Vec<(&'static str, u32, DeviceInfo)> {
        vec![
            ("cpu", 0, cpu_reference()),
            ("vulkan", 0, device("llvmpipe", DeviceType::Cpu)),
            ("vulkan", 1, device("Radeon 780M", DeviceType::IntegratedGpu)),
            ("vulkan", 2, device("RTX 4090", DeviceType::DiscreteGpu)),
            ("cuda", 0, device("RTX 4090", DeviceType::DiscreteGpu)),
            ("npu", 0, device("Hexagon", DeviceType::Accelerator)),
            ("odd", 0, device("FPGA", DeviceType::Other)),
        ]
    }

    fn selector(text: &str) -> DeviceSelector {
        DeviceSelector::parse(text).unwrap()
    }

    /// The accepted devices as `backend:index`, best first.
    fn order(selector: &Selector, list: &[(&str, u32, DeviceInfo)]) -> Vec<String> {
        let candidates = candidates(list);
        let ranking = selector.rank(&candidates);
        ranking
            .accepted
            .iter()
            .map(|&i| format!("{}:{}", candidates[i].backend, candidates[i].index))
            .collect()
    }

    /// Parses `text`, expects a selection error at `column` mentioning `fragment`, and checks
    /// the caret line points at that column.
    fn assert_syntax_error(text: &str, column: usize, fragment: &str) -> String {
        let error = DeviceSelector::parse(text).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection, "{text:?}");
        let message = error.message().to_string();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines.len(), 3, "{message}");
        assert!(
            lines[0].ends_with(&format!("at column {column}"))
                || lines[0].contains(&format!("at column {column}, found")),
            "{text:?}: {message}"
        );
        assert!(lines[0].contains(fragment), "{text:?}: {message}");
        if text.chars().count() <= ECHO_WIDTH {
            assert_eq!(
                lines[2],
                format!("  {}^", " ".repeat(column - 1)),
                "{text:?}: {message}"
            );
        } else {
            // Windowed: the caret still stands under the character at `column`, or past the end.
            let caret = lines[2].chars().position(|c| c == '^').unwrap();
            let under = lines[1].chars().nth(caret);
            let expected = text.chars().nth(column - 1);
            assert!(expected.is_none() || under == expected, "{message}");
        }
        message
    }

    // --- grammar ---------------------------------------------------------------------------

    #[test]
    fn every_grammar_form_parses_and_prints_canonically() {
        let cases = [
            ("*", "*"),
            ("cuda", "cuda"),
            ("cpu", "cpu"),
            ("gpu", "gpu"),
            ("discrete", "discrete"),
            ("integrated_gpu", "integrated_gpu"),
            ("accelerator", "accelerator"),
            ("other", "other"),
            ("my-backend_2", "my-backend_2"),
            ("vulkan:0", "vulkan:0"),
            ("vulkan:007", "vulkan:7"),
            ("vulkan:4294967295", "vulkan:4294967295"),
            ("vulkan:*", "vulkan:*"),
            ("vulkan:gpu", "vulkan:gpu"),
            ("vulkan:cpu", "vulkan:cpu"),
            ("vulkan:discrete", "vulkan:discrete_gpu"),
            ("vulkan:discrete_gpu", "vulkan:discrete_gpu"),
            ("vulkan:integrated", "vulkan:integrated_gpu"),
            ("vulkan:accelerator", "vulkan:accelerator"),
            ("vulkan:other", "vulkan:other"),
            ("!cpu", "!cpu"),
            ("!*", "!*"),
            ("!vulkan:1", "!vulkan:1"),
            ("cuda,vulkan,cpu", "cuda,vulkan,cpu"),
            ("  cuda ,\tvulkan:* , !cpu  ", "cuda,vulkan:*,!cpu"),
        ];
        for (text, canonical) in cases {
            let parsed = selector(text);
            assert_eq!(parsed.to_string(), canonical, "{text:?}");
            assert_eq!(selector(canonical), parsed, "{text:?} round trip");
            assert_eq!(text.parse::<DeviceSelector>().unwrap(), parsed);
        }
    }

    #[test]
    fn words_match_backends_and_device_types() {
        use DeviceType::*;
        let matches = |text: &str, backend: &str, index: u32, device_type: DeviceType| {
            matches!(
                selector(text).evaluate(backend, index, device_type),
                Match::Term(_) | Match::Allowed
            )
        };
        // A bare type word matches the backend of that name, whatever it reports, and that type
        // on every backend.
        assert!(matches("cpu", "cpu", 0, Cpu));
        assert!(matches("cpu", "cpu", 0, DiscreteGpu));
        assert!(matches("cpu", "opencl", 3, Cpu));
        assert!(!matches("cpu", "opencl", 3, IntegratedGpu));
        assert!(matches("gpu", "vulkan", 0, IntegratedGpu));
        assert!(matches("gpu", "cuda", 0, DiscreteGpu));
        assert!(!matches("gpu", "cpu", 0, Cpu));
        assert!(!matches("gpu", "npu", 0, Accelerator));
        assert!(matches("discrete", "cuda", 0, DiscreteGpu));
        assert!(!matches("discrete", "vulkan", 0, IntegratedGpu));
        assert!(matches("integrated", "vulkan", 0, IntegratedGpu));
        assert!(matches("accelerator", "npu", 0, Accelerator));
        assert!(matches("other", "odd", 0, Other));
        // Other words are backend names only.
        assert!(matches("cuda", "cuda", 5, Cpu));
        assert!(!matches("cuda", "vulkan", 0, DiscreteGpu));
        // `WORD:device`.
        assert!(matches("vulkan:1", "vulkan", 1, Cpu));
        assert!(!matches("vulkan:1", "vulkan", 0, Cpu));
        assert!(!matches("vulkan:1", "cuda", 1, Cpu));
        assert!(matches("vulkan:*", "vulkan", 9, Other));
        assert!(matches("vulkan:gpu", "vulkan", 0, DiscreteGpu));
        assert!(!matches("vulkan:gpu", "vulkan", 0, Cpu));
        assert!(!matches("vulkan:gpu", "cuda", 0, DiscreteGpu));
        // `cpu:0` names the backend `cpu`, not CPUs elsewhere.
        assert!(!matches("cpu:0", "opencl", 0, Cpu));
        assert!(matches("*", "anything", 7, Other));
        // Negation, wherever it appears.
        assert!(!matches("!cpu", "vulkan", 0, Cpu));
        assert!(matches("!cpu", "vulkan", 0, IntegratedGpu));
        assert!(!matches("vulkan:*,!cpu", "vulkan", 0, Cpu));
        assert!(!matches("!cpu,vulkan:*", "vulkan", 0, Cpu));
        assert!(matches("!cpu,vulkan:*", "vulkan", 0, DiscreteGpu));
        assert!(!matches("!*", "vulkan", 0, DiscreteGpu));
    }

    #[test]
    fn the_first_matching_positive_term_decides() {
        let parsed = selector("!npu,cuda,vulkan:*,gpu");
        assert_eq!(parsed.evaluate("vulkan", 2, DeviceType::DiscreteGpu), Match::Term(2));
        assert_eq!(parsed.evaluate("cuda", 0, DeviceType::DiscreteGpu), Match::Term(1));
        assert_eq!(parsed.evaluate("hip", 0, DeviceType::DiscreteGpu), Match::Term(3));
        assert_eq!(parsed.evaluate("npu", 0, DeviceType::DiscreteGpu), Match::Excluded(0));
        assert_eq!(parsed.evaluate("cpu", 0, DeviceType::Cpu), Match::NotNamed);
        assert_eq!(
            selector("!cpu").evaluate("cuda", 0, DeviceType::DiscreteGpu),
            Match::Allowed
        );
    }

    #[test]
    fn syntax_errors_name_the_column() {
        let message = assert_syntax_error("vulkan:@", 8, "expected a device index, '*' or a device type");
        assert_eq!(
            message,
            "XHAL_DEVICE \"vulkan:@\": expected a device index, '*' or a device type at column 8\n  vulkan:@\n         ^"
        );
        assert_syntax_error("", 1, "empty selector");
        assert_syntax_error("   ", 1, "empty selector");
        assert_syntax_error("cuda,,cpu", 6, "empty term");
        assert_syntax_error(",cuda", 1, "empty term");
        assert_syntax_error("cuda, ,cpu", 7, "empty term");
        assert_syntax_error("cuda,", 5, "trailing ','");
        assert_syntax_error("cuda,  ", 5, "trailing ','");
        assert_syntax_error("!!cpu", 2, "'!' repeated");
        assert_syntax_error("cuda,!!cpu", 7, "'!' repeated");
        assert_syntax_error("!", 2, "after '!'");
        assert_syntax_error("!,cpu", 2, "after '!'");
        assert_syntax_error("! cpu", 2, "after '!'");
        assert_syntax_error("@cuda", 1, "expected a backend name, a device type, '*' or '!'");
        assert_syntax_error("1cuda", 1, "expected a backend name");
        assert_syntax_error("cu$da", 3, "expected ':', ',' or the end after `cu`");
        assert_syntax_error("cuda cpu", 6, "expected ',' or the end after `cuda`");
        assert_syntax_error("cuda;cpu", 5, "after `cuda`");
        assert_syntax_error("*:0", 2, "expected ',' or the end after `*`");
        assert_syntax_error("vulkan:0x", 9, "expected ',' or the end after `vulkan:0`");
        assert_syntax_error("vulkan:0:1", 9, "after `vulkan:0`");
        assert_syntax_error("vulkan:*x", 9, "after `vulkan:*`");
        assert_syntax_error("vulkan:gpu!", 11, "after `vulkan:gpu`");
        assert_syntax_error("cuda:99999999999", 6, "device index 99999999999 is too large");
        assert_syntax_error("cuda:4294967296", 6, "the largest is 4294967295");
        assert_syntax_error("cuda:", 6, "expected a device index, '*' or a device type");
        assert_syntax_error("cuda:,cpu", 6, "expected a device index");
        assert_syntax_error("vulkan:-1", 8, "expected a device index");
        assert_syntax_error("vulkan:gpux", 8, "unknown device type `gpux`");
        assert_syntax_error("vulkan: 0", 8, "found ' '");
        assert_syntax_error("vulkan :0", 8, "no whitespace is allowed before ':'");
    }

    #[test]
    fn syntax_errors_name_the_origin() {
        let from_env = DeviceSelector::parse("vulkan:@").unwrap_err();
        let error = DeviceSelector::parse_from("vulkan:@", "SELECTOR").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        assert_eq!(
            error.message(),
            "SELECTOR \"vulkan:@\": expected a device index, '*' or a device type at column 8\n  vulkan:@\n         ^"
        );
        // Only the name differs: same column, same echo, same caret.
        assert_eq!(
            error.message().strip_prefix("SELECTOR"),
            from_env.message().strip_prefix(ENV_VAR)
        );
        assert!(!error.message().contains(ENV_VAR), "{error}");
        let error = Selector::parse_from("cuda,,cpu", "--device").unwrap_err();
        assert!(
            error.message().starts_with("--device \"cuda,,cpu\": empty term"),
            "{error}"
        );
    }

    #[test]
    fn the_origin_is_kept_but_plays_no_part_in_equality() {
        assert_eq!(selector("cuda").origin(), ENV_VAR);
        assert_eq!("cuda".parse::<DeviceSelector>().unwrap().origin(), ENV_VAR);
        let named = DeviceSelector::parse_from(" cuda , cpu", "SELECTOR").unwrap();
        assert_eq!(named.origin(), "SELECTOR");
        // `Display` is the canonical text alone.
        assert_eq!(named.to_string(), "cuda,cpu");
        assert_eq!(named, selector("cuda,cpu"));
        assert_eq!(
            Selector::parse_from("cuda,cpu", "SELECTOR").unwrap(),
            Selector::parse("cuda,cpu").unwrap()
        );
        assert_eq!(
            Selector::parse_from("cpu", "SELECTOR")
                .unwrap()
                .device_selector()
                .map(DeviceSelector::origin),
            Some("SELECTOR")
        );
    }

    #[test]
    fn uppercase_is_reported_with_the_lowercase_spelling() {
        assert_syntax_error("CUDA", 1, "names are lowercase: expected `cuda`");
        assert_syntax_error("cuDA", 3, "names are lowercase: expected `cuda`");
        assert_syntax_error("cpu,Vulkan:0", 5, "expected `vulkan`");
        assert_syntax_error("!Cpu", 2, "expected `cpu`");
        assert_syntax_error("vulkan:GPU", 8, "expected `gpu`");
        assert_syntax_error("vulkan:gPU", 9, "expected `gpu`");
    }

    #[test]
    fn columns_count_characters_and_the_echo_stays_aligned() {
        assert_syntax_error("cuda,ñ", 6, "found 'ñ'");
        assert_syntax_error("ünï,cuda", 1, "found 'ü'");
        assert_syntax_error("cuda,vulkan:\u{200b}", 13, "found '\\u{200b}'");
        // A tab is echoed as a space so the caret stays under the column.
        let message = assert_syntax_error("cuda,\t@", 7, "expected a backend name");
        assert!(message.contains("\n  cuda, @\n"), "{message}");
        // A newline in the value must not break the message's three lines.
        assert_syntax_error("cuda\n@", 6, "after `cuda`");
    }

    #[test]
    fn long_input_gives_a_short_message() {
        let long = format!("{}@", "a".repeat(10_000));
        let message = assert_syntax_error(&long, 10_001, "after `aaaa");
        assert!(message.len() < 600, "{} bytes: {message}", message.len());
        let early = format!("@{}", "a".repeat(10_000));
        let message = assert_syntax_error(&early, 1, "expected a backend name");
        assert!(message.len() < 600, "{message}");
        let middle = format!("{},@,{}", "a".repeat(5_000), "b".repeat(5_000));
        let message = DeviceSelector::parse(&middle).unwrap_err().message().to_string();
        assert!(message.contains("at column 5002"), "{message}");
        let lines: Vec<&str> = message.lines().collect();
        // The window starts with an ellipsis; the caret still sits under the '@'.
        let caret = lines[2].find('^').unwrap();
        assert_eq!(lines[1].chars().nth(caret), Some('@'), "{message}");
        let digits = format!("cuda:{}", "9".repeat(5_000));
        let message = assert_syntax_error(&digits, 6, "is too large");
        assert!(message.len() < 600, "{message}");
    }

    #[test]
    fn odd_input_never_panics_and_what_parses_round_trips() {
        let mut inputs: Vec<String> = [
            "",
            " ",
            ",",
            ",,",
            "!",
            "!!",
            "!*",
            "*",
            "**",
            "*,*",
            ":",
            "::",
            "a:",
            ":0",
            "a::0",
            "a:*:*",
            "a:0,",
            "a,b,,",
            "\u{0}",
            "\u{feff}cuda",
            "cuda\u{0}",
            "😀",
            "cuda:😀",
            "gpu,😀",
            "ａｂｃ",
            "ß",
            "İ",
            "\u{301}",
            "a\u{301}",
            "\t\n\r",
            "-",
            "_",
            "a-",
            "a_",
            "a:-",
            "a:_",
            "a:0-",
            "a:00000000000000000000000000001",
            "a:4294967295",
            "a:18446744073709551616",
            "z:gpu,!z:cpu,z:7",
            "\\",
            "\"",
            "'",
            "a b c",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        inputs.push("x".repeat(100_000));
        inputs.push("a,".repeat(50_000));
        inputs.push("!".repeat(1_000));
        // A deterministic generator over an alphabet of the grammar's pieces and some junk.
        let alphabet: Vec<char> = "ab0:*!, \tCZé😀-_gpucv".chars().collect();
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3_000 {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            for step in 0..(state % 12) {
                let pick = (state >> (step * 5)) as usize % alphabet.len();
                text.push(alphabet[pick]);
            }
            inputs.push(text);
        }
        for input in &inputs {
            match DeviceSelector::parse(input) {
                Ok(parsed) => {
                    let again = DeviceSelector::parse(&parsed.to_string()).unwrap();
                    assert_eq!(again, parsed, "{input:?}");
                    // Answering questions about it must not panic either.
                    let _ = parsed.may_use_backend("cuda");
                    let _ = parsed.named_backends();
                }
                Err(error) => {
                    assert_eq!(error.kind(), ErrorKind::Selection, "{input:?}");
                    assert_eq!(error.message().lines().count(), 3, "{input:?}: {error}");
                }
            }
        }
    }

    // --- questions about a selector --------------------------------------------------------

    #[test]
    fn may_use_backend_skips_only_what_can_never_match() {
        let cases: [(&str, &[(&str, bool)]); 14] = [
            ("cuda", &[("cuda", true), ("vulkan", false), ("cpu", false)]),
            ("gpu", &[("cuda", true), ("vulkan", true), ("cpu", true)]),
            ("cpu", &[("cpu", true), ("opencl", true), ("cuda", true)]),
            ("!vulkan", &[("vulkan", false), ("cuda", true), ("cpu", true)]),
            ("vulkan:*,!cpu", &[("vulkan", true), ("cpu", false), ("cuda", false)]),
            // Every device of the backend `cpu` matches the bare word `cpu`, so `!cpu` rules the
            // whole backend out; other backends may still have GPUs.
            ("!cpu", &[("cpu", false), ("vulkan", true)]),
            ("!vulkan:0", &[("vulkan", true)]),
            ("vulkan:0,!vulkan:*", &[("vulkan", false)]),
            ("vulkan:gpu,!gpu", &[("vulkan", false)]),
            ("vulkan:gpu,!vulkan:integrated", &[("vulkan", true)]),
            (
                "!vulkan:cpu,!vulkan:gpu,!vulkan:accelerator,!vulkan:other",
                &[("vulkan", false), ("cuda", true)],
            ),
            ("*,!*", &[("vulkan", false)]),
            ("cpu:0", &[("cpu", true), ("vulkan", false)]),
            ("accelerator,!npu", &[("npu", false), ("cuda", true)]),
        ];
        for (text, answers) in cases {
            let parsed = selector(text);
            for (backend, expected) in answers {
                assert_eq!(parsed.may_use_backend(backend), *expected, "{text:?} / {backend}");
            }
        }
    }

    #[test]
    fn may_use_backend_false_is_a_proof() {
        use DeviceType::*;
        let texts = [
            "cuda",
            "gpu",
            "cpu",
            "!cpu",
            "!vulkan",
            "vulkan:*,!cpu",
            "vulkan:gpu,!gpu",
            "*",
            "!*",
            "vulkan:0,!vulkan:0",
            "discrete,!cuda:gpu",
            "other,!vulkan:other,vulkan:1",
            "integrated,!integrated_gpu",
            "cpu:*,!cpu:cpu",
            "npu:accelerator,!accelerator",
        ];
        for text in texts {
            let parsed = selector(text);
            for backend in ["cpu", "cuda", "vulkan", "npu", "hip"] {
                if parsed.may_use_backend(backend) {
                    continue;
                }
                for device_type in [Cpu, IntegratedGpu, DiscreteGpu, Accelerator, Other] {
                    for index in 0..4 {
                        let outcome = parsed.evaluate(backend, index, device_type);
                        assert!(
                            matches!(outcome, Match::Excluded(_) | Match::NotNamed),
                            "{text:?} said {backend} is unusable, but {backend}:{index} \
                             ({device_type}) gives {outcome:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn named_backends_lists_explicit_names_once() {
        assert_eq!(selector("cuda,vulkan:0,cpu").named_backends(), ["cuda", "vulkan"]);
        assert_eq!(selector("gpu,discrete,*").named_backends(), Vec::<String>::new());
        assert_eq!(
            selector("vulkan:0,vulkan:1,!hip,hip:*").named_backends(),
            ["vulkan", "hip"]
        );
        assert_eq!(selector("cpu:0").named_backends(), ["cpu"]);
        assert_eq!(selector("!cuda").named_backends(), Vec::<String>::new());
    }

    // --- choosing --------------------------------------------------------------------------

    #[test]
    fn positive_terms_are_an_order_of_preference() {
        let machine = machine();
        assert_eq!(
            order(&Selector::parse("cpu,vulkan:*,cuda").unwrap(), &machine),
            // `cpu` also matches vulkan's llvmpipe, a CPU; then vulkan's others by policy.
            ["cpu:0", "vulkan:0", "vulkan:2", "vulkan:1", "cuda:0"]
        );
        assert_eq!(
            order(&Selector::parse("cuda,vulkan,npu").unwrap(), &machine),
            ["cuda:0", "vulkan:2", "vulkan:1", "vulkan:0", "npu:0"]
        );
        assert_eq!(order(&Selector::parse("vulkan:0").unwrap(), &machine), ["vulkan:0"]);
        assert_eq!(
            order(&Selector::parse("gpu").unwrap(), &machine),
            ["vulkan:2", "cuda:0", "vulkan:1"]
        );
    }

    #[test]
    fn negative_terms_exclude_wherever_they_appear() {
        let machine = machine();
        let chosen = Selector::parse("vulkan:*,!cpu").unwrap();
        assert_eq!(order(&chosen, &machine), ["vulkan:2", "vulkan:1"]);
        let ranking = chosen.rank(&candidates(&machine));
        assert_eq!(ranking.verdicts[1].reason, "excluded by `!cpu`");
        assert!(!ranking.verdicts[1].accepted);
        assert_eq!(ranking.verdicts[1].rank, None);
        assert_eq!(ranking.verdicts[4].reason, "not named by XHAL_DEVICE=vulkan:*,!cpu");
        assert_eq!(ranking.verdicts[3].reason, "matches term 1 `vulkan:*`; discrete GPU");
        assert_eq!(ranking.verdicts[3].rank, Some(1));
        // Only negative terms: anything not excluded, in policy order.
        assert_eq!(
            order(&Selector::parse("!cpu,!npu").unwrap(), &machine),
            ["vulkan:2", "cuda:0", "vulkan:1", "odd:0"]
        );
    }

    #[test]
    fn policies_order_by_device_type_then_discovery() {
        let machine = machine();
        assert_eq!(
            order(&Selector::new(), &machine),
            ["vulkan:2", "cuda:0", "vulkan:1", "npu:0", "odd:0", "cpu:0", "vulkan:0"]
        );
        assert_eq!(
            order(&Selector::new().policy(Policy::PreferCpu), &machine),
            ["cpu:0", "vulkan:0", "vulkan:2", "cuda:0", "vulkan:1", "npu:0", "odd:0"]
        );
        assert_eq!(Policy::default(), Policy::PreferDiscreteGpu);
        assert_eq!(Policy::PreferCpu.to_string(), "prefer-cpu");
    }

    #[test]
    fn explicit_policy_follows_terms_strictly() {
        let machine = machine();
        let explicit = Selector::parse("vulkan:*,cpu").unwrap().policy(Policy::Explicit);
        // Within a term, discovery order: device types play no part.
        assert_eq!(
            order(&explicit, &machine),
            ["vulkan:0", "vulkan:1", "vulkan:2", "cpu:0"]
        );
        let negative = Selector::parse("!vulkan").unwrap().policy(Policy::Explicit);
        assert_eq!(order(&negative, &machine), ["cpu:0", "cuda:0", "npu:0", "odd:0"]);
        let choice = negative.choose(&candidates(&machine)).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose cpu:0 (xhal CPU reference device 0): first device in discovery order that \
             XHAL_DEVICE=!vulkan allows (policy explicit)"
        );
        let choice = explicit.choose(&candidates(&machine)).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose vulkan:0 (llvmpipe): first match of term 1 `vulkan:*` in \
             XHAL_DEVICE=vulkan:*,cpu; 3 devices match it, taken in discovery order"
        );

        let without = Selector::new().policy(Policy::Explicit);
        let ranking = without.rank(&candidates(&machine));
        assert!(ranking.accepted.is_empty());
        assert!(ranking.verdicts[0].reason.contains("needs a device selector"));
        let error = without.choose(&candidates(&machine)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        assert!(
            error.message().starts_with("policy explicit needs a device selector"),
            "{error}"
        );
        assert!(error
            .message()
            .contains("present: cpu:0 (xhal CPU reference device 0, cpu), "));
    }

    #[test]
    fn each_requirement_gives_its_reason() {
        let mut small = device("small", DeviceType::DiscreteGpu);
        small.total_memory = GIB;
        small.features = Features::F16;
        small.kernel_formats = vec![KernelFormat::PTX];
        let mut bare = device("bare", DeviceType::IntegratedGpu);
        bare.kernel_formats.clear();
        bare.total_memory = 2 * GIB - 1;
        let list = vec![("cuda", 0, small), ("vulkan", 0, bare), ("cpu", 0, cpu_reference())];
        let candidates = candidates(&list);

        let reason = |selector: Selector, which: usize| selector.rank(&candidates).verdicts[which].reason.clone();
        assert_eq!(
            reason(Selector::new().require_features(Features::F64), 0),
            "lacks feature f64"
        );
        assert_eq!(
            reason(Selector::new().require_features(Features::F64 | Features::I64), 0),
            "lacks features f64, i64"
        );
        assert_eq!(
            reason(Selector::new().require_features(Features(1 << 60)), 0),
            "lacks feature 0x1000000000000000"
        );
        assert_eq!(
            reason(Selector::new().min_memory(2 * GIB), 0),
            "has 1.0 GiB, needs 2.0 GiB"
        );
        assert_eq!(
            reason(Selector::new().min_memory(2 * GIB), 1),
            "has 2147483647 bytes, needs 2147483648 bytes"
        );
        assert_eq!(reason(Selector::new().min_memory(512 << 20), 0), "discrete GPU");
        assert_eq!(
            reason(Selector::new().require_kernel_format(KernelFormat::WGSL), 0),
            "accepts none of the kernel formats wgsl (it accepts ptx)"
        );
        assert_eq!(
            reason(
                Selector::new()
                    .require_kernel_format(KernelFormat::WGSL)
                    .require_kernel_format(KernelFormat::SPIRV_SHADER),
                1
            ),
            "accepts none of the kernel formats wgsl, spirv-shader (it accepts none)"
        );
        // A device passes when it accepts any one of the formats.
        let either = Selector::new()
            .require_kernel_format(KernelFormat::WGSL)
            .require_kernel_format(KernelFormat::PTX);
        assert!(either.rank(&candidates).verdicts[0].accepted);
        // Every failing requirement is listed.
        assert_eq!(
            reason(
                Selector::new()
                    .require_features(Features::F64)
                    .min_memory(4 * GIB)
                    .require_kernel_format(KernelFormat::WGSL),
                0
            ),
            "lacks feature f64; has 1.0 GiB, needs 4.0 GiB; accepts none of the kernel formats \
             wgsl (it accepts ptx)"
        );

        // Nothing meets them: the error says which devices and why.
        let strict = Selector::new().min_memory(64 * GIB);
        let error = strict.choose(&candidates).unwrap_err();
        assert_eq!(
            error.message(),
            "no device meets the requirements (at least 64.0 GiB of memory); present: \
             cuda:0 (small, discrete_gpu) [has 1.0 GiB, needs 64.0 GiB], \
             vulkan:0 (bare, integrated_gpu) [has 2.0 GiB, needs 64.0 GiB], \
             cpu:0 (xhal CPU reference device 0, cpu) [has 8.0 GiB, needs 64.0 GiB]"
        );
        let with_selector = Selector::parse("cuda,!cpu").unwrap().require_features(Features::F64);
        let error = with_selector.choose(&candidates).unwrap_err();
        assert_eq!(
            error.message(),
            "of the devices XHAL_DEVICE \"cuda,!cpu\" matches, none meets the requirements \
             (features f64); present: cuda:0 (small, discrete_gpu) [lacks feature f64], \
             vulkan:0 (bare, integrated_gpu), \
             cpu:0 (xhal CPU reference device 0, cpu) [excluded by `!cpu`]"
        );
    }

    #[test]
    fn matching_nothing_lists_what_is_present() {
        let list = vec![("cpu", 0, cpu_reference())];
        let candidates = candidates(&list);
        let error = Selector::parse("cuda").unwrap().choose(&candidates).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        assert_eq!(
            error.message(),
            "XHAL_DEVICE \"cuda\" matches no device; present: cpu:0 (xhal CPU reference device \
             0, cpu); backend \"cuda\" is not present (backends present: cpu)"
        );
        let error = Selector::parse("cuda:0,hip,gpu")
            .unwrap()
            .choose(&candidates)
            .unwrap_err();
        assert!(
            error
                .message()
                .ends_with("; backends \"cuda\", \"hip\" are not present (backends present: cpu)"),
            "{error}"
        );
        // The backend is there but the device is not: no "not present" clause.
        let error = Selector::parse("cpu:1").unwrap().choose(&candidates).unwrap_err();
        assert_eq!(
            error.message(),
            "XHAL_DEVICE \"cpu:1\" matches no device; present: cpu:0 (xhal CPU reference device \
             0, cpu)"
        );
        let error = Selector::parse("!cpu").unwrap().choose(&candidates).unwrap_err();
        assert_eq!(
            error.message(),
            "XHAL_DEVICE \"!cpu\" matches no device; present: cpu:0 (xhal CPU reference device \
             0, cpu) [excluded by `!cpu`]"
        );
        let error = Selector::parse("cuda").unwrap().choose(&[]).unwrap_err();
        assert_eq!(
            error.message(),
            "XHAL_DEVICE \"cuda\" matches no device; present: none; backend \"cuda\" is not \
             present (no backend reported a device)"
        );
        let error = Selector::new().choose(&[]).unwrap_err();
        assert_eq!(error.message(), "no device is present");
    }

    #[test]
    fn choices_explain_themselves() {
        let list = vec![("cpu", 0, cpu_reference())];
        let candidates = candidates(&list);
        let choice = Selector::parse("cpu").unwrap().choose(&candidates).unwrap();
        assert_eq!(choice.index, 0);
        assert_eq!(
            choice.explanation.summary,
            "chose cpu:0 (xhal CPU reference device 0): first match of term 1 `cpu` in XHAL_DEVICE=cpu"
        );
        let choice = Selector::new().choose(&candidates).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose cpu:0 (xhal CPU reference device 0): best by policy prefer-discrete-gpu \
             (cpu; no GPU present)"
        );

        let machine = machine();
        let all = super::tests::candidates(&machine);
        let choice = Selector::new().choose(&all).unwrap();
        assert_eq!(choice.index, 3);
        assert_eq!(
            choice.explanation.summary,
            "chose vulkan:2 (RTX 4090): best by policy prefer-discrete-gpu (discrete_gpu)"
        );
        let no_gpu = Selector::parse("!gpu").unwrap();
        let choice = no_gpu.choose(&all).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose npu:0 (Hexagon): best by policy prefer-discrete-gpu (accelerator; no GPU \
             accepted; XHAL_DEVICE=!gpu)"
        );
        let choice = Selector::parse("gpu").unwrap().choose(&all).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose vulkan:2 (RTX 4090): first match of term 1 `gpu` in XHAL_DEVICE=gpu; 3 devices \
             match it, ordered by policy prefer-discrete-gpu, then discovery order"
        );
        let choice = Selector::new().policy(Policy::PreferCpu).choose(&all[2..4]).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose vulkan:2 (RTX 4090): best by policy prefer-cpu (discrete_gpu; no CPU present)"
        );

        let text = Selector::parse("vulkan:*,!cpu")
            .unwrap()
            .choose(&all[..4])
            .unwrap()
            .explanation
            .to_string();
        assert_eq!(
            text,
            "chose vulkan:2 (RTX 4090): first match of term 1 `vulkan:*` in XHAL_DEVICE=vulkan:*,!cpu; \
             2 devices match it, ordered by policy prefer-discrete-gpu, then discovery order\n  \
             -- cpu:0 (xhal CPU reference device 0): rejected: excluded by `!cpu`\n  \
             -- vulkan:0 (llvmpipe): rejected: excluded by `!cpu`\n  \
             #2 vulkan:1 (Radeon 780M): matches term 1 `vulkan:*`; integrated GPU\n  \
             #1 vulkan:2 (RTX 4090): matches term 1 `vulkan:*`; discrete GPU"
        );
    }

    #[test]
    fn choosing_names_the_origin() {
        let machine = machine();
        let all = candidates(&machine);
        let parse = |text: &str| Selector::parse_from(text, "SELECTOR").unwrap();

        let choice = parse("vulkan:*,!cpu").choose(&all).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose vulkan:2 (RTX 4090): first match of term 1 `vulkan:*` in SELECTOR=vulkan:*,!cpu; \
             2 devices match it, ordered by policy prefer-discrete-gpu, then discovery order"
        );
        assert_eq!(
            choice.explanation.verdicts[4].reason,
            "not named by SELECTOR=vulkan:*,!cpu"
        );
        let choice = parse("!gpu").choose(&all).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose npu:0 (Hexagon): best by policy prefer-discrete-gpu (accelerator; no GPU \
             accepted; SELECTOR=!gpu)"
        );
        let choice = parse("!vulkan").policy(Policy::Explicit).choose(&all).unwrap();
        assert_eq!(
            choice.explanation.summary,
            "chose cpu:0 (xhal CPU reference device 0): first device in discovery order that \
             SELECTOR=!vulkan allows (policy explicit)"
        );

        let list = vec![("cpu", 0, cpu_reference())];
        let one = candidates(&list);
        let error = parse("cuda").choose(&one).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        assert_eq!(
            error.message(),
            "SELECTOR \"cuda\" matches no device; present: cpu:0 (xhal CPU reference device \
             0, cpu); backend \"cuda\" is not present (backends present: cpu)"
        );
        let error = parse("cpu")
            .require_features(Features(1 << 60))
            .choose(&one)
            .unwrap_err();
        assert!(
            error
                .message()
                .starts_with("of the devices SELECTOR \"cpu\" matches, none meets the requirements"),
            "{error}"
        );
        for text in ["cuda", "cpu:1", "!cpu"] {
            let error = parse(text).choose(&one).unwrap_err();
            assert!(!error.message().contains(ENV_VAR), "{error}");
        }
        // Without a device selector, the explicit policy's hint is about the variable itself.
        let error = Selector::new().policy(Policy::Explicit).choose(&one).unwrap_err();
        assert!(error.message().contains("set XHAL_DEVICE"), "{error}");
    }

    #[test]
    fn verdicts_serialize() {
        let list = vec![("cpu", 0, cpu_reference())];
        let choice = Selector::new().choose(&candidates(&list)).unwrap();
        let json = serde_json::to_value(&choice.explanation).unwrap();
        assert_eq!(
            json["verdicts"][0],
            serde_json::json!({
                "device": "cpu:0 (xhal CPU reference device 0)",
                "accepted": true,
                "rank": 1,
                "reason": "CPU",
            })
        );
        assert!(json["summary"].as_str().unwrap().starts_with("chose cpu:0"));
    }

    #[test]
    fn the_environment_value_is_read_leniently_but_parsed_strictly() {
        assert_eq!(Selector::from_env_value(None).unwrap(), Selector::new());
        assert_eq!(Selector::from_env_value(Some("".into())).unwrap(), Selector::new());
        assert_eq!(Selector::from_env_value(Some("  ".into())).unwrap(), Selector::new());
        let parsed = Selector::from_env_value(Some("cuda, cpu".into())).unwrap();
        assert_eq!(
            parsed.device_selector().map(ToString::to_string).as_deref(),
            Some("cuda,cpu")
        );
        let error = Selector::from_env_value(Some("cuda,".into())).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Selection);
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let error = Selector::from_env_value(Some(OsString::from_vec(vec![0x63, 0xff]))).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Selection);
            assert!(error.message().contains("not valid UTF-8"), "{error}");
        }
    }

    #[test]
    fn builder_keeps_every_setting() {
        let selector = Selector::new()
            .with_devices(selector("cuda"))
            .with_devices(selector("vulkan"))
            .require_features(Features::F16)
            .require_features(Features::F64)
            .min_memory(GIB)
            .require_kernel_format(KernelFormat::WGSL)
            .require_kernel_format(KernelFormat::WGSL)
            .policy(Policy::PreferCpu);
        assert_eq!(selector.device_selector(), Some(&self::selector("vulkan")));
        assert_eq!(selector.features, Features::F16 | Features::F64);
        assert_eq!(selector.kernel_formats, [KernelFormat::WGSL]);
        assert_eq!(selector.policy, Policy::PreferCpu);
        assert_eq!(
            selector.requirements(),
            "features f16, f64; at least 1.0 GiB of memory; a kernel format of wgsl"
        );
    }

    #[test]
    fn bytes_are_written_in_binary_units() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1023), "1023 bytes");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(512 << 20), "512.0 MiB");
        assert_eq!(format_bytes(3 << 40), "3.0 TiB");
        assert_eq!(format_bytes(u64::MAX), "16777216.0 TiB");
    }
}
