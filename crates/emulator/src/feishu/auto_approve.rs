//! The scopes Feishu enables for a self-registered app without a tenant admin (see
//! [`AUTO_APPROVED_SCOPES`]), and the check that keeps the list in step with lark-cli's data.

/// The scopes an app created through self-registration (`/oauth/v1/app/registration`,
/// archetype `PersonalAgent`) has enabled from the start, besides `offline_access`: lark-cli's
/// auto-approve set restricted to the scopes the emulator's endpoints accept
/// ([`super::ENDPOINTS`], [`super::scopes::BOT_ENDPOINTS`], the message-reading groups and
/// [`super::PREFERRED_SCOPES`]). Every other scope answers 99991672 until applied for on the
/// scope-apply page and approved (see [`super::scope_apply`]).
///
/// Derivation, as lark-cli's `LoadAutoApproveSet` (`internal/registry/loader.go`) does it:
///
/// 1. every `scope_name` of `internal/registry/scope_priorities.json` whose `recommend` is the
///    string `"true"`;
/// 2. plus every scope in `recommend.allow` of `internal/registry/scope_overrides.json`;
/// 3. minus every scope in `recommend.deny` of the same file (the `_deny` key is a parked list
///    and is not read);
/// 4. intersected with the scopes of the endpoint table.
///
/// Of the endpoint table's scopes, these are *not* in the set (so a self-registered app lacks
/// them): `search:docs:read`, `drive:drive`, `drive:drive:readonly`,
/// `space:document:retrieve`, `task:task:writeonly`, `contact:contact:readonly_as_app`
/// (`recommend` is `"false"`); `im:chat` (recommended, but in `recommend.deny`);
/// `im:message.send_as_user` (`"false"`, and denied too); `contact:contact:readonly`,
/// `im:chat.group_info:readonly`, `im:message:send` (absent from the priorities file).
/// The calendar scopes `calendar:calendar.event:{create,read,update,delete}`,
/// `calendar:calendar.free_busy:read` and `calendar:calendar:read` are in only by
/// `recommend.allow` (their `recommend` is `"false"`).
///
/// Checked against lark-cli at commit `1262aac` (larksuite/cli, 2026).
pub const AUTO_APPROVED_SCOPES: &[&str] = &[
    "calendar:calendar",
    "calendar:calendar.event:create",
    "calendar:calendar.event:delete",
    "calendar:calendar.event:read",
    "calendar:calendar.event:update",
    "calendar:calendar.free_busy:read",
    "calendar:calendar:read",
    "calendar:calendar:readonly",
    "contact:contact.base:readonly",
    "contact:user:search",
    "docs:document.content:read",
    "docx:document",
    "docx:document.block:convert",
    "docx:document:create",
    "docx:document:readonly",
    "docx:document:write_only",
    "im:chat:read",
    "im:chat:readonly",
    "im:message",
    "im:message.group_msg:get_as_user",
    "im:message.p2p_msg:get_as_user",
    "im:message:readonly",
    "im:message:send_as_bot",
    "im:message:update",
    "task:task:read",
    "task:task:write",
    "wiki:node:read",
    "wiki:wiki",
    "wiki:wiki:readonly",
];

/// The scopes a self-registered app starts with: [`AUTO_APPROVED_SCOPES`] and
/// `offline_access` (recommended in lark-cli's data too, and needed for refresh tokens).
pub(crate) fn initial_scopes() -> Vec<String> {
    AUTO_APPROVED_SCOPES
        .iter()
        .chain(std::iter::once(&"offline_access"))
        .map(|s| (*s).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeSet;

    use super::super::scopes::{
        BOT_ENDPOINTS, ENDPOINTS, GROUP_MSG_AS_USER, P2P_MSG_AS_USER, PREFERRED_SCOPES,
    };
    use super::*;

    /// Every scope the emulator's endpoints accept or the tools ask for.
    fn universe() -> BTreeSet<&'static str> {
        let mut all: BTreeSet<&'static str> = PREFERRED_SCOPES.iter().copied().collect();
        for endpoint in ENDPOINTS.iter().chain(BOT_ENDPOINTS) {
            for group in endpoint.scopes {
                all.extend(group.iter().copied());
            }
        }
        all.extend(GROUP_MSG_AS_USER.iter().chain(P2P_MSG_AS_USER).copied());
        all
    }

    #[test]
    fn the_set_is_within_the_endpoint_table_sorted_and_holds_the_documented_cases() {
        let all = universe();
        for scope in AUTO_APPROVED_SCOPES {
            assert!(all.contains(scope), "{scope} is not in the endpoint table");
        }
        let mut sorted = AUTO_APPROVED_SCOPES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, AUTO_APPROVED_SCOPES, "sorted, no duplicates");
        for denied in [
            "search:docs:read",
            "drive:drive:readonly",
            "im:message.send_as_user",
            "im:chat",
        ] {
            assert!(!AUTO_APPROVED_SCOPES.contains(&denied), "{denied}");
        }
        assert!(AUTO_APPROVED_SCOPES.contains(&"calendar:calendar.free_busy:read"));
        assert!(initial_scopes().iter().any(|s| s == "offline_access"));
    }

    /// Re-derives the set from lark-cli's registry files in the local mirror, where this
    /// machine has one (`LARK_CLI_MIRROR` names another bare repository); elsewhere there is
    /// nothing to compare with and the test says so.
    #[test]
    fn the_set_matches_lark_clis_registry_files() {
        let repo = std::env::var("LARK_CLI_MIRROR")
            .unwrap_or_else(|_| "/work/.mirror/larksuite+cli/repo".to_owned());
        if !std::path::Path::new(&repo).exists() {
            eprintln!("no lark-cli mirror at {repo}: nothing to compare with");
            return;
        }
        let read = |file: &str| -> serde_json::Value {
            let out = std::process::Command::new("git")
                .args([
                    "-C",
                    &repo,
                    "show",
                    &format!("HEAD:internal/registry/{file}"),
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "git show {file}");
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let priorities = read("scope_priorities.json");
        let overrides = read("scope_overrides.json");
        let mut set: BTreeSet<String> = priorities
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["recommend"] == "true")
            .map(|e| e["scope_name"].as_str().unwrap().to_owned())
            .collect();
        let list = |key: &str| -> Vec<String> {
            overrides["recommend"][key]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect()
        };
        set.extend(list("allow"));
        for denied in list("deny") {
            set.remove(&denied);
        }
        let derived: Vec<&str> = universe()
            .into_iter()
            .filter(|s| set.contains(*s))
            .collect();
        assert_eq!(derived, AUTO_APPROVED_SCOPES);
    }
}
