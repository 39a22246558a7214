//! Finding and loading plugin files.
//!
//! Search order (first match of a backend name wins; later files of the same name are
//! reported as shadowed):
//! 1. each folder of `XHAL_PLUGIN_PATH` (colon-separated), in order;
//! 2. next to the executable: `<exe dir>/plugins`, then `<exe dir>/../plugins` (so that
//!    `target/release/xhal` finds `target/plugins`);
//! 3. the user's folder: `$XDG_DATA_HOME/xhal/plugins` or `~/.local/share/xhal/plugins`;
//! 4. the system's folders: `/usr/local/lib/xhal/plugins`, `/usr/lib/xhal/plugins`.
//!
//! A file named `libxhal_<backend>.so` belongs to `<backend>`, so a device selector can skip
//! it without loading it. Libraries are never unloaded: a plugin may have started threads or
//! registered callbacks with its driver, and unloading such code is not safe.

use super::adapter::AbiBackend;
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use xhal_abi::{XhalPluginQueryFn, XHAL_ABI_MAJOR, XHAL_ABI_MINOR};

/// Where a search folder came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchOrigin {
    /// A folder of `XHAL_PLUGIN_PATH`.
    Environment,
    /// Next to the running executable.
    Executable,
    /// The user's plugin folder.
    User,
    /// A system plugin folder.
    System,
}

impl std::fmt::Display for SearchOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SearchOrigin::Environment => "XHAL_PLUGIN_PATH",
            SearchOrigin::Executable => "next to the executable",
            SearchOrigin::User => "user folder",
            SearchOrigin::System => "system folder",
        })
    }
}

/// One folder the loader looks in.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SearchFolder {
    /// The folder.
    pub path: PathBuf,
    /// Why it is searched.
    pub origin: SearchOrigin,
    /// Whether it exists.
    pub exists: bool,
}

/// The folders to search, in order, from the environment of this process.
pub fn search_folders() -> Vec<SearchFolder> {
    let mut folders: Vec<(PathBuf, SearchOrigin)> = Vec::new();
    if let Some(path) = std::env::var_os("XHAL_PLUGIN_PATH") {
        for dir in std::env::split_paths(&path) {
            if !dir.as_os_str().is_empty() {
                folders.push((dir, SearchOrigin::Environment));
            }
        }
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        folders.push((exe_dir.join("plugins"), SearchOrigin::Executable));
        if let Some(parent) = exe_dir.parent() {
            folders.push((parent.join("plugins"), SearchOrigin::Executable));
        }
    }
    let user_data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")));
    if let Some(data) = user_data {
        folders.push((data.join("xhal/plugins"), SearchOrigin::User));
    }
    folders.push((PathBuf::from("/usr/local/lib/xhal/plugins"), SearchOrigin::System));
    folders.push((PathBuf::from("/usr/lib/xhal/plugins"), SearchOrigin::System));

    unique_folders(folders)
}

/// Keeps the first of folders that are the same on disk (`target/plugins` in
/// XHAL_PLUGIN_PATH and again next to the executable), so that no file shadows itself.
fn unique_folders(folders: Vec<(PathBuf, SearchOrigin)>) -> Vec<SearchFolder> {
    let mut seen = std::collections::HashSet::new();
    folders
        .into_iter()
        .filter(|(path, _)| seen.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone())))
        .map(|(path, origin)| SearchFolder {
            exists: path.is_dir(),
            path,
            origin,
        })
        .collect()
}

/// The backend a plugin file belongs to, from its name: `libxhal_<backend>.so` gives `<backend>`.
pub fn backend_name_of_file(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let name = file
        .strip_prefix("libxhal_")?
        .strip_suffix(std::env::consts::DLL_SUFFIX)?;
    super::adapter::is_valid_backend_name(name).then(|| name.to_owned())
}

/// A plugin file found in a search folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginFile {
    /// Path of the file.
    pub path: PathBuf,
    /// Backend named by the file name.
    pub backend: String,
    /// Folder origin.
    pub origin: SearchOrigin,
}

/// Every `libxhal_*.so` file in `folders`, in search order; within a folder, by name.
pub fn plugin_files(folders: &[SearchFolder]) -> Vec<PluginFile> {
    let mut files = Vec::new();
    for folder in folders.iter().filter(|folder| folder.exists) {
        let Ok(entries) = std::fs::read_dir(&folder.path) else {
            continue;
        };
        let mut found: Vec<PluginFile> = entries
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.path())
            .filter_map(|path| {
                backend_name_of_file(&path).map(|backend| PluginFile {
                    path,
                    backend,
                    origin: folder.origin,
                })
            })
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        files.extend(found);
    }
    files
}

/// A plugin loaded from a file.
#[derive(Debug, Clone)]
pub struct LoadedPlugin {
    /// Canonical path of the library.
    pub path: PathBuf,
    /// The plugin as a backend.
    pub backend: Arc<AbiBackend>,
}

