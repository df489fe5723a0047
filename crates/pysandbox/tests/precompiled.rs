//! The compiled copy the packages ship (`pysandbox::precompile`): made once here for real, then
//! loaded without compiling, and refused (so the app falls back to its cache or a compile) when
//! it was made from another component, is damaged, or has no manifest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use pysandbox::cache::{Manifest, manifest_path};
use pysandbox::{CacheOutcome, Limits, PythonModule, Sandbox, SandboxConfig};
use sha2::{Digest, Sha256};

fn sandbox_with(precompiled: &Path, cache: bool) -> Sandbox {
    let defaults = SandboxConfig::default();
    Sandbox::new(SandboxConfig {
        precompiled: Some(precompiled.to_path_buf()),
        // No cache: the shipped copy is the only way to avoid a compile. The default cache is
        // the tests' shared one: the fallback then loads from it (or compiles into it).
        cache_dir: if cache {
            defaults.cache_dir.clone()
        } else {
            None
        },
        ..defaults
    })
    .expect("the sandbox starts")
}

/// The tools a small file declares, which loading runs in the sandbox to find out.
async fn tools_of_a_file(sandbox: &Sandbox) -> Vec<String> {
    let module = PythonModule::load(
        sandbox,
        "hello.py",
        "def hello(name: str) -> str:\n    \"\"\"Greets.\"\"\"\n    return 'hi ' + name\n",
    )
    .await
    .expect("the file loads");
    module.tools().iter().map(|t| t.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shipped_copy_loads_without_compiling_and_a_wrong_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let artifact = dir.path().join("sandbox.cwasm");
    let component = SandboxConfig::default().component;
    let manifest =
        pysandbox::precompile::precompile(&component, &artifact, &Limits::default()).unwrap();
    let wasm = std::fs::read(&component).unwrap();
    assert_eq!(manifest.source_sha256, hex::encode(Sha256::digest(&wasm)));
    let bytes = std::fs::read(&artifact).unwrap();
    assert_eq!(
        manifest.artifact_sha256,
        hex::encode(Sha256::digest(&bytes))
    );
    if cfg!(target_arch = "x86_64") {
        assert!(
            manifest.target.contains("has_sse42") && !manifest.target.contains("avx"),
            "made for x86-64-v2, not this machine: {}",
            manifest.target
        );
    }
    let written: Manifest =
        serde_json::from_slice(&std::fs::read(manifest_path(&artifact)).unwrap()).unwrap();
    assert_eq!(written, manifest);

    // The copy fits this engine and CPU: no compile, and it runs Python.
    let shipped = sandbox_with(&artifact, false);
    assert_eq!(shipped.compiled(), CacheOutcome::Precompiled);
    assert_eq!(tools_of_a_file(&shipped).await, ["hello"]);
    drop(shipped);

    // A copy made from another component is not used, whatever its bytes.
    let mut other = manifest.clone();
    other.source_sha256 = hex::encode(Sha256::digest(b"another component"));
    std::fs::write(
        manifest_path(&artifact),
        serde_json::to_vec(&other).unwrap(),
    )
    .unwrap();
    assert_ne!(
        sandbox_with(&artifact, true).compiled(),
        CacheOutcome::Precompiled
    );

    // A damaged copy is not handed to wasmtime.
    std::fs::write(
        manifest_path(&artifact),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0xff;
    std::fs::write(&artifact, &damaged).unwrap();
    assert_ne!(
        sandbox_with(&artifact, true).compiled(),
        CacheOutcome::Precompiled
    );

    // Nor is one whose manifest is not JSON.
    std::fs::write(&artifact, &bytes).unwrap();
    std::fs::write(manifest_path(&artifact), b"{not json").unwrap();
    assert_ne!(
        sandbox_with(&artifact, true).compiled(),
        CacheOutcome::Precompiled
    );

    // Nor one without its manifest.
    std::fs::write(&artifact, &bytes).unwrap();
    std::fs::remove_file(manifest_path(&artifact)).unwrap();
    assert_ne!(
        sandbox_with(&artifact, true).compiled(),
        CacheOutcome::Precompiled
    );
}
