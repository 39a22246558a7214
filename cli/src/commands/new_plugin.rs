//! `xhal new-plugin NAME`: a copy of the plugin template (`plugin-template/`, the `hostmem`
//! backend) with the names filled in, as a standalone crate.
//!
//! The template's files are compiled into this binary, so an installed `xhal` scaffolds
//! without the repository. Names are substituted by plain text replacement (`hostmem` becomes
//! NAME, `Hostmem` its CamelCase form, `xhal_hostmem` the library name): the template uses no
//! placeholder syntax, so it also builds as it is, inside the workspace.

use super::{json_text, ExitError, Output, EXIT_USAGE_ERROR};
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The template, file by file (path relative to the crate root, then its text). A test fails
/// when this list and `plugin-template/` differ.
pub const TEMPLATE_FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../../plugin-template/Cargo.toml")),
    ("README.md", include_str!("../../../plugin-template/README.md")),
    ("rustfmt.toml", include_str!("../../../plugin-template/rustfmt.toml")),
    ("src/lib.rs", include_str!("../../../plugin-template/src/lib.rs")),
    (
        "tests/backend.rs",
        include_str!("../../../plugin-template/tests/backend.rs"),
    ),
];

/// The template's files for `cargo generate`, which `xhal new-plugin` does not copy: it fills
/// in the names itself. A test checks that Cargo.toml.liquid renders to Cargo.toml.
#[cfg(test)]
const CARGO_GENERATE_FILES: &[&str] = &["cargo-generate.toml", "Cargo.toml.liquid"];

/// The template's backend name, replaced by NAME everywhere.
const TEMPLATE_NAME: &str = "hostmem";

/// Backends xhal ships: a plugin of the same name would shadow or be shadowed by them.
const RESERVED_NAMES: &[&str] = &["cpu", "vulkan", "wgpu", "opencl", "level-zero", "cuda", "rocm"];

/// The template's dependencies on xhal, as its Cargo.toml spells them inside the workspace.
const XHAL_DEPENDENCIES: &[(&str, &str)] = &[("xhal-backend", "hal/backend"), ("xhal-cpu", "backends/cpu")];

#[derive(Debug, clap::Args)]
pub struct NewPluginArgs {
    /// The backend's name: a lowercase letter, then lowercase letters, digits, `_` or `-`
    /// (64 characters at most). Selectors use it (`NAME:0`), and the plugin file is
    /// `libxhal_NAME.so`.
    pub name: String,
    /// Where to write the crate (created if missing; must be empty if it exists).
    /// Default: `xhal-NAME` in the current folder.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The xhal checkout the plugin depends on by path (its `hal/backend` and `backends/cpu`).
    /// Default: the checkout this `xhal` was built from, when it is still there; otherwise
    /// the plugin depends on the registry version of xhal-backend and xhal-cpu.
    #[arg(long, value_name = "DIR")]
    pub xhal_source: Option<PathBuf>,
    /// Write JSON (schema in docs/cli.md) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The names a plugin called NAME gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginNames {
    /// The backend name, NAME itself.
    pub backend: String,
    /// The package: `xhal-NAME`.
    #[serde(rename = "crate")]
    pub crate_name: String,
    /// The library: `xhal_NAME` with `-` written `_` (cargo's rule).
    pub library: String,
    /// The file the loader looks for: `libxhal_NAME.so`.
    pub plugin_file: String,
    /// What cargo writes: `libxhal_NAME.so` with `-` written `_`.
    pub built_file: String,
    /// NAME in CamelCase, for type names (`HostmemBackend` becomes `AcmeBackend`).
    pub type_prefix: String,
}

