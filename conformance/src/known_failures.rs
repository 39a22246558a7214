//! Declared failures: tests known to fail on a backend because of the stack under it.
//!
//! A TOML file of `[[known_failure]]` tables:
//!
//! ```toml
//! [[known_failure]]
//! test = "compute.integer.division_by_zero"   # a test id, or a glob over ids
//! backend = "wgpu"                             # the backend's name (glob)
//! device = "*(Gl)*"                           # the device name (glob; default "*")
//! plugin_version = "*"                         # the plugin's version (glob; default "*")
//! reason = "the GL driver returns 0 for i32 division by zero; WGSL requires the dividend"
//! ```
//!
//! A declared test is reported as a known failure without running, unless the run asks for
//! known failures to run anyway; then a pass is reported as an unexpected pass.

use crate::glob::glob_matches;
use crate::test_case::TestCase;
use std::path::Path;

/// One declaration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct KnownFailure {
    /// Test id or glob.
    pub test: String,
    /// Backend name or glob.
    pub backend: String,
    /// Device name glob.
    #[serde(default = "any")]
    pub device: String,
    /// Plugin version glob.
    #[serde(default = "any")]
    pub plugin_version: String,
    /// The cause, for the report.
    pub reason: String,
}

fn any() -> String {
    "*".to_string()
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownFailureFile {
    #[serde(default)]
    known_failure: Vec<KnownFailure>,
}

/// Every declaration of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownFailures {
    entries: Vec<KnownFailure>,
}

/// Where a run stands, for matching declarations.
#[derive(Debug, Clone, Copy)]
pub struct RunIdentity<'a> {
    /// Backend name.
    pub backend: &'a str,
    /// Plugin version.
    pub plugin_version: &'a str,
    /// Device name.
    pub device: &'a str,
}

impl KnownFailures {
    /// No declarations.
    pub fn none() -> KnownFailures {
        KnownFailures::default()
    }

    /// Reads and checks a file: every entry must have a reason and must name at least one
    /// test of `catalogue`, so a renamed test cannot leave a silent, stale declaration.
    pub fn load(path: &Path, catalogue: &[TestCase]) -> Result<KnownFailures, String> {
        let text =
            std::fs::read_to_string(path).map_err(|error| format!("{}: cannot read: {error}", path.display()))?;
        KnownFailures::parse(&text, catalogue).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Parses declarations from TOML text; see [`KnownFailures::load`].
    pub fn parse(text: &str, catalogue: &[TestCase]) -> Result<KnownFailures, String> {
        let file: KnownFailureFile = toml::from_str(text).map_err(|error| error.to_string())?;
        for (position, entry) in file.known_failure.iter().enumerate() {
            let number = position + 1;
            if entry.reason.trim().is_empty() {
                return Err(format!(
                    "known_failure #{number} (`{}`): `reason` is empty; say what in the stack causes the failure",
                    entry.test
                ));
            }
            if entry.backend.trim().is_empty() {
                return Err(format!(
                    "known_failure #{number} (`{}`): `backend` is empty",
                    entry.test
                ));
            }
            if !catalogue.iter().any(|case| glob_matches(&entry.test, case.id)) {
                return Err(format!(
                    "known_failure #{number}: `test = \"{}\"` matches no test of the catalogue (see `xhal-cts list`)",
                    entry.test
                ));
            }
        }
        Ok(KnownFailures {
            entries: file.known_failure,
        })
    }

    /// The declaration covering test `id` in this run, if any.
    pub fn find(&self, id: &str, run: RunIdentity<'_>) -> Option<&KnownFailure> {
        self.entries.iter().find(|entry| {
            glob_matches(&entry.test, id)
                && glob_matches(&entry.backend, run.backend)
                && glob_matches(&entry.device, run.device)
                && glob_matches(&entry.plugin_version, run.plugin_version)
        })
    }

    /// Every declaration.
    pub fn entries(&self) -> &[KnownFailure] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_case::{Requirement, TestResult};

    fn pass(_: &crate::TestContext) -> TestResult {
        Ok(())
    }

    const CATALOGUE: [TestCase; 2] = [
        TestCase {
            id: "compute.integer.division_by_zero",
            description: "",
            requires: Requirement::CORE,
            run: pass,
        },
        TestCase {
            id: "memory.copy.overlap",
            description: "",
            requires: Requirement::CORE,
            run: pass,
        },
    ];

    const RUN: RunIdentity<'static> = RunIdentity {
        backend: "wgpu",
        plugin_version: "0.1.0",
        device: "llvmpipe (Gl)",
    };

    #[test]
    fn a_declaration_matches_by_test_backend_device_and_version() {
        let declared = KnownFailures::parse(
            r#"
            [[known_failure]]
            test = "compute.integer.*"
            backend = "wgpu"
            device = "*(Gl)"
            reason = "GL driver"
            "#,
            &CATALOGUE,
        )
        .unwrap();
        assert_eq!(
            declared.find("compute.integer.division_by_zero", RUN).unwrap().reason,
            "GL driver"
        );
        assert!(declared.find("memory.copy.overlap", RUN).is_none());
        let vulkan = RunIdentity {
            device: "llvmpipe (Vulkan)",
            ..RUN
        };
        assert!(declared.find("compute.integer.division_by_zero", vulkan).is_none());
    }

    #[test]
    fn bad_declarations_are_refused_with_the_reason() {
        let no_reason = KnownFailures::parse(
            "[[known_failure]]\ntest = \"memory.copy.overlap\"\nbackend = \"cpu\"\nreason = \" \"\n",
            &CATALOGUE,
        );
        assert!(no_reason.unwrap_err().contains("`reason` is empty"));
        let stale = KnownFailures::parse(
            "[[known_failure]]\ntest = \"memory.copy.renamed\"\nbackend = \"cpu\"\nreason = \"x\"\n",
            &CATALOGUE,
        );
        assert!(stale.unwrap_err().contains("matches no test"));
        let typo = KnownFailures::parse(
            "[[known_failure]]\ntest = \"memory.copy.overlap\"\nbakend = \"cpu\"\nreason = \"x\"\n",
            &CATALOGUE,
        );
        assert!(typo.unwrap_err().contains("bakend"));
    }
}
