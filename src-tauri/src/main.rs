//! Feishu Companion's desktop app: see the `feishu_companion` library.

// No console window behind the app on Windows in release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() -> anyhow::Result<()> {
    feishu_companion::run()
}