impl PluginNames {
    /// The names for `name`, or why `name` cannot be a backend name.
    pub fn new(name: &str) -> anyhow::Result<PluginNames> {
        if !xhal::plugin::adapter::is_valid_backend_name(name) {
            anyhow::bail!(
                "`{name}` is not a valid backend name: it must start with a lowercase letter (a-z), continue with \
                 lowercase letters, digits, `_` or `-`, and be at most 64 characters, since it names the plugin file \
                 (libxhal_NAME.so) and is a word of device selectors (NAME:0)"
            );
        }
        if RESERVED_NAMES.contains(&name) {
            anyhow::bail!(
                "`{name}` is the name of a backend xhal ships; a plugin of that name would shadow it. Reserved: {}",
                RESERVED_NAMES.join(", ")
            );
        }
        let library = format!("xhal_{}", name.replace('-', "_"));
        let type_prefix = name
            .split(['-', '_'])
            .filter(|part| !part.is_empty())
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect();
        Ok(PluginNames {
            backend: name.to_string(),
            crate_name: format!("xhal-{name}"),
            plugin_file: format!("libxhal_{name}{}", std::env::consts::DLL_SUFFIX),
            built_file: format!("lib{library}{}", std::env::consts::DLL_SUFFIX),
            library,
            type_prefix,
        })
    }
}

/// How the new crate depends on xhal-backend and xhal-cpu.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum XhalDependency {
    /// By path, into an xhal checkout.
    Path { path: PathBuf },
    /// By version, from the registry.
    Version { version: String },
}

/// The template's files for `names`, paths relative to the new crate's root.
pub fn render(names: &PluginNames, dependency: &XhalDependency) -> Vec<(&'static str, String)> {
    let template_type_prefix = "Hostmem";
    TEMPLATE_FILES
        .iter()
        .map(|(path, text)| {
            let mut text = text.to_string();
            if *path == "Cargo.toml" {
                text = rewrite_manifest(&text, dependency);
            }
            // Cargo's output keeps cargo's spelling; every other `libxhal_hostmem` is the file
            // the loader wants, named after the backend.
            let text = text
                .replace(
                    &format!("target/release/libxhal_{TEMPLATE_NAME}"),
                    &format!("target/release/lib{}", names.library),
                )
                .replace(
                    &format!("libxhal_{TEMPLATE_NAME}"),
                    &format!("libxhal_{}", names.backend),
                )
                .replace(&format!("xhal_{TEMPLATE_NAME}"), &names.library)
                .replace(template_type_prefix, &names.type_prefix)
                .replace(TEMPLATE_NAME, &names.backend);
            (*path, text)
        })
        .collect()
}

/// Points the xhal dependencies at `dependency` and makes the crate its own workspace, so it
/// builds wherever it is put, even inside another workspace's folder.
fn rewrite_manifest(manifest: &str, dependency: &XhalDependency) -> String {
    let mut text = manifest.to_string();
    for (package, relative) in XHAL_DEPENDENCIES {
        let in_workspace = format!("{package} = {{ path = \"../{relative}\" }}");
        let replacement = match dependency {
            XhalDependency::Path { path } => {
                let path = path.join(relative);
                format!("{package} = {{ path = {} }}", toml_string(&path.to_string_lossy()))
            }
            XhalDependency::Version { version } => format!("{package} = \"{version}\""),
        };
        text = text.replace(&in_workspace, &replacement);
    }
    text.push_str("\n# Its own workspace: it builds wherever it is put.\n[workspace]\n");
    text
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            control if control.is_control() => quoted.push_str(&format!("\\u{:04X}", control as u32)),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// The xhal checkout this binary was built from, if it is still there.
fn build_checkout() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    is_checkout(root).then(|| root.to_path_buf())
}

fn is_checkout(root: &Path) -> bool {
    XHAL_DEPENDENCIES
        .iter()
        .all(|(_, relative)| root.join(relative).join("Cargo.toml").is_file())
}

fn usage(error: anyhow::Error) -> anyhow::Error {
    ExitError::wrap(EXIT_USAGE_ERROR, error)
}

#[derive(Serialize)]
struct NewPluginJson<'a> {
    schema_version: u32,
    directory: PathBuf,
    #[serde(flatten)]
    names: &'a PluginNames,
    xhal_dependency: &'a XhalDependency,
    files: Vec<&'static str>,
}

