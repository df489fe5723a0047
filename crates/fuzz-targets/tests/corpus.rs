//! Replays every committed corpus input (`fuzz/corpus/<target>/`, minimised by `cargo fuzz cmin`
//! after each run) through its target, so each input the fuzzer found interesting, and each
//! crash it ever found (kept in the corpus once fixed), is checked on every CI run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_target_has_a_corpus_and_every_input_passes() {
    let mut total = 0;
    for (name, target) in fuzz_targets::TARGETS {
        let dir = corpus(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        inputs.sort();
        assert!(
            !inputs.is_empty(),
            "{name} has no corpus in {}",
            dir.display()
        );
        for input in &inputs {
            let bytes = std::fs::read(input).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&bytes));
            assert!(outcome.is_ok(), "{name} fails on {}", input.display());
        }
        total += inputs.len();
    }
    assert!(total >= fuzz_targets::TARGETS.len());
}

/// The fuzz project's binaries and this crate's list name the same targets.
#[test]
fn the_fuzz_project_runs_every_target() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/Cargo.toml"),
    )
    .unwrap();
    for (name, _) in fuzz_targets::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no binary {name}"
        );
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/fuzz_targets")
            .join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).unwrap();
        assert!(
            text.contains(&format!("fuzz_targets::{name}(")),
            "{}",
            source.display()
        );
    }
}
