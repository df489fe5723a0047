//! The terminal front end starts in demo mode on a fresh folder and answers its commands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};

#[test]
fn the_cli_starts_in_demo_mode_and_lists_nothing_pending() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_companion-cli"))
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--ephemeral-keys",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all("/p\n/bogus\n/quit\n".as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("演示模式") && stdout.contains("Demo"),
        "{stdout}"
    );
    assert!(stdout.contains("没有待处理事项"), "{stdout}");
    assert!(stdout.contains("未知命令"), "{stdout}");
    assert!(dir.path().join("data").join("companion.db").exists());
}
