//! The harness the CLI tests share: the `xhal` binary, run as a user runs it, in a
//! controlled environment. The plugin path is a fresh folder, the user's plugin folder is
//! empty, XHAL_DEVICE is unset, and the binary runs from a folder of its own so that plugins
//! next to the build (`target/plugins`, which `make build` fills) cannot change what it finds.

// Each test crate uses part of the harness; the rest would be reported as dead code.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// CPU device memory for every run, so that sizes in the output are known.
pub const CPU_MEMORY: u64 = 1 << 30;

/// A private copy (hard link where possible) of the built binary, in a folder with no
/// `plugins` next to it.
pub fn xhal_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let built = Path::new(env!("CARGO_BIN_EXE_xhal"));
        let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xhal-cli-tests/bin");
        std::fs::create_dir_all(&folder).expect("create the binary's folder");
        let binary = folder.join("xhal");
        // Link or copy under a private name, then rename over the old one: atomic, so a test
        // run in parallel never executes a half-written file.
        let staged = folder.join(format!("xhal.{}", std::process::id()));
        let _ = std::fs::remove_file(&staged);
        if std::fs::hard_link(built, &staged).is_err() {
            std::fs::copy(built, &staged).expect("copy the xhal binary");
        }
        std::fs::rename(&staged, &binary).expect("put the xhal binary in place");
        binary
    })
}

/// A folder per test with an empty plugin folder and an empty home.
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    pub fn new(name: &str) -> Sandbox {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("xhal-cli-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let sandbox = Sandbox { root };
        for folder in [sandbox.plugins(), sandbox.home()] {
            std::fs::create_dir_all(folder).expect("create a sandbox folder");
        }
        sandbox
    }

    pub fn plugins(&self) -> PathBuf {
        self.root.join("plugins")
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The folder the binary runs in: files named by relative paths are found here.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `contents` to `name` in the sandbox, and returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(name);
        std::fs::write(&path, contents).expect("write a file into the sandbox");
        path
    }

    /// `xhal ARGS`, run in the sandbox's folder, with only the given variables besides the
    /// sandbox's own.
    pub fn run(&self, args: &[&str], variables: &[(&str, &str)]) -> Output {
        let mut command = Command::new(xhal_binary());
        command
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", self.home())
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env("XHAL_PLUGIN_PATH", self.plugins())
            .env("XHAL_CPU_MEMORY", CPU_MEMORY.to_string());
        for (name, value) in variables {
            command.env(name, value);
        }
        command.output().expect("run the xhal binary")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code, showing both streams when it is not the one expected (a code of
/// `None` means a signal: a crash).
pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit status {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

pub fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("stdout is not JSON ({error}):\n{}", stdout(output)))
}

/// The backends of a `devices --json` document called `name`.
pub fn backends_named<'v>(document: &'v Value, name: &str) -> Vec<&'v Value> {
    document["backends"]
        .as_array()
        .expect("`backends` is an array")
        .iter()
        .filter(|backend| backend["name"] == name)
        .collect()
}

/// Where `cargo build --workspace` puts the CPU plugin for this profile: next to the binary.
pub fn built_cpu_plugin() -> PathBuf {
    built_plugin("cpu")
}

/// Where `cargo build --workspace` puts the plugin of backend `name` for this profile: next to
/// the binary.
pub fn built_plugin(name: &str) -> PathBuf {
    let profile_folder = Path::new(env!("CARGO_BIN_EXE_xhal"))
        .parent()
        .expect("the binary is in a folder");
    let file = format!(
        "{}xhal_{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let plugin = profile_folder.join(file);
    assert!(
        plugin.is_file(),
        "{} is missing: this test loads the real {name} plugin; run `cargo build --workspace` \
         (same profile) first, as `make test` does",
        plugin.display()
    );
    plugin
}
