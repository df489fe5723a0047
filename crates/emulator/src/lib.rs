//! Local stand-ins for the remote services Feishu Companion talks to, for tests, benchmarks and
//! demo mode. Each speaks the real wire format on a loopback port chosen at start, so the app's
//! real client code runs against it unchanged: only base URLs differ.
//!
//! - [`model_server`]: a scripted model server answering from a JSON script, as OpenAI-compatible
//!   Chat Completions and as the Anthropic Messages API (`/v1/messages`, which the real Claude Code
//!   CLI is driven through in tests/agents), streamed and not; [`model_server::DEMO_SCRIPT`] drives
//!   the demo session.
//! - The Feishu emulator (OAuth pages, token endpoint, the Open API subset the tools use) lives in
//!   its own modules beside it.
//!
//! Imports: only `lark-frame`; it speaks Feishu's wire formats and knows none of the app's crates,
//! so the production clients run against it unchanged.

pub mod feishu;
pub mod model_server;
