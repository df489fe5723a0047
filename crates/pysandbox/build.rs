//! Makes sure the sandbox's WebAssembly component exists for the current Python and WIT sources,
//! building it with `scripts/build-python-sandbox` when it does not, so that `cargo build` and
//! `cargo nextest` work on a fresh clone with no other step.
//!
//! The component is kept under `target/python-sandbox/<hash of the sources>/sandbox.wasm`: the
//! hash names exactly what was built, so a change to any source builds a new one, and switching
//! back to earlier sources finds the earlier build. The crate learns the path from the
//! `PYSANDBOX_WASM` environment variable set here (or set by hand to use a component built
//! elsewhere), and where to keep compiled copies from `PYSANDBOX_CACHE_DIR`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

use sha2::{Digest, Sha256};

fn main() {
    if let Err(message) = run() {
        // A build script reports failure by exiting non-zero; stderr is shown to the user.
        eprintln!("pysandbox build: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .ok_or("the crate is not inside a workspace")?
        .to_path_buf();
    let script = root.join("scripts").join("build-python-sandbox");
    println!("cargo:rerun-if-changed=python");
    println!("cargo:rerun-if-changed=wit");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=PYSANDBOX_WASM");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let base = target.join("python-sandbox");
    let wasm = match env::var_os("PYSANDBOX_WASM") {
        Some(path) => PathBuf::from(path),
        None => {
            let hash = sources_hash(&manifest, &script)?;
            let wasm = base.join(&hash).join("sandbox.wasm");
            if !wasm.is_file() {
                build(&script, &wasm)?;
                prune(&base, &hash);
            }
            wasm
        }
    };
    println!("cargo:rustc-env=PYSANDBOX_WASM={}", wasm.display());
    // The triple this build runs on, which a shipped compiled copy is made for (precompile.rs).
    let triple = env::var("TARGET").map_err(|e| format!("TARGET: {e}"))?;
    println!("cargo:rustc-env=PYSANDBOX_TARGET={triple}");
    println!(
        "cargo:rustc-env=PYSANDBOX_CACHE_DIR={}",
        base.join("compiled").display()
    );
    Ok(())
}

/// A hash of everything the component is built from: the build script, the WIT and the Python.
fn sources_hash(manifest: &Path, script: &Path) -> Result<String, String> {
    let mut files = vec![script.to_path_buf()];
    for dir in ["wit", "python"] {
        let entries = fs::read_dir(manifest.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{dir}: {e}"))?.path();
            let ext = path.extension().and_then(|e| e.to_str());
            if matches!(ext, Some("py" | "wit")) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in &files {
        let bytes = fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        hasher.update(name.unwrap_or_default().as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(&hasher.finalize()[..8]))
}

fn build(script: &Path, wasm: &Path) -> Result<(), String> {
    let status = Command::new("bash")
        .arg(script)
        .arg(wasm)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({status}); it needs python3 with venv and pip, and PyPI (scripts/bootstrap installs the first two)",
            script.display()
        ))
    }
}

/// Removes components built from earlier sources: 36 MB each, and never used again.
fn prune(base: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_build = name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if is_build && name != keep {
            // Best effort: a stale build that cannot be removed only costs disk space.
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
