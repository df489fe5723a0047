//! The floor the app's memory is measured against: the same Tauri, WebKitGTK, embedded UI and
//! window size, with nothing of the app behind the window (no core, no database, no servers; the
//! page's calls to the app go unanswered). `src-tauri/scripts/measure-startup.sh` runs its
//! release build beside the app's and prints both, so the part of the app's memory that is the
//! app's own can be told from what any Tauri window costs on the same machine.
//!
//!   cargo build --release -p feishu-companion --example empty_window

fn main() -> anyhow::Result<()> {
    tauri::Builder::default()
        .setup(|app| {
            tauri::WebviewWindowBuilder::new(
                app,
                "main",
                tauri::WebviewUrl::App("index.html".into()),
            )
            .title("Feishu Companion (empty window)")
            .inner_size(1200.0, 800.0)
            .build()?;
            Ok(())
        })
        .run(tauri::generate_context!())?;
    Ok(())
}
