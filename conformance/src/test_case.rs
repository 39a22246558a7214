//! What a conformance test is, and how it says what went wrong.

use crate::context::TestContext;
use xhal::{ErrorKind, Features};

/// A test's body: `Ok(())` is a pass; a [`Verdict`] says why it did not pass.
pub type TestResult = std::result::Result<(), Verdict>;

/// One test of the catalogue.
#[derive(Clone, Copy)]
pub struct TestCase {
    /// Stable id, `area.topic.case`: it names the test in reports and known-failure lists,
    /// so it never changes once published.
    pub id: &'static str,
    /// One sentence: what a pass proves.
    pub description: &'static str,
    /// What the device must offer for the test to run.
    pub requires: Requirement,
    /// The body.
    pub run: fn(&TestContext) -> TestResult,
}

impl std::fmt::Debug for TestCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCase").field("id", &self.id).finish()
    }
}

impl TestCase {
    /// The area: the id's first segment (`memory` for `memory.copy.overlap`).
    pub fn area(&self) -> &'static str {
        self.id.split('.').next().unwrap_or(self.id)
    }

    /// The profile a pass counts towards: `core` for tests every device must pass, else the
    /// optional features the test needs, joined by `+`.
    pub fn profile(&self) -> String {
        if let Some(profile) = self.requires.profile {
            profile.to_string()
        } else if self.requires.features.0 == 0 {
            "core".to_string()
        } else {
            self.requires.features.names().join("+")
        }
    }
}

/// What a test needs from the device under test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requirement {
    /// Optional features the device must claim.
    pub features: Features,
    /// The backend must be a plugin file (the ABI-level tests open it themselves).
    pub plugin_file: bool,
    /// A profile of its own, outside `core`, for behaviour beyond what WGSL guarantees (see
    /// [`Requirement::IEEE754`]).
    pub profile: Option<&'static str>,
}

impl Requirement {
    /// Nothing beyond the core contract.
    pub const CORE: Requirement = Requirement {
        features: Features(0),
        plugin_file: false,
        profile: None,
    };
    /// The backend must be loaded from a plugin file.
    pub const PLUGIN_FILE: Requirement = Requirement {
        features: Features(0),
        plugin_file: true,
        profile: None,
    };
    /// Every device runs it, but it counts towards the `ieee754` profile, not `core`: WGSL
    /// lets an implementation assume that no NaN or infinity occurs and ignore the sign of
    /// zero, so NaN, infinity and signed-zero behaviour is a promise beyond the language.
    pub const IEEE754: Requirement = Requirement {
        features: Features(0),
        plugin_file: false,
        profile: Some("ieee754"),
    };

    /// The device must claim `features`.
    pub const fn features(features: Features) -> Requirement {
        Requirement {
            features,
            plugin_file: false,
            profile: None,
        }
    }
}

/// Why a test did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The device did something the contract forbids.
    Fail(Failure),
    /// The device lacks a capability the test needs; the reason says which.
    Skip(String),
}

/// A failed check: what was checked, and the values that disagreed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// What went wrong, in a sentence.
    pub message: String,
    /// The value the contract demands, where there is one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expected: Option<String>,
    /// The value the device produced.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub actual: Option<String>,
}

impl Verdict {
    /// A failure with a message only.
    pub fn fail(message: impl Into<String>) -> Verdict {
        Verdict::Fail(Failure {
            message: message.into(),
            expected: None,
            actual: None,
        })
    }

    /// A failure showing the expected and the actual value.
    pub fn mismatch(
        message: impl Into<String>,
        expected: impl std::fmt::Debug,
        actual: impl std::fmt::Debug,
    ) -> Verdict {
        Verdict::Fail(Failure {
            message: message.into(),
            expected: Some(truncate(format!("{expected:?}"))),
            actual: Some(truncate(format!("{actual:?}"))),
        })
    }

    /// A skip, with the capability that is missing.
    pub fn skip(reason: impl Into<String>) -> Verdict {
        Verdict::Skip(reason.into())
    }
}

