//! The name a server's tool carries before the model and in the audit trail:
//! `mcp__<server id>__<tool>`, so that two servers' `search` never meet and the server can be
//! read off the name. Models accept `[A-Za-z0-9_-]{1,64}`: other characters become `_`, and a
//! name that would be longer is cut and ends in a short hash of the whole, so it stays unique.

use sha2::{Digest, Sha256};

/// Every server tool's name starts with this.
pub const PREFIX: &str = "mcp__";

/// The longest function name the model providers accept.
pub const MAX_NAME: usize = 64;

/// The agent tool's name for `tool` of server `server_id`.
pub fn tool_name(server_id: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{PREFIX}{server_id}__{clean}");
    if full.len() <= MAX_NAME && clean == tool {
        return full;
    }
    // Cut or changed: a hash of the original keeps names apart that differ only there.
    let hash = hex::encode(&Sha256::digest(format!("{server_id}\0{tool}").as_bytes())[..3]);
    let keep = MAX_NAME - hash.len() - 1;
    let head: String = full.chars().take(keep).collect();
    format!("{head}_{hash}")
}

/// The server id a tool name starts with, if it is a server tool's.
pub fn server_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    rest.split_once("__").map(|(id, _)| id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_server_and_tool() {
        assert_eq!(
            tool_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(server_of("mcp__github__create_issue"), Some("github"));
        assert_eq!(server_of("calendar_create_event"), None);
    }

    #[test]
    fn names_stay_within_what_models_accept_and_unique() {
        let a = tool_name("everything", "docx.v1.document.create");
        assert!(
            a.starts_with("mcp__everything__docx_v1_document_create_"),
            "{a}"
        );
        // A tool literally named with underscores does not collide with the dotted one.
        assert_ne!(a, tool_name("everything", "docx_v1_document_create"));
        let long = "t".repeat(100);
        let b = tool_name("srv", &long);
        let c = tool_name("srv", &format!("{long}x"));
        assert_eq!(b.len(), MAX_NAME);
        assert_ne!(b, c);
        for n in [a, b, c] {
            assert!(n.len() <= MAX_NAME);
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            );
            assert!(server_of(&n).is_some());
        }
    }
}
