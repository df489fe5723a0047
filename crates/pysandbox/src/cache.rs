//! The compiled component, cached on disk so that only the first run on a machine pays for
//! Cranelift (10 to 20 s for the 36 MB CPython component on two cores).
//!
//! A cache entry is named by the SHA-256 of the component and of wasmtime's compatibility hash
//! (its version, target and compiler settings), so any change to either misses the cache. Its
//! contents are checked against a SHA-256 written next to it before wasmtime sees them.
//!
//! This is the crate's only `unsafe`: `Component::deserialize` trusts its bytes to be wasmtime's
//! own output, since they are machine code. The bytes given to it are ones this module wrote
//! itself, with `Component::serialize`, into the app's own cache folder, and are verified against
//! the hash written with them; a truncated, corrupted or foreign file fails the check (or
//! wasmtime's own header check) and is compiled afresh. (Whoever can write to the app's data folder
//! can replace the hash too; such a user can already replace the app.)
#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How the component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the compiled copy the installation ships beside the component.
    Precompiled,
    /// Loaded from the cache.
    Hit,
    /// Compiled (and written to the cache when there is one), taking this long.
    Compiled(Duration),
}

/// `std::hash::Hasher` over SHA-256, so the engine's compatibility hash gives the same file name
/// in every build (std's hashers promise no stability).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Never called: the digest is taken with `finalize` below.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The cache entry's name for this component under this engine.
fn key(engine: &Engine, wasm_sha: &str) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let engine_hash = hex::encode(hasher.0.finalize());
    format!("sandbox-{}-{}", &wasm_sha[..16], &engine_hash[..16])
}

/// Loads the shipped compiled copy `precompiled` when it was compiled from `wasm` and suits this
/// engine and CPU, else the compiled component from `dir`, else compiles `wasm` and stores it
/// there.
///
/// Concurrent processes (tests run in parallel) wait on a lock file so that only one compiles.
/// A cache that cannot be read or written is skipped with a warning: it only costs time.
pub(crate) fn load_or_compile(
    engine: &Engine,
    wasm: &[u8],
    precompiled: Option<&Path>,
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, CacheOutcome)> {
    let wasm_sha = sha256_hex(wasm);
    if let Some(component) = precompiled.and_then(|path| load_shipped(engine, path, &wasm_sha)) {
        return Ok((component, CacheOutcome::Precompiled));
    }
    let Some(dir) = dir else {
        return compile(engine, wasm);
    };
    let key = key(engine, &wasm_sha);
    let artifact = dir.join(format!("{key}.cwasm"));
    let digest = dir.join(format!("{key}.sha256"));
    if let Some(component) = load(engine, &artifact, &digest) {
        return Ok((component, CacheOutcome::Hit));
    }
    if let Err(e) = fs::create_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "no cache for the compiled Python component");
        return compile(engine, wasm);
    }
    let lock = match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{key}.lock")))
    {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot lock the Python component cache");
            return compile(engine, wasm);
        }
    };
    // Another process may be compiling the same component: wait for it, then use its result.
    if let Err(e) = lock.lock() {
        tracing::warn!(error = %e, "cannot lock the Python component cache; compiling without it");
        return compile(engine, wasm);
    }
    if let Some(component) = load(engine, &artifact, &digest) {
        return Ok((component, CacheOutcome::Hit));
    }
    let (component, outcome) = compile(engine, wasm)?;
    match component.serialize() {
        Ok(bytes) => {
            if let Err(e) = store(&artifact, &digest, &bytes) {
                tracing::warn!(error = %e, "cannot write the compiled Python component to the cache");
            } else {
                prune(dir, &key);
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot serialise the compiled Python component"),
    }
    drop(lock);
    Ok((component, outcome))
}

fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
    let started = Instant::now();
    let component = Component::new(engine, wasm)?;
    let took = started.elapsed();
    tracing::info!(
        seconds = took.as_secs_f64(),
        "compiled the Python component with Cranelift"
    );
    Ok((component, CacheOutcome::Compiled(took)))
}

/// The cached component, if there is one whose bytes match the hash written with them.
fn load(engine: &Engine, artifact: &Path, digest: &Path) -> Option<Component> {
    let expected = fs::read_to_string(digest).ok()?;
    let bytes = fs::read(artifact).ok()?;
    if sha256_hex(&bytes) != expected.trim() {
        tracing::warn!(file = %artifact.display(), "the cached Python component does not match its hash; compiling it again");
        return None;
    }
    // SAFETY: these bytes were produced by `Component::serialize` in `store` below (by this or
    // an earlier run of this crate) and match the SHA-256 written after them; wasmtime checks
    // its own version and settings header and refuses anything built for another engine.
    match unsafe { Component::deserialize(engine, &bytes) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(error = %e, "the cached Python component is unusable; compiling it again");
            None
        }
    }
}

