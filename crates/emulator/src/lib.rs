//! Local stand-ins for the remote services Feishu Companion talks to, for tests, benchmarks and
//! demo mode. Each speaks the real wire format on a loopback port chosen at start, so the app's
//! real client code runs against it unchanged: only base URLs differ.
//!
//! - [`model_server`]: a scripted OpenAI-compatible model server (Chat Completions, streamed and
//!   not), answering from a JSON script; [`model_server::DEMO_SCRIPT`] drives the demo session.
//! - The Feishu emulator (OAuth pages, token endpoint, the Open API subset the tools use) lives in
//!   its own modules beside it.

pub mod feishu;
pub mod model_server;
