//! The application core of Feishu Companion: one async function per user action (send a
//! message, decide an approval, sign in, change a setting…) and one event stream the UI
//! subscribes to. It has no Tauri dependency, so the desktop shell, the tests and any CLI drive
//! exactly the same code.
//!
//! Terms: *demo mode* runs the built-in Feishu emulator and the scripted model in-process, for
//! a user who has not configured a Feishu app or a model yet. *Pending* items are the calls
//! waiting for the user: approvals, sign-ins, and writes whose outcome a crash made unknown.
//!
//! Imports: the engine crates below (`agent`, `store`, `feishu`, `llm`, `mcp`, `pysandbox`,
//! `emulator` for demo mode), never Tauri. Inside, imports go down only: leaves → the context
//! (`context.rs`) → features → the facade (`app/`, the only `impl Companion`);
//! `tests/architecture.rs` fails on any import circle (see docs/architecture.md).

pub mod agents;
mod app;
mod apply;
mod assistant;
mod audit;
pub mod autonomy;
pub mod check;
mod compose;
pub mod connect;
mod context;
pub mod data;
mod edit;
mod error;
mod events;
mod feature;
pub mod labels;
pub mod mcp;
mod model_items;
mod model_list;
pub mod notices;
mod options;
pub mod paths;
pub mod person;
pub mod python;
mod readable;
pub mod remote_approval;
pub mod resources;
pub mod runtime;
mod sessions;
pub mod settings;
mod settings_page;
mod sign_in;
pub mod sign_in_help;
pub mod sync;
mod text;
pub mod updates;
pub mod user_error;
pub mod view;
mod waiting;

pub use app::{
    Companion, CompanionError, DEMO_APP_ID, Demo, OpenOptions, SignInStatus, SignInTicket, UiEvent,
};
pub use assistant::{AssistantSettings, PythonFileSettings};
pub use paths::AppPaths;
pub use resources::Resources;
pub use runtime::Profile;
pub use settings::{
    FeishuSettings, Language, ModelSettings, Settings, SettingsError, SignInFlow, Theme,
};