/// Libraries loaded so far, by canonical path. Loading the same file twice gives the same
/// plugin (the dynamic linker would hand back the same library and its statics anyway).
static LOADED: Mutex<Option<HashMap<PathBuf, LoadedPlugin>>> = Mutex::new(None);

/// Loads the plugin at `path`: opens the library, finds `xhal_plugin_query`, negotiates the
/// ABI and validates the table. Every failure names the file and the reason.
pub fn load_plugin(path: &Path) -> Result<LoadedPlugin> {
    let canonical = std::fs::canonicalize(path).map_err(|error| {
        Error::new(
            ErrorKind::PluginLoad,
            format!("{}: cannot open plugin file: {error}", path.display()),
        )
    })?;
    if !canonical.is_file() {
        return Err(Error::new(
            ErrorKind::PluginLoad,
            format!("{}: is not a file", path.display()),
        ));
    }
    let mut loaded = LOADED.lock();
    let cache = loaded.get_or_insert_with(HashMap::new);
    if let Some(plugin) = cache.get(&canonical) {
        return Ok(plugin.clone());
    }
    tracing::debug!(path = %canonical.display(), "loading plugin");
    let plugin = open_library(&canonical).map_err(|error| error.context(canonical.display()))?;
    cache.insert(canonical, plugin.clone());
    Ok(plugin)
}

/// An error and its sources, joined: libloading keeps the dynamic linker's reason (a bad ELF
/// header, a missing dependency) in the source, not in the top-level message.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn open_library(path: &Path) -> Result<LoadedPlugin> {
    // SAFETY: loading a library runs its initialisers; that is the trust a user places in a
    // plugin file by putting it on the plugin path. Everything after this is checked.
    let library = unsafe { libloading::Library::new(path) }.map_err(|error| {
        Error::new(
            ErrorKind::PluginLoad,
            format!("not a loadable shared library: {}", error_chain(&error)),
        )
    })?;
    // Never unloaded, from here on: once any code of the library may have run (initialisers,
    // the query), unloading it is not safe. A rejected plugin costs its mapping, nothing more.
    let library: &'static libloading::Library = Box::leak(Box::new(library));
    let symbol_name = format!("{}\0", xhal_abi::XHAL_PLUGIN_QUERY_SYMBOL);
    // SAFETY: the symbol, if present, has the documented signature; that is the ABI contract.
    let query: XhalPluginQueryFn = match unsafe { library.get::<XhalPluginQueryFn>(symbol_name.as_bytes()) } {
        Ok(symbol) => *symbol,
        Err(_) => {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!(
                    "the library does not export `{}`: it is not an xhal plugin",
                    xhal_abi::XHAL_PLUGIN_QUERY_SYMBOL
                ),
            ))
        }
    };
    // SAFETY: calling the plugin's query as the ABI defines it.
    let table = unsafe { query(XHAL_ABI_MAJOR, XHAL_ABI_MINOR) };
    // SAFETY: the table, when non-null, follows the ABI and lives as long as the library,
    // which is never unloaded (leaked above).
    let backend = unsafe { AbiBackend::new(table) }?;
    Ok(LoadedPlugin {
        path: path.to_path_buf(),
        backend: Arc::new(backend),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_folder_reached_by_two_names_is_searched_once() {
        let dir = std::env::temp_dir().join(format!("xhal-folders-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("plugins")).unwrap();
        let folders = unique_folders(vec![
            (dir.join("plugins"), SearchOrigin::Environment),
            (dir.join("plugins/../plugins"), SearchOrigin::Executable),
            (dir.join("missing"), SearchOrigin::User),
            (dir.join("missing"), SearchOrigin::System),
        ]);
        let kept: Vec<(PathBuf, SearchOrigin, bool)> =
            folders.into_iter().map(|f| (f.path, f.origin, f.exists)).collect();
        assert_eq!(
            kept,
            [
                (dir.join("plugins"), SearchOrigin::Environment, true),
                (dir.join("missing"), SearchOrigin::User, false),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn backend_names_come_from_file_names() {
        assert_eq!(
            backend_name_of_file(Path::new("/x/libxhal_cuda.so")).as_deref(),
            Some("cuda")
        );
        assert_eq!(
            backend_name_of_file(Path::new("libxhal_level-zero.so")).as_deref(),
            Some("level-zero")
        );
        assert_eq!(backend_name_of_file(Path::new("libxhal_CUDA.so")), None);
        assert_eq!(backend_name_of_file(Path::new("libxhal_.so")), None);
        assert_eq!(backend_name_of_file(Path::new("libcuda.so")), None);
        assert_eq!(backend_name_of_file(Path::new("libxhal_cuda.so.1")), None);
    }
}
