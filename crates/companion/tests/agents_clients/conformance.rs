//! The official conformance suite's server scenarios (`@modelcontextprotocol/conformance server`,
//! in tests/mcp) against the companion's server. The suite connects with a bare URL and cannot
//! send a header, so it goes through tests/agents/auth-proxy.mjs, which adds the agent's token
//! and passes everything else (Host and Origin too) unchanged: without the token every scenario
//! would only meet the 401, and the DNS-rebinding one would pass for the wrong reason.
//!
//! Most scenarios test the suite's own fixture server (its `test_*` tools, resources, prompts,
//! logging). They are run too, and each must fail for the reason written beside it, so this list
//! stays true: a scenario that starts passing, or fails otherwise, or a new one in the suite,
//! fails the test until it is moved where it belongs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::peers::{Peer, agents_dir, conformance_suite, node};
use super::user;

/// Scenarios that apply to the companion, with the checks each must pass.
const APPLICABLE: &[(&str, &[&str])] = &[
    ("server-initialize", &["server-initialize"]),
    ("ping", &["ping"]),
    ("tools-list", &["tools-list"]),
    (
        "dns-rebinding-protection",
        &[
            "localhost-host-rebinding-rejected",
            "localhost-host-valid-accepted",
        ],
    ),
];

const NO_CAPABILITY: &str = "-32601";
const FIXTURE_TOOL: &str = "no tool named test_";
const STATELESS: &str = "did not provide session ID";

/// Scenarios that do not apply: (scenario, what its failure must say, why it does not apply).
const NOT_APPLICABLE: &[(&str, &str, &str)] = &[
    (
        "logging-set-level",
        NO_CAPABILITY,
        "no logging capability: the audit is the record",
    ),
    (
        "completion-complete",
        NO_CAPABILITY,
        "no prompts or resource templates to complete",
    ),
    (
        "tools-call-simple-text",
        FIXTURE_TOOL,
        "the fixture's test_simple_text",
    ),
    (
        "tools-call-image",
        FIXTURE_TOOL,
        "the fixture's test_image_content",
    ),
    (
        "tools-call-audio",
        FIXTURE_TOOL,
        "the fixture's test_audio_content",
    ),
    (
        "tools-call-embedded-resource",
        FIXTURE_TOOL,
        "the fixture's test_embedded_resource",
    ),
    (
        "tools-call-mixed-content",
        FIXTURE_TOOL,
        "the fixture's test_multiple_content_types",
    ),
    (
        "tools-call-with-logging",
        NO_CAPABILITY,
        "sets a logging level first (no logging)",
    ),
    // The SDK clients above check the companion's own error results and progress instead.
    (
        "tools-call-error",
        FIXTURE_TOOL,
        "the fixture's test_error_handling",
    ),
    (
        "tools-call-with-progress",
        FIXTURE_TOOL,
        "the fixture's test_tool_with_progress",
    ),
    (
        "tools-call-sampling",
        FIXTURE_TOOL,
        "the fixture's test_sampling; no sampling asked",
    ),
    (
        "tools-call-elicitation",
        FIXTURE_TOOL,
        "the fixture's test_elicitation",
    ),
    (
        "elicitation-sep1034-defaults",
        FIXTURE_TOOL,
        "the fixture's elicitation tool",
    ),
    (
        "elicitation-sep1330-enums",
        FIXTURE_TOOL,
        "the fixture's elicitation tool",
    ),
    (
        "json-schema-2020-12",
        "json_schema_2020_12_tool",
        "the fixture's schema tool",
    ),
    // Stateless by design: a client that drops its stream cancels its own held call, which is
    // abandoned and never run, so there is no session and nothing to resume.
    (
        "server-sse-polling",
        STATELESS,
        "resumable streams of a session",
    ),
    (
        "server-sse-multiple-streams",
        STATELESS,
        "several streams of one session",
    ),
    ("resources-list", NO_CAPABILITY, "no resources"),
    ("resources-read-text", NO_CAPABILITY, "no resources"),
    ("resources-read-binary", NO_CAPABILITY, "no resources"),
    ("resources-templates-read", NO_CAPABILITY, "no resources"),
    ("resources-subscribe", NO_CAPABILITY, "no resources"),
    ("resources-unsubscribe", NO_CAPABILITY, "no resources"),
    ("prompts-list", NO_CAPABILITY, "no prompts"),
    ("prompts-get-simple", NO_CAPABILITY, "no prompts"),
    ("prompts-get-with-args", NO_CAPABILITY, "no prompts"),
    ("prompts-get-embedded-resource", NO_CAPABILITY, "no prompts"),
    ("prompts-get-with-image", NO_CAPABILITY, "no prompts"),
];

