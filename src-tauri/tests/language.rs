//! With the language setting at "system", the cards in Feishu and the tray and notifications
//! read the environment's locale alike and fall back alike when it says nothing, as the window
//! does. Each case runs this binary again in an environment of its own: a test may not change
//! its own (`set_var` is unsafe and `unsafe_code` is forbidden), and others run alongside.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use companion::Language;
use companion::remote_approval::card;
use feishu_companion::tray;

/// Set in the child: the language both must resolve to, as `Debug` prints it.
const EXPECT: &str = "FEISHU_COMPANION_TEST_EXPECT_LANG";
const LOCALE_VARS: [&str; 3] = ["LC_ALL", "LC_MESSAGES", "LANG"];
const CHILD: &str = "system_language_in_this_environment";

/// The child's side; passes trivially in an ordinary run.
#[test]
fn system_language_in_this_environment() {
    let Ok(expected) = std::env::var(EXPECT) else {
        return;
    };
    let tray = tray::Lang::of(Language::System);
    let card = card::Lang::of(Language::System);
    assert_eq!(format!("{tray:?}"), expected, "tray and notifications");
    assert_eq!(format!("{card:?}"), expected, "cards in Feishu");
}

#[test]
fn cards_and_tray_resolve_the_system_language_alike() {
    if std::env::var_os(EXPECT).is_some() {
        return;
    }
    let cases: &[(&[(&str, &str)], &str)] = &[
        // Nothing to go by: English, as the window's own fallback.
        (&[], "En"),
        (&[("LANG", "")], "En"),
        (&[("LANG", "C")], "En"),
        (&[("LANG", "C.UTF-8")], "En"),
        (&[("LANG", "zh-CN")], "Zh"),
        (&[("LANG", "zh_TW")], "Zh"),
        (&[("LANG", "zh_CN.UTF-8")], "Zh"),
        (&[("LANG", "ZH-cn")], "Zh"),
        (&[("LANG", "en-US")], "En"),
        (&[("LANG", "en_GB.UTF-8")], "En"),
        // POSIX precedence: LC_ALL, then LC_MESSAGES, then LANG.
        (&[("LC_ALL", "zh_CN.UTF-8"), ("LANG", "en_US.UTF-8")], "Zh"),
        (
            &[("LC_MESSAGES", "en_US.UTF-8"), ("LANG", "zh_CN.UTF-8")],
            "En",
        ),
    ];
    let exe = std::env::current_exe().unwrap();
    for (vars, expected) in cases {
        let mut child = Command::new(&exe);
        child.args([CHILD, "--exact"]).env(EXPECT, expected);
        for var in LOCALE_VARS {
            child.env_remove(var);
        }
        child.envs(vars.iter().copied());
        let out = child.output().unwrap();
        assert!(
            out.status.success(),
            "{vars:?} should resolve to {expected}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
