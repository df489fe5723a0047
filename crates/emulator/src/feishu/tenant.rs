//! The emulated tenant's data: people, chats and messages, the demo user's calendar, documents
//! and wiki nodes, tasks and drive files, plus what the idempotency rules remember. The seed
//! ([`super::seed`]) fills it; the API handlers read and change it.

use std::collections::HashMap;

use serde_json::Value;

/// A person in the tenant's directory.
#[derive(Debug, Clone)]
pub(crate) struct Person {
    pub(crate) name: String,
    pub(crate) en_name: String,
    pub(crate) open_id: String,
    pub(crate) union_id: String,
    pub(crate) user_id: String,
    pub(crate) email: String,
    pub(crate) job_title: String,
    pub(crate) department_id: String,
    pub(crate) city: String,
    pub(crate) employee_no: String,
    pub(crate) join_time: i64,
}

impl Person {
    pub(crate) fn avatar(&self, size: &str) -> String {
        format!(
            "https://example.invalid/static-resource/v1/{}~{size}.png",
            self.user_id
        )
    }
}

/// A group chat or a 1:1 chat.
#[derive(Debug, Clone)]
pub(crate) struct Chat {
    pub(crate) chat_id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) p2p: bool,
    pub(crate) owner: String,
    /// Members in the directory (open_ids).
    pub(crate) members: Vec<String>,
    /// Members outside the seeded directory, so a company-wide group can be large.
    pub(crate) extra_members: usize,
    /// Milliseconds.
    pub(crate) created_at: i64,
}

impl Chat {
    pub(crate) fn user_count(&self) -> usize {
        self.members.len() + self.extra_members
    }
}

/// A message in a chat.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub(crate) message_id: String,
    pub(crate) chat_id: String,
    pub(crate) sender: String,
    pub(crate) msg_type: String,
    /// The JSON string Feishu carries in `body.content`.
    pub(crate) content: String,
    /// Milliseconds.
    pub(crate) create_time: i64,
    pub(crate) root_id: Option<String>,
    pub(crate) parent_id: Option<String>,
    pub(crate) thread_id: Option<String>,
    /// Sent through the Open API (not part of the seed).
    pub(crate) via_api: bool,
    /// Sent by an app's bot (`sender` is then the app id), not by a person.
    pub(crate) by_app: bool,
    /// Milliseconds of the last update (a card's content replaced), if any.
    pub(crate) updated_at: Option<i64>,
}

/// When an event starts or ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventTime {
    /// Seconds, with the IANA zone the caller gave.
    Timestamp { ts: i64, timezone: String },
    /// An all-day event's date, as a local day count.
    Date(i64),
}

/// An attendee of an event.
#[derive(Debug, Clone)]
pub(crate) struct Attendee {
    pub(crate) attendee_id: String,
    pub(crate) open_id: String,
    pub(crate) rsvp_status: String,
    pub(crate) is_optional: bool,
    pub(crate) is_organizer: bool,
}

/// An event on the demo user's primary calendar. A recurring event expands into instances;
/// an exception (one instance changed) is stored as its own event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// `<uuid>_0`, or `<uuid>_<instance start>` for an exception.
    pub(crate) event_id: String,
    pub(crate) calendar_id: String,
    pub(crate) organizer_calendar_id: String,
    pub(crate) organizer: String,
    pub(crate) summary: String,
    pub(crate) description: String,
    pub(crate) start: EventTime,
    pub(crate) end: EventTime,
    pub(crate) location: Option<String>,
    pub(crate) recurrence: Option<String>,
    pub(crate) visibility: String,
    pub(crate) free_busy_status: String,
    pub(crate) attendee_ability: String,
    pub(crate) attendees: Vec<Attendee>,
    /// Instance start times (seconds) removed from a recurring event.
    pub(crate) cancelled_instances: Vec<i64>,
    pub(crate) recurring_event_id: Option<String>,
    /// Seconds.
    pub(crate) create_time: i64,
    pub(crate) via_api: bool,
    /// Deleted events stay, so a get answers 193003 rather than 193001.
    pub(crate) deleted: bool,
}

/// A docx document: its blocks under the page block (whose id is the document id).
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub(crate) document_id: String,
    pub(crate) title: String,
    pub(crate) blocks: Vec<Block>,
    pub(crate) revision_id: i64,
    pub(crate) owner: String,
    /// Seconds.
    pub(crate) created_at: i64,
    /// Seconds.
    pub(crate) updated_at: i64,
    pub(crate) folder_token: String,
    pub(crate) via_api: bool,
}

