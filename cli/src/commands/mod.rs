//! One module per subcommand. Each returns its [`Output`] instead of printing, so that `main`
//! owns stdout and the exit code.

pub mod bench;
pub mod devices;
pub mod doctor;
pub mod info;
pub mod new_plugin;
pub mod run;
pub mod trace;

/// Exit status of success.
pub const EXIT_SUCCESS: u8 = 0;
/// Exit status of a runtime error: discovery failed, a selector is malformed or matches nothing,
/// `xhal run` failed, or a `xhal bench` measurement failed.
pub const EXIT_RUNTIME_ERROR: u8 = 1;
/// Exit status of a usage error: clap's, a malformed `xhal bench --device` selector, and a
/// `xhal new-plugin` NAME, --dir or --xhal-source it refuses.
pub const EXIT_USAGE_ERROR: u8 = 2;
/// Exit status when `xhal doctor` found problems, or `xhal bench` found no device to measure.
pub const EXIT_PROBLEMS_FOUND: u8 = 3;

/// What a command produced for stdout, and how the process should exit.
#[derive(Debug)]
pub struct Output {
    pub text: String,
    pub exit_code: u8,
}

impl Output {
    /// Text, with nothing wrong.
    pub fn success(text: String) -> Output {
        Output {
            text,
            exit_code: EXIT_SUCCESS,
        }
    }

    /// Text to print in full, and then exit with `exit_code`.
    pub fn with_exit_code(text: String, exit_code: u8) -> Output {
        Output { text, exit_code }
    }
}

/// An error that exits with its own status instead of [`EXIT_RUNTIME_ERROR`]. It prints as
/// the error it wraps, whole chain included.
#[derive(Debug)]
pub struct ExitError {
    pub exit_code: u8,
    pub error: anyhow::Error,
}

impl ExitError {
    /// `error`, exiting with `exit_code`, as an `anyhow::Error` that `main` recognises.
    pub fn wrap(exit_code: u8, error: impl Into<anyhow::Error>) -> anyhow::Error {
        anyhow::Error::new(ExitError {
            exit_code,
            error: error.into(),
        })
    }
}

impl std::fmt::Display for ExitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for ExitError {}

/// Pretty JSON ending in a newline.
pub fn json_text(value: &impl serde::Serialize) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}
