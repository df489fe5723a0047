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

/// Loads the compiled component from `dir`, or compiles `wasm` and stores it there.
///
/// Concurrent processes (tests run in parallel) wait on a lock file so that only one compiles.
/// A cache that cannot be read or written is skipped with a warning: it only costs time.
pub(crate) fn load_or_compile(
    engine: &Engine,
    wasm: &[u8],
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, CacheOutcome)> {
    let Some(dir) = dir else {
        return compile(engine, wasm);
    };
    let key = key(engine, &sha256_hex(wasm));
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
