//! Feishu Companion's desktop app: see the `feishu_companion` library.

// No console window behind the app on Windows in release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

// mimalloc rather than glibc's malloc. glibc hands memory freed at the top of its heap back to the
// system as soon as the block is freed past its trim threshold, and wasmtime allocates each Python
// call's instance state (about 360 KB) afresh: every call then faulted those pages back in, a fifth
// of a sandboxed call (issue 26). mimalloc keeps freed pages for reuse and returns them to the
// system only after they have stayed unused for a while. The benchmarks of what the app does use
// it too, so they measure the app.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    feishu_companion::run()
}
