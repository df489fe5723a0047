//! What the UI sees: the engine's records reshaped for display, with every label in both
//! languages, and nothing secret. The TypeScript types of `ui/src/lib/bindings/` are generated
//! from these (ts-rs); a test fails when the committed bindings fall behind.
//!
//! Times are milliseconds since the Unix epoch, as numbers (ts-rs would make `i64` a `bigint`,
//! which JSON does not carry).
//!
//! The import rule: the files here import leaves and features' own view files (a sibling
//! through `super::`); features import the file they need, e.g. `crate::view::call::CallView`,
//! never `crate::view::X`. So this `mod.rs`, which re-exports everything for the shell, the
//! tests and the CLI (`companion::view::X`), sits above the features and makes no circle.

pub mod audit;
pub mod build;
pub mod call;
pub mod decide;
pub mod events;
pub mod settings;
pub mod timeline;

pub use crate::autonomy::{AutonomyInput, AutonomyView};
pub use crate::edit::EditCheckView;
pub use crate::text::Text;
pub use audit::{AuditQuery, AuditView, ExportFormat, RuleView, audit_csv};
pub use build::{TimelineView, timeline, timeline_items};
pub use call::{CallView, PreviewChangeView, PreviewFieldView, PreviewView, ScopeView};
pub use decide::{BatchDecision, DecisionInput, SettlementInput};
pub use events::UiEventView;
pub use settings::{
    AccountView, ModelListView, PresetView, SavedSettings, SettingsView, SignInTicketView,
    SignInView,
};
pub use timeline::{AppInfo, PersonView, SessionView, TimelineItem, ToolResultView, TurnView};
