//! A compiled copy of the component for the packages to ship, so that an installed app loads it
//! at once instead of compiling 36 MB of WebAssembly with Cranelift on the user's machine
//! (8 s on idle cores, 27 s on busy ones).
//!
//! The copy is compiled by an engine configured exactly as the app's ([`crate::runtime`]'s
//! `engine`), except that it assumes only the CPU features every x86-64 machine of the last
//! fifteen years has (x86-64-v2: SSE3 to SSE4.2, POPCNT, CMPXCHG16B) instead of this build
//! machine's: the packages run on CPUs other than the one that built them. wasmtime records
//! the features in the copy and checks them against the CPU when it loads it; a copy that does
//! not fit (an older CPU, another wasmtime, another configuration) is refused, and the app
//! compiles the component in the background as it did before (see `cache::load_or_compile`).
//!
//! Only this module sets Cranelift flags by name, which wasmtime marks `unsafe` because a
//! feature flag the CPU lacks would produce code that faults; the load-time check above is
//! what makes a wrong flag a refusal rather than a crash.
#![allow(unsafe_code)]

use std::path::Path;

use crate::cache::{self, Manifest};
use crate::error::SetupError;
use crate::runtime::{self, Limits};

/// The target this build runs on, and so the one its packages are for.
const TARGET: &str = env!("PYSANDBOX_TARGET");

/// The CPU features the shipped copy may use, by Cranelift's flag names.
fn portable_features() -> &'static [&'static str] {
    if TARGET.starts_with("x86_64") {
        &[
            "has_sse3",
            "has_ssse3",
            "has_sse41",
            "has_sse42",
            "has_popcnt",
            "has_cmpxchg16b",
        ]
    } else {
        // Elsewhere the target's baseline: wasmtime infers nothing once a target is named.
        &[]
    }
}

/// Compiles `component` for shipping and writes it to `out`, with its manifest beside it
/// ([`cache::manifest_path`]). The app finds it through [`crate::SandboxConfig::precompiled`].
pub fn precompile(component: &Path, out: &Path, limits: &Limits) -> Result<Manifest, SetupError> {
    let wasm = std::fs::read(component).map_err(|source| SetupError::ReadComponent {
        path: component.to_path_buf(),
        source,
    })?;
    let engine = runtime::engine_with(limits, |config| {
        // Naming the target turns off wasmtime's reading of this machine's CPU features.
        config.target(TARGET)?;
        for flag in portable_features() {
            // SAFETY: see the module's comment: wasmtime checks these against the CPU that
            // loads the copy and refuses it where one is missing.
            unsafe {
                config.cranelift_flag_enable(flag);
            }
        }
        Ok(())
    })?;
    let compiled = engine
        .precompile_component(&wasm)
        .map_err(|e| SetupError::Wasmtime(format!("{e:#}")))?;
    let target = match portable_features() {
        [] => TARGET.to_owned(),
        features => format!("{TARGET} ({})", features.join(", ")),
    };
    cache::write_shipped(out, &compiled, &wasm, target).map_err(|source| SetupError::Write {
        path: out.to_path_buf(),
        source,
    })
}