pub fn run(args: &NewPluginArgs) -> anyhow::Result<Output> {
    let names = PluginNames::new(&args.name).map_err(usage)?;
    let dependency = match &args.xhal_source {
        Some(source) => {
            let absolute = std::path::absolute(source)
                .with_context(|| format!("resolving --xhal-source {}", source.display()))
                .map_err(usage)?;
            if !is_checkout(&absolute) {
                return Err(usage(anyhow::anyhow!(
                    "--xhal-source {} is not an xhal checkout: it has no hal/backend/Cargo.toml and \
                     backends/cpu/Cargo.toml",
                    source.display()
                )));
            }
            XhalDependency::Path { path: absolute }
        }
        None => match build_checkout() {
            Some(path) => XhalDependency::Path { path },
            None => XhalDependency::Version {
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
        },
    };
    let directory = args.dir.clone().unwrap_or_else(|| PathBuf::from(&names.crate_name));
    match std::fs::read_dir(&directory) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(usage(anyhow::anyhow!(
                    "{} already exists and is not empty; choose another --dir or empty it",
                    directory.display()
                )));
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(usage(anyhow::anyhow!(
                "{} exists and is not a folder; choose another --dir",
                directory.display()
            )));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("reading {}", directory.display())));
        }
    }
    let files = render(&names, &dependency);
    for (relative, text) in &files {
        let path = directory.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        return json_text(&NewPluginJson {
            schema_version: crate::listing::SCHEMA_VERSION,
            directory: directory.clone(),
            names: &names,
            xhal_dependency: &dependency,
            files: files.iter().map(|(path, _)| *path).collect(),
        })
        .map(Output::success);
    }
    let depends = match &dependency {
        XhalDependency::Path { path } => format!("xhal-backend and xhal-cpu by path, from {}", path.display()),
        XhalDependency::Version { version } => {
            format!("xhal-backend and xhal-cpu {version} from the registry (no xhal checkout found; see --xhal-source)")
        }
    };
    let dir = directory.display();
    // The loader, and so xhal-cts, reads the backend's name from the file name, which cargo
    // spells with `_` for `-`.
    let (copy, certified) = if names.built_file == names.plugin_file {
        (String::new(), format!("target/release/{}", names.built_file))
    } else {
        (
            format!(
                "  cp target/release/{} {}  # the loader reads the backend's name from the file name\n",
                names.built_file, names.plugin_file
            ),
            names.plugin_file.clone(),
        )
    };
    Ok(Output::success(format!(
        "created plugin `{backend}` in {dir}: crate {krate}, library {library}\n\
         depends on {depends}\n\
         next:\n  cd {dir}\n  cargo build --release\n{copy}  xhal-cts run --plugin {certified} --report cts-report\n",
        backend = names.backend,
        krate = names.crate_name,
        library = names.library,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `plugin-template/` (but build output and editor leftovers), relative.
    fn template_folder_files() -> Vec<String> {
        fn walk(root: &Path, folder: &Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(folder).expect("read plugin-template") {
                let path = entry.expect("a folder entry").path();
                let relative = path.strip_prefix(root).expect("inside the root");
                if relative.starts_with("target") || CARGO_GENERATE_FILES.iter().any(|file| relative == Path::new(file))
                {
                    continue;
                }
                if path.is_dir() {
                    walk(root, &path, found);
                } else {
                    found.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-template");
        let mut found = Vec::new();
        walk(&root, &root, &mut found);
        found.sort();
        found
    }

    #[test]
    fn the_embedded_template_is_plugin_template_file_for_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-template");
        let mut embedded: Vec<String> = TEMPLATE_FILES.iter().map(|(path, _)| path.to_string()).collect();
        embedded.sort();
        assert_eq!(
            embedded,
            template_folder_files(),
            "cli/src/commands/new_plugin.rs TEMPLATE_FILES must list every file of plugin-template/"
        );
        for (path, text) in TEMPLATE_FILES {
            let on_disk = std::fs::read_to_string(root.join(path)).expect("read a template file");
            assert!(
                on_disk == *text,
                "the embedded {path} differs from plugin-template/{path}"
            );
        }
    }

    /// `cargo generate` renders Cargo.toml.liquid over Cargo.toml: for the template's own
    /// names it must give the same manifest, made its own workspace as `xhal new-plugin`
    /// makes it.
    #[test]
    fn the_cargo_generate_manifest_is_the_template_manifest() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-template");
        let liquid = std::fs::read_to_string(root.join("Cargo.toml.liquid")).expect("read Cargo.toml.liquid");
        let rendered = liquid
            .replace("{{project-name}}", TEMPLATE_NAME)
            .replace("{{xhal_path}}", "..");
        assert!(
            !rendered.contains("{{"),
            "a placeholder cargo-generate does not know: {rendered}"
        );
        let manifest = TEMPLATE_FILES
            .iter()
            .find(|(path, _)| *path == "Cargo.toml")
            .map(|(_, text)| *text)
            .expect("the template has a Cargo.toml");
        let standalone = format!("{manifest}\n# Its own workspace: it builds wherever it is put.\n[workspace]\n");
        assert_eq!(
            rendered, standalone,
            "plugin-template/Cargo.toml.liquid and Cargo.toml differ"
        );
        let config = std::fs::read_to_string(root.join("cargo-generate.toml")).expect("read cargo-generate.toml");
        assert!(
            config.contains("include = [\"Cargo.toml\"]"),
            "only the manifest may be rendered by Liquid (Rust format strings use braces): {config}"
        );
    }

    #[test]
    fn names_follow_the_backend_grammar_and_cargo_rules() {
        let names = PluginNames::new("my-npu2").unwrap();
        assert_eq!(names.crate_name, "xhal-my-npu2");
        assert_eq!(names.library, "xhal_my_npu2");
        assert_eq!(names.plugin_file, "libxhal_my-npu2.so");
        assert_eq!(names.built_file, "libxhal_my_npu2.so");
        assert_eq!(names.type_prefix, "MyNpu2");
        for bad in ["", "Acme", "9lives", "acme!", "a b", "ac.me", "über", &"a".repeat(65)] {
            let error = PluginNames::new(bad).unwrap_err().to_string();
            assert!(error.contains("not a valid backend name"), "{bad}: {error}");
        }
        let reserved = PluginNames::new("cuda").unwrap_err().to_string();
        assert!(reserved.contains("shadow"), "{reserved}");
        assert!(PluginNames::new(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn rendering_replaces_every_template_name_and_the_dependency_paths() {
        let names = PluginNames::new("acme").unwrap();
        let files = render(
            &names,
            &XhalDependency::Path {
                path: PathBuf::from("/opt/xhal \"src\""),
            },
        );
        for (path, text) in &files {
            // Case by case: the executor's `HostMemory` is not the template's name.
            for left in [TEMPLATE_NAME, "Hostmem", "HOSTMEM"] {
                assert!(!text.contains(left), "{path} still says {left}");
            }
        }
        let manifest = &files.iter().find(|(path, _)| *path == "Cargo.toml").unwrap().1;
        assert!(manifest.contains("name = \"xhal-acme\""), "{manifest}");
        // The library takes the package's name (cargo writes `xhal_acme`), as cargo-generate's
        // copies do.
        assert_eq!(manifest.matches("name = ").count(), 1, "{manifest}");
        assert!(
            manifest.contains(r#"xhal-backend = { path = "/opt/xhal \"src\"/hal/backend" }"#),
            "{manifest}"
        );
        assert!(manifest.contains(r#"xhal-cpu = { path = "/opt/xhal \"src\"/backends/cpu" }"#));
        assert!(manifest.trim_end().ends_with("[workspace]"), "{manifest}");
        let hyphenated = render(
            &PluginNames::new("my-npu").unwrap(),
            &XhalDependency::Version {
                version: "0.1.0".into(),
            },
        );
        let readme = &hyphenated.iter().find(|(path, _)| *path == "README.md").unwrap().1;
        assert!(
            readme.contains("cp target/release/libxhal_my_npu.so libxhal_my-npu.so"),
            "{readme}"
        );
        assert!(readme.contains("xhal-cts run --plugin libxhal_my-npu.so"), "{readme}");
        let lib = &files.iter().find(|(path, _)| *path == "src/lib.rs").unwrap().1;
        // The backend's name comes from the package's, `xhal-acme`.
        assert!(lib.contains("match env!(\"CARGO_PKG_NAME\")"), "{lib}");
        assert!(lib.contains("pub struct AcmeDriver"));
        let versioned = render(
            &names,
            &XhalDependency::Version {
                version: "0.1.0".to_string(),
            },
        );
        let manifest = &versioned.iter().find(|(path, _)| *path == "Cargo.toml").unwrap().1;
        assert!(manifest.contains("xhal-backend = \"0.1.0\"") && manifest.contains("xhal-cpu = \"0.1.0\""));
    }
}
