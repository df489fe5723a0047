//! Where the app finds the files it ships beside its binary: today the Python sandbox's
//! WebAssembly component (CPython for WASI, ~36 MB), which the packages install as a resource
//! and a build from source keeps under `target/`.
//!
//! One lookup for everyone who needs such a file (the Python tools, the packaging tests), so an
//! installed app and a development build find the component the same way: the folder the shell
//! names (Tauri's resource folder: `/usr/lib/Feishu Companion/` for the .deb and .rpm, inside the
//! AppImage, `Contents/Resources` on macOS, next to the .exe on Windows), then the
//! `FEISHU_COMPANION_RESOURCES` environment variable, then the build's own copy.

use std::path::{Path, PathBuf};

/// The environment variable naming a resource folder, for a portable install or a test.
pub const RESOURCES_ENV: &str = "FEISHU_COMPANION_RESOURCES";

/// The Python sandbox component's path inside a resource folder; scripts/package and
/// `packaging/tauri.package.json` put it there.
pub const PYTHON_SANDBOX_COMPONENT: &str = "python-sandbox/sandbox.wasm";

/// The file name of the component's compiled copy, beside the component: scripts/package
/// compiles it for the packages (`pysandbox::precompile`), so an installed app never compiles.
pub const PYTHON_SANDBOX_PRECOMPILED: &str = "sandbox.cwasm";

/// The folders to look in, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// The shell's resource folder, when it has one.
    pub bundled: Option<PathBuf>,
    /// From [`RESOURCES_ENV`].
    pub from_env: Option<PathBuf>,
}

impl Resources {
    /// The shell's resource folder, and [`RESOURCES_ENV`] from this process's environment.
    pub fn new(bundled: Option<PathBuf>) -> Resources {
        Resources {
            bundled,
            from_env: std::env::var_os(RESOURCES_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }

    /// The first existing file at `relative` in the resource folders, else `fallback` when it
    /// exists (a development build passes the path its build script produced).
    pub fn find(&self, relative: &str, fallback: Option<&Path>) -> Option<PathBuf> {
        self.bundled
            .iter()
            .chain(self.from_env.iter())
            .map(|dir| dir.join(relative))
            .chain(fallback.map(Path::to_path_buf))
            .find(|path| path.is_file())
    }

    /// The Python sandbox's component: the installed resource, else the development build's
    /// (`fallback`: `pysandbox::SandboxConfig::default().component`).
    pub fn python_sandbox_component(&self, fallback: Option<&Path>) -> Option<PathBuf> {
        self.find(PYTHON_SANDBOX_COMPONENT, fallback)
    }
}

/// Where the compiled form of the sandbox's component is cached: the user's data folder, so an
/// update of the app (a new component) recompiles once and an uninstall leaves it with the data.
pub fn python_sandbox_cache_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("python-sandbox-cache")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn component_in(dir: &Path) -> PathBuf {
        let path = dir.join(PYTHON_SANDBOX_COMPONENT);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"\0asm").unwrap();
        path
    }

    #[test]
    fn the_bundled_folder_wins_over_the_environment_and_the_build() {
        let bundled = tempfile::tempdir().unwrap();
        let env = tempfile::tempdir().unwrap();
        let build = tempfile::tempdir().unwrap();
        let in_bundle = component_in(bundled.path());
        let in_env = component_in(env.path());
        let built = component_in(build.path());
        let resources = Resources {
            bundled: Some(bundled.path().to_path_buf()),
            from_env: Some(env.path().to_path_buf()),
        };
        assert_eq!(
            resources.python_sandbox_component(Some(&built)),
            Some(in_bundle.clone())
        );
        std::fs::remove_file(&in_bundle).unwrap();
        assert_eq!(
            resources.python_sandbox_component(Some(&built)),
            Some(in_env.clone())
        );
        std::fs::remove_file(&in_env).unwrap();
        assert_eq!(
            resources.python_sandbox_component(Some(&built)),
            Some(built)
        );
    }

    #[test]
    fn nothing_found_is_none_not_a_path_that_does_not_exist() {
        let empty = tempfile::tempdir().unwrap();
        let resources = Resources {
            bundled: Some(empty.path().to_path_buf()),
            from_env: None,
        };
        let missing = empty.path().join("target/sandbox.wasm");
        assert_eq!(resources.python_sandbox_component(Some(&missing)), None);
        assert_eq!(resources.python_sandbox_component(None), None);
    }

    #[test]
    fn the_compiled_cache_lives_with_the_users_data() {
        let data = Path::new("/home/u/.local/share/feishu-companion");
        assert!(python_sandbox_cache_dir(data).starts_with(data));
    }
}