/// The checks of each scenario the suite wrote: `<out>/server-<scenario>-<time>/checks.json`.
fn results(out: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("server-") else {
            continue;
        };
        // The time is the part from the '-' before YYYY-MM-DDT on.
        let at = rest
            .match_indices('-')
            .map(|(i, _)| i)
            .find(|&i| is_time(&rest[i + 1..]))
            .unwrap_or_else(|| panic!("an unexpected result folder: {name}"));
        let checks = std::fs::read(dir.join("checks.json")).unwrap();
        found.insert(
            rest[..at].to_owned(),
            serde_json::from_slice(&checks).unwrap(),
        );
    }
    found
}

/// Whether `text` starts with a date and time as the suite names folders (2026-12-05T14-11-30-320Z).
fn is_time(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() > 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && (b[4], b[7], b[10]) == (b'-', b'-', b'T')
}

fn status(check: &Value) -> &str {
    check["status"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suites_server_scenarios_that_apply_pass_and_the_others_fail_as_listed() {
    let suite = conformance_suite();
    let demo = user::demo("Conformance suite").await;
    let mut command = Command::new(node());
    command
        .arg(agents_dir().join("auth-proxy.mjs"))
        .arg(&demo.url)
        .arg(&demo.token);
    let mut proxy = Peer::spawn("auth-proxy.mjs", command);
    let url = proxy.first_line(Duration::from_secs(20)).await;

    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(node());
    command
        .arg(suite)
        .args(["server", "--url", &url, "--suite", "all", "-o"])
        .arg(out.path());
    let mut run = Peer::spawn("conformance server", command);
    // It exits non-zero, since the scenarios that do not apply fail; the checks tell.
    run.finish(Duration::from_secs(300)).await;
    let results = results(out.path());

    let listed: Vec<&str> = APPLICABLE
        .iter()
        .map(|(s, _)| *s)
        .chain(NOT_APPLICABLE.iter().map(|(s, _, _)| *s))
        .collect();
    let ran: Vec<&str> = results.keys().map(String::as_str).collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(ran, sorted, "the suite's scenarios changed\n{}", run.log());

    for (scenario, wanted) in APPLICABLE {
        let checks = &results[*scenario];
        for id in *wanted {
            let check = checks.iter().find(|c| c["id"] == *id);
            assert_eq!(
                check.map(status),
                Some("SUCCESS"),
                "{scenario}/{id}: {checks:#?}"
            );
        }
        let bad: Vec<&Value> = checks
            .iter()
            .filter(|c| !matches!(status(c), "SUCCESS" | "INFO"))
            .collect();
        assert!(bad.is_empty(), "{scenario}: {bad:#?}");
    }
    for (scenario, evidence, why) in NOT_APPLICABLE {
        let checks = &results[*scenario];
        let unmet: Vec<&Value> = checks
            .iter()
            .filter(|c| matches!(status(c), "FAILURE" | "WARNING"))
            .collect();
        assert!(
            unmet.iter().any(|c| c.to_string().contains(evidence)),
            "{scenario} ({why}) was to fail with {evidence:?}: {checks:#?}"
        );
    }
}
