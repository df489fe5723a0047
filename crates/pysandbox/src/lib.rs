//! User-written Python tools and callbacks for the agent, run in a real sandbox.
//!
//! Users extend their agent with Python files written against the seed's runtime API
//! (`python-runtime-reference`): tools, and callbacks of the six kinds. This crate runs them in
//! CPython 3.12 compiled to a WebAssembly component (built with componentize-py from
//! `python/` and `wit/` by `scripts/build-python-sandbox`), under wasmtime, in-process: every call
//! gets a fresh interpreter instance with no files, no network and no environment, a memory cap,
//! a wall-clock deadline and bounded output ([`Sandbox`]). Inside, the seed's globals and classes
//! (`context`, `get_variable`, `tools`, `ces_requests`, `Part`, `LlmResponse`, …) are
//! implemented in `python/ces_public.py`, and cross to the host as the agent crate's JSON.
//!
//! How Python meets the engine:
//! - a [`PythonTool`] is an [`agent::AgentTool`]: its schema comes from the function's signature
//!   and docstring, its approval flag and scopes from `@tool(requires_approval=..., scopes=...)`;
//!   variable changes become the response event's `state_delta`; an exception answers `FAILED`
//!   with the traceback;
//! - a [`PythonCallback`] becomes an [`agent::Callbacks`] entry, run in the engine's order; one
//!   that fails is skipped and reported;
//! - what the code may reach outside — the agent's tools, HTTP — is the app's [`Host`]; writes
//!   pass only for a tool declared `requires_approval` (which the engine runs only once the user
//!   approved the call);
//! - [`PythonExtensions::load_dir`] loads a folder of `.py` files; a file that does not load is
//!   reported with its traceback and line, and the rest load regardless.
//!
//! The component is compiled once per machine and cached ([`cache`]); that first compile takes
//! about 20 seconds, after which creating a [`Sandbox`] takes a fraction of a second and a call a
//! few milliseconds.

pub mod cache;
mod callbacks;
mod error;
mod extensions;
mod host;
mod module;
mod output;
mod protocol;
mod report;
mod runtime;
mod tool;

pub use cache::CacheOutcome;
pub use callbacks::PythonCallback;
pub use error::{LoadError, PythonError, SandboxError, SetupError};
pub use extensions::PythonExtensions;
pub use host::{Host, HostCall, HttpRequest, NoHost, ToolsHost};
pub use module::{CallbackKind, PythonModule, UnknownCallback};
pub use protocol::ToolSpec;
pub use report::{Report, Reporter};
pub use runtime::{Limits, RunOutput, Sandbox, SandboxConfig};
pub use tool::{PythonTool, ToolRun};
