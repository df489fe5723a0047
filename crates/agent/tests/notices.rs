//! The engine writes no user-facing sentence inline: every notice and every reason it records
//! comes from `engine::notice`, which the app translates (and whose translation a test of the
//! app checks). This reads the engine's source so that a new inline message fails here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The engine's source, whitespace collapsed so a statement split over lines reads as one.
fn engine_source() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "notice.rs")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            files.push((path.display().to_string(), flat));
        }
    }
    assert!(
        files.len() >= 5,
        "the engine's modules were not found in {dir:?}"
    );
    files
}

/// What follows each occurrence of `needle` in `text`.
fn after<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.match_indices(needle)
        .map(|(i, _)| &text[i + needle.len()..])
        .collect()
}

#[test]
fn every_engine_notice_and_reason_comes_from_the_catalogue() {
    let mut inline = Vec::new();
    let mut seen = 0;
    for (file, text) in engine_source() {
        for needle in [
            "error_message = Some(",
            "error_code = Some(",
            "reason: Some(",
        ] {
            for rest in after(&text, needle) {
                seen += 1;
                if rest.starts_with('"') || rest.starts_with("format!") {
                    inline.push(format!("{file}: {needle}{}", &rest[..rest.len().min(60)]));
                }
            }
        }
    }
    assert!(
        seen >= 8,
        "found only {seen} notices: the scan no longer matches the code"
    );
    assert!(
        inline.is_empty(),
        "engine messages written inline instead of in engine::notice (so they cannot be translated):\n{}",
        inline.join("\n")
    );
}

#[test]
fn the_catalogue_lists_every_notice_once() {
    use agent::engine::notice;
    let mut all: Vec<&str> = notice::ALL.to_vec();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), notice::ALL.len(), "a notice is listed twice");
    for code in notice::CODES {
        assert!(!code.is_empty() && !code.contains(' '), "{code:?}");
    }
    assert!(notice::too_many_steps(25).contains("25"));
}
