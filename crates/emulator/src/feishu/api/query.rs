//! Query parameters the way Feishu's gateway reads them, where the official SDKs showed the
//! emulator to be stricter or looser than Feishu.

use std::collections::HashMap;

use super::super::tenant::Tenant;

/// A boolean query parameter: absent or empty is `None`. Feishu's services are written in Go
/// and accept what `strconv.ParseBool` accepts; the Python SDK (`lark-oapi`) sends Python's
/// `True`/`False`, the Node SDK `true`/`false`.
pub(crate) fn flag(query: &HashMap<String, String>, name: &str) -> Result<Option<bool>, String> {
    match query.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Ok(Some(false)),
        Some(_) => Err(format!("{name} must be true or false")),
    }
}

/// Which of a person's three ids an answer carries (`user_id_type`, default `open_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdType {
    /// `ou_…`: the person within this app.
    Open,
    /// `on_…`: the person across the developer's apps.
    Union,
    /// The tenant's own employee id.
    User,
}

impl IdType {
    /// Reads `user_id_type`; an unknown value is an error naming the accepted ones.
    pub(crate) fn from_query(query: &HashMap<String, String>) -> Result<IdType, String> {
        match query.get("user_id_type").map(String::as_str) {
            None | Some("" | "open_id") => Ok(IdType::Open),
            Some("union_id") => Ok(IdType::Union),
            Some("user_id") => Ok(IdType::User),
            Some(other) => Err(format!(
                "user_id_type {other:?} is not one of open_id, union_id, user_id"
            )),
        }
    }

    /// The id of the person whose open_id is `open_id`, in this type (the open_id itself when
    /// the person is not in the tenant).
    pub(crate) fn of(self, tenant: &Tenant, open_id: &str) -> String {
        match (self, tenant.person(open_id)) {
            (IdType::Union, Some(person)) => person.union_id.clone(),
            (IdType::User, Some(person)) => person.user_id.clone(),
            _ => open_id.to_owned(),
        }
    }

    /// The open_id of the person `id` (in this type) names, if any.
    pub(crate) fn to_open_id(self, tenant: &Tenant, id: &str) -> Option<String> {
        tenant
            .people
            .iter()
            .find(|p| match self {
                IdType::Open => p.open_id == id,
                IdType::Union => p.union_id == id,
                IdType::User => p.user_id == id,
            })
            .map(|p| p.open_id.clone())
    }
}