/// What a shipped compiled copy says of itself, in the JSON file beside it
/// ([`manifest_path`]): what it was compiled from, and its own digest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// SHA-256 of the component it was compiled from.
    pub source_sha256: String,
    /// SHA-256 of the compiled copy itself.
    pub artifact_sha256: String,
    /// The target and the CPU features it assumes (for people; wasmtime checks the features
    /// against this CPU when it loads the copy).
    pub target: String,
}

/// The manifest's path for a compiled copy at `artifact`.
pub fn manifest_path(artifact: &Path) -> PathBuf {
    let mut name = artifact.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Writes a compiled copy of a component and its manifest, for an installation to ship.
pub(crate) fn write_shipped(
    artifact: &Path,
    compiled: &[u8],
    wasm: &[u8],
    target: String,
) -> std::io::Result<Manifest> {
    let manifest = Manifest {
        source_sha256: sha256_hex(wasm),
        artifact_sha256: sha256_hex(compiled),
        target,
    };
    write_atomically(artifact, compiled)?;
    let json = serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?;
    write_atomically(&manifest_path(artifact), &json)?;
    Ok(manifest)
}

/// The shipped compiled copy, when its manifest names this component, its bytes match the
/// manifest, and wasmtime accepts it for this engine and CPU. Anything else is logged and
/// answered `None`, and the component is compiled instead (a CPU without the features the
/// copy assumes, a component replaced by hand, a damaged file).
fn load_shipped(engine: &Engine, artifact: &Path, wasm_sha: &str) -> Option<Component> {
    let manifest = match fs::read(manifest_path(artifact)) {
        Ok(bytes) => match serde_json::from_slice::<Manifest>(&bytes) {
            Ok(manifest) => manifest,
            Err(e) => {
                tracing::warn!(file = %artifact.display(), error = %e, "the shipped compiled Python component's manifest is unreadable; compiling the component");
                return None;
            }
        },
        // No shipped copy: a development build, or a package without one.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %artifact.display(), error = %e, "cannot read the shipped compiled Python component's manifest");
            return None;
        }
    };
    if manifest.source_sha256 != wasm_sha {
        tracing::warn!(file = %artifact.display(), "the shipped compiled Python component was compiled from another component; compiling this one");
        return None;
    }
    match file_sha256_hex(artifact) {
        Ok(sha) if sha == manifest.artifact_sha256 => {}
        Ok(_) => {
            tracing::warn!(file = %artifact.display(), "the shipped compiled Python component does not match its manifest; compiling the component");
            return None;
        }
        Err(e) => {
            tracing::warn!(file = %artifact.display(), error = %e, "cannot read the shipped compiled Python component");
            return None;
        }
    }
    // SAFETY: the file was written by `Component::serialize`'s twin `Engine::precompile_component`
    // (`write_shipped`, run by scripts/package), and its bytes were just checked against the
    // SHA-256 its manifest gives; wasmtime checks its version, settings and the CPU features the
    // code assumes against this engine and CPU, and refuses a copy that does not fit.
    match unsafe { Component::deserialize_file(engine, artifact) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::info!(error = %format!("{e:#}"), "the shipped compiled Python component does not fit this machine; compiling the component");
            None
        }
    }
}

/// SHA-256 of a file, streamed: a compiled copy is tens of megabytes.
fn file_sha256_hex(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Writes the artifact, then its hash: a hash on disk always describes a complete artifact.
fn store(artifact: &Path, digest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically(artifact, bytes)?;
    write_atomically(digest, sha256_hex(bytes).as_bytes())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp{}", path.display(), std::process::id()));
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}

/// Removes entries for other components or engines: each is tens of megabytes.
fn prune(dir: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("sandbox-") && !name.starts_with(keep) {
            // Best effort: a stale entry that cannot be removed only costs disk space.
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_component_and_the_engine() {
        let engine = Engine::default();
        let a = key(&engine, &sha256_hex(b"a"));
        assert_eq!(a, key(&engine, &sha256_hex(b"a")), "stable");
        assert_ne!(
            a,
            key(&engine, &sha256_hex(b"b")),
            "depends on the component"
        );
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let other = Engine::new(&config).ok();
        if let Some(other) = other {
            assert_ne!(a, key(&other, &sha256_hex(b"a")), "depends on the engine");
        }
    }
}
