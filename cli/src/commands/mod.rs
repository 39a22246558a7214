//! One module per subcommand. Each returns its [`Output`] instead of printing, so that `main`
//! owns stdout and the exit code.

pub mod devices;
pub mod doctor;
pub mod info;
pub mod run;

/// What a command produced for stdout, and how the process should exit.
#[derive(Debug)]
pub struct Output {
    pub text: String,
    pub problems_found: bool,
}

impl Output {
    /// Text, with nothing wrong.
    pub fn success(text: String) -> Output {
        Output {
            text,
            problems_found: false,
        }
    }
}

/// Pretty JSON ending in a newline.
pub fn json_text(value: &impl serde::Serialize) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}