/// Any error the API returns where the test expected success fails the test, naming it.
impl From<xhal::Error> for Verdict {
    fn from(error: xhal::Error) -> Verdict {
        Verdict::fail(format!("unexpected error: {error}"))
    }
}

/// Long values (whole buffers) are cut so a report stays readable.
fn truncate(mut text: String) -> String {
    const LIMIT: usize = 400;
    if text.len() > LIMIT {
        let mut cut = LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// Fails with `message` unless `condition` holds.
pub fn check(condition: bool, message: impl FnOnce() -> String) -> TestResult {
    if condition {
        Ok(())
    } else {
        Err(Verdict::fail(message()))
    }
}

/// Fails unless `actual == expected`, showing both.
pub fn check_eq<T: PartialEq + std::fmt::Debug>(actual: T, expected: T, what: &str) -> TestResult {
    if actual == expected {
        Ok(())
    } else {
        Err(Verdict::mismatch(format!("{what}: wrong value"), expected, actual))
    }
}

/// Fails unless two slices are equal, naming the first differing element and how many differ.
pub fn check_slice_eq<T: PartialEq + std::fmt::Debug>(actual: &[T], expected: &[T], what: &str) -> TestResult {
    if actual.len() != expected.len() {
        return Err(Verdict::mismatch(
            format!("{what}: wrong length"),
            expected.len(),
            actual.len(),
        ));
    }
    let mut differing = actual.iter().zip(expected).enumerate().filter(|(_, (a, e))| a != e);
    match differing.next() {
        None => Ok(()),
        Some((index, (actual_value, expected_value))) => {
            let more = differing.count();
            Err(Verdict::mismatch(
                format!(
                    "{what}: element {index} differs ({} of {} elements differ)",
                    more + 1,
                    actual.len()
                ),
                expected_value,
                actual_value,
            ))
        }
    }
}

/// Fails unless every element is within `tolerance` (relative to the larger magnitude, or
/// absolute below 1) of the expected one.
pub fn check_close(actual: &[f32], expected: &[f32], tolerance: f32, what: &str) -> TestResult {
    if actual.len() != expected.len() {
        return Err(Verdict::mismatch(
            format!("{what}: wrong length"),
            expected.len(),
            actual.len(),
        ));
    }
    let far = |(a, e): (&f32, &f32)| {
        let scale = a.abs().max(e.abs()).max(1.0);
        // Written as "not close" so that a NaN on either side counts as far.
        let close = (a - e).abs() <= tolerance * scale;
        !close
    };
    let mut differing = actual.iter().zip(expected).enumerate().filter(|(_, pair)| far(*pair));
    match differing.next() {
        None => Ok(()),
        Some((index, (actual_value, expected_value))) => Err(Verdict::mismatch(
            format!(
                "{what}: element {index} is off by more than {tolerance} relative ({} of {} elements are)",
                differing.count() + 1,
                actual.len()
            ),
            expected_value,
            actual_value,
        )),
    }
}

/// Fails unless `result` is an error of one of `kinds`: the check for misuse that must be
/// refused. Returns the error's message for further checks.
pub fn expect_error<T: std::fmt::Debug>(
    result: xhal::Result<T>,
    kinds: &[ErrorKind],
    what: &str,
) -> std::result::Result<String, Verdict> {
    match result {
        Ok(value) => Err(Verdict::mismatch(
            format!("{what}: was accepted, must be refused"),
            format!("an error of kind {}", kind_list(kinds)),
            format!("Ok({value:?})"),
        )),
        Err(error) if kinds.contains(&error.kind()) => Ok(error.message().to_string()),
        Err(error) => Err(Verdict::mismatch(
            format!("{what}: refused with the wrong kind of error"),
            format!("an error of kind {}", kind_list(kinds)),
            error.to_string(),
        )),
    }
}

fn kind_list(kinds: &[ErrorKind]) -> String {
    kinds.iter().map(|kind| kind.name()).collect::<Vec<_>>().join(" or ")
}