/// One docx block: its type and its type-specific body (`{"elements":[…],"style":{…}}`), stored
/// under the key Feishu uses for that type (`text`, `heading1`, `bullet`…).
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) block_id: String,
    pub(crate) block_type: u32,
    pub(crate) body: Value,
}

/// A wiki node pointing at a docx document.
#[derive(Debug, Clone)]
pub(crate) struct WikiNode {
    pub(crate) space_id: String,
    pub(crate) node_token: String,
    pub(crate) obj_token: String,
    pub(crate) title: String,
    pub(crate) creator: String,
    /// Seconds.
    pub(crate) created_at: i64,
}

/// A task (v2).
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub(crate) guid: String,
    pub(crate) task_id: String,
    pub(crate) summary: String,
    pub(crate) description: String,
    /// Milliseconds and whether it is a date.
    pub(crate) due: Option<(i64, bool)>,
    pub(crate) creator: String,
    pub(crate) assignees: Vec<String>,
    pub(crate) followers: Vec<String>,
    /// Milliseconds; 0 while open.
    pub(crate) completed_at: i64,
    /// Milliseconds.
    pub(crate) created_at: i64,
    /// Milliseconds.
    pub(crate) updated_at: i64,
    pub(crate) via_api: bool,
}

/// A file or folder in the demo user's drive.
#[derive(Debug, Clone)]
pub(crate) struct DriveFile {
    pub(crate) token: String,
    pub(crate) name: String,
    /// `folder`, `docx`, `sheet`, `bitable`, `file`…
    pub(crate) kind: String,
    pub(crate) parent_token: String,
    /// Seconds.
    pub(crate) created_at: i64,
    /// Seconds.
    pub(crate) modified_at: i64,
    pub(crate) owner: String,
}

impl DriveFile {
    pub(crate) fn url(&self) -> String {
        let section = match self.kind.as_str() {
            "folder" => "drive/folder",
            "docx" => "docx",
            "sheet" => "sheets",
            "bitable" => "base",
            _ => "file",
        };
        format!("https://demo-corp.feishu.cn/{section}/{}", self.token)
    }
}

/// Everything the Open API side serves.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub(crate) tenant_key: String,
    pub(crate) people: Vec<Person>,
    pub(crate) chats: Vec<Chat>,
    pub(crate) messages: Vec<Message>,
    pub(crate) calendar_id: String,
    pub(crate) calendar_summary: String,
    pub(crate) events: Vec<Event>,
    pub(crate) documents: Vec<Document>,
    pub(crate) wiki_nodes: Vec<WikiNode>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) files: Vec<DriveFile>,
    /// Base apps (多维表格) with their tables and records.
    pub(crate) bases: Vec<super::api::bitable::data::Base>,
    /// The drive's root folder (listed when `folder_token` is empty).
    pub(crate) root_folder: String,
    /// `idempotency_key` per (app, calendar) → event id. Feishu documents no window.
    pub(crate) event_keys: HashMap<(String, String, String), String>,
    /// `uuid` per app → (message id, milliseconds when sent). One hour window.
    pub(crate) message_uuids: HashMap<(String, String), (String, i64)>,
    /// `client_token` per app → (task guid, milliseconds when created). Five minute window.
    pub(crate) task_tokens: HashMap<(String, String), (String, i64)>,
    /// `client_token` per document → the answer of the append it made.
    pub(crate) block_tokens: HashMap<(String, String), Value>,
}

impl Tenant {
    pub(crate) fn person(&self, open_id: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.open_id == open_id)
    }

    /// The person a message's `receive_id` names, read as its `receive_id_type` says (the same
    /// for a user's send and the bot's).
    pub(crate) fn person_by(&self, id_type: &str, id: &str) -> Option<&Person> {
        self.people.iter().find(|p| match id_type {
            "union_id" => p.union_id == id,
            "user_id" => p.user_id == id,
            "email" => p.email == id,
            _ => p.open_id == id,
        })
    }

    pub(crate) fn name_of(&self, open_id: &str) -> String {
        self.person(open_id)
            .map(|p| p.name.clone())
            .unwrap_or_default()
    }

    pub(crate) fn chat(&self, chat_id: &str) -> Option<&Chat> {
        self.chats.iter().find(|c| c.chat_id == chat_id)
    }
}
