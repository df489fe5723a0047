//! Replays every committed corpus input (`fuzz/corpus/<target>/`, minimised by `cargo fuzz cmin`
//! after each run) through its target, so each input the fuzzer found interesting, and each
//! crash it ever found (kept in the corpus once fixed), is checked on every CI run.
//!
//! Then a short mutation-fuzzing run of every target on the stable toolchain: inputs derived
//! from that corpus (see `fuzz_targets::mutate`), a fixed number per target, so the run costs the
//! same everywhere. `FUZZ_ITERATIONS` sets the number (default 300, a few seconds); `FUZZ_SEED`
//! the seed (default 0, so a local run is reproducible). CI passes a seed that changes every day
//! (the date), so runs keep trying inputs no earlier one did while a failure still reproduces on
//! a rerun the same day; a failure names the seed and saves the input, so it can be replayed and,
//! once fixed, added to `fuzz/corpus/<target>/`. (One test binary for both:
//! each binary links the whole app core, and CI's disk is small.)
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

fn corpus_inputs(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    // The order decides which input a seed picks: keep it the same on every machine.
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={text:?} is not a number: {e}")),
        Err(_) => default,
    }
}

fn fuzz(name: &str) {
    let (_, target) = fuzz_targets::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target {name}"));
    let iterations = env_number("FUZZ_ITERATIONS", 300);
    let seed = env_number("FUZZ_SEED", 0);
    let corpus = corpus_inputs(name);
    assert!(!corpus.is_empty(), "{name} has no corpus");
    if let Some(failure) = fuzz_targets::mutate::run(*target, &corpus, seed, iterations) {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{name}-seed{seed}-{}", failure.iteration));
        std::fs::write(&file, &failure.input).unwrap();
        panic!(
            "{name} failed on input {} of FUZZ_SEED={seed}: {}\nthe input ({} bytes) is in {}: {:?}",
            failure.iteration,
            failure.message,
            failure.input.len(),
            file.display(),
            String::from_utf8_lossy(&failure.input),
        );
    }
}

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                fuzz(stringify!($name));
            }
        )*

        #[test]
        fn every_target_is_fuzzed() {
            let mut here = vec![$(stringify!($name)),*];
            let mut all: Vec<&str> = fuzz_targets::TARGETS.iter().map(|(n, _)| *n).collect();
            here.sort_unstable();
            all.sort_unstable();
            assert_eq!(here, all);
        }
    };
}

/// A short fuzzing run per target, as `mutation::<target>`.
mod mutation {
    use super::fuzz;

    targets!(
        sse,
        openai_stream,
        anthropic_stream,
        gemini_stream,
        callback_request,
        feishu_answer,
        tool_arguments,
        settings_file,
    );
}
