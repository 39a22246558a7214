//! The `XHAL_DEVICE` grammar: its values ([`DeviceSelector`] and the terms it is made of)
//! and the parser that reads them from text.

use super::ENV_VAR;
use crate::backend::DeviceType;
use crate::error::{Error, ErrorKind, Result};
use std::fmt;

/// Longest piece of user text quoted in a message, in characters; longer text is shortened so
/// that a pasted megabyte does not become a megabyte of error message.
const QUOTE_LIMIT: usize = 64;

/// Width of the window of selector text echoed above the caret of a syntax error.
pub(super) const ECHO_WIDTH: usize = 72;

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
pub(super) enum Match {
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
    pub(super) origin: String,
}

impl PartialEq for DeviceSelector {
    fn eq(&self, other: &DeviceSelector) -> bool {
        self.terms == other.terms
    }
}

impl Eq for DeviceSelector {}

impl DeviceSelector {
    /// Parses the `XHAL_DEVICE` grammar (see the [module documentation](super)); the same as
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
    pub(super) fn evaluate(&self, backend: &str, index: u32, device_type: DeviceType) -> Match {
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

    pub(super) fn term(&self, position: usize) -> String {
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
