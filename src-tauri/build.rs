//! Generates the app's ACL: one permission per command (listed in `src/command_names.rs`), so
//! a window can call a command only when a capability grants it.

include!("src/command_names.rs");

fn main() {
    let attributes = tauri_build::Attributes::new()
        .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS));
    if let Err(e) = tauri_build::try_build(attributes) {
        // Cargo shows a build script's stderr; a panic here would only add a backtrace.
        eprintln!("tauri-build failed: {e:#}");
        std::process::exit(1);
    }
}
