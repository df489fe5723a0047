//! What the UI hears about, as it happens: one event stream the window subscribes to. A leaf
//! above the features' own status types: it imports only those.

use agent::EngineEvent;

/// What the UI hears about, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum UiEvent {
    /// The engine: streamed text, stored events, calls held or decided, turns suspended or done.
    Engine(Box<EngineEvent>),
    /// A sign-in moved on.
    SignIn(SignInStatus),
    /// "Open in app" was pressed on a call's card in Feishu: show the app at that call.
    OpenCall {
        /// The call.
        call_id: String,
    },
    /// "Open in app" was pressed on the summary card in Feishu: show the app at its inbox.
    OpenInbox,
    /// A card was sent to Feishu or finished there: the calls whose card now waits for a
    /// decision in Feishu, all of them.
    RemoteCards {
        /// The calls, sorted.
        call_ids: Vec<String>,
    },
    /// "Connect my Feishu" moved on (see [`crate::connect`]).
    Connect(crate::connect::status::ConnectStatus),
    /// An MCP server changed, or one of its calls reported progress (see [`crate::mcp`]).
    Mcp(crate::mcp::event::McpEvent),
}

/// Where a sign-in stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignInStatus {
    /// Waiting for the user on Feishu's page.
    Waiting {
        /// The authorize page (the verification page of a device sign-in).
        url: String,
        /// A device sign-in's code: the QR code and countdown to show instead of a window.
        device: Option<crate::connect::status::DeviceTicket>,
    },
    /// A device sign-in's code ran out before anyone confirmed.
    Expired,
    /// Signed in; held calls are running again.
    SignedIn {
        /// Who.
        name: String,
        /// Every scope granted.
        scopes: Vec<String>,
        /// The person signed in before, when it was someone else: their conversations are now
        /// kept apart (see [`crate::person`]).
        switched_from: Option<String>,
    },
    /// The user declined on Feishu's page.
    Declined,
    /// It failed; the message says why and what to do.
    Failed {
        /// For the user.
        message: String,
    },
    /// Feishu refused it (its authorize page showed an error code), or nobody finished it in
    /// time: which setting to change, with the exact value.
    Refused {
        /// The problem, in words.
        problem: crate::sign_in_help::problem::SignInProblemView,
    },
    /// It continues in the system browser (the tenant signs in through its own identity
    /// provider); the same listener still waits for the redirect.
    InBrowser,
}

/// A sign-in in progress: what to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInTicket {
    /// The authorize page to show in the sign-in window (or the system browser).
    pub url: String,
    /// The redirect URL the listener waits on (empty for a device sign-in).
    pub redirect_uri: String,
    /// A device sign-in's code, to show as a QR code.
    pub device: Option<crate::connect::status::DeviceTicket>,
}
