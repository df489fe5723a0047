//! A server asking the user for input in the middle of a call (`elicitation/create`). What the
//! user is shown and what they answer is the app's business: an [`Elicitor`] gets the server's
//! message and the form's schema and gives back the user's values, or their refusal. The client
//! declares the elicitation capability only for the kinds of request its elicitor can put before
//! the user, so a server that needs input it cannot get is told so at the handshake rather than
//! refused later. Without an elicitor of the app's, every request is declined ([`DeclineAll`]).

use std::fmt::Debug;

use async_trait::async_trait;
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, UrlElicitationCapability,
};
use serde_json::{Map, Value};

/// What a server asks the user for.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitRequest {
    /// Values to fill in: a flat object schema of strings, numbers, booleans and enums, each
    /// property with its title, description and default as the server gave them.
    Form {
        /// Why the server asks, in its words.
        message: String,
        /// The requested schema (`type: object`, `properties`, `required`), as JSON.
        schema: Value,
    },
    /// A page for the user to open (a sign-in or payment of the server's own); nothing of
    /// what they do there passes through the client.
    Url {
        /// Why the server asks, in its words.
        message: String,
        /// The page.
        url: String,
        /// The server's id of the request, for the notice that it completed.
        elicitation_id: String,
    },
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// They gave the values (for a form) or went to the page (for a URL; the values are then
    /// empty).
    Accept(Map<String, Value>),
    /// They said no; the server carries on without.
    Decline,
    /// They dismissed the request without answering; the server may stop what it was doing.
    Cancel,
}

/// Which kinds of request an elicitor can put before the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElicitModes {
    /// Forms ([`ElicitRequest::Form`]).
    pub form: bool,
    /// Pages to open ([`ElicitRequest::Url`]).
    pub url: bool,
}

/// Puts a server's request before the user (the app: a card in the conversation).
#[async_trait]
pub trait Elicitor: Send + Sync + Debug {
    /// The kinds of request it handles; the client declares exactly these to servers.
    fn modes(&self) -> ElicitModes {
        ElicitModes {
            form: true,
            url: false,
        }
    }

    /// The user's answer to `request` from server `server_id`. A kind not in [`Self::modes`]
    /// never arrives here (it is declined first).
    async fn elicit(&self, server_id: &str, request: ElicitRequest) -> ElicitAnswer;
}

/// Declines everything, and declares nothing: the client for a user who cannot be asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeclineAll;

#[async_trait]
impl Elicitor for DeclineAll {
    fn modes(&self) -> ElicitModes {
        ElicitModes::default()
    }

    async fn elicit(&self, _server_id: &str, _request: ElicitRequest) -> ElicitAnswer {
        ElicitAnswer::Decline
    }
}

/// Accepts every form with the values the schema gives as defaults, and nothing else: what a
/// user does who submits a form as it was filled in for them. For tests and tools without a
/// user; the app asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptDefaults;

#[async_trait]
impl Elicitor for AcceptDefaults {
    async fn elicit(&self, _server_id: &str, request: ElicitRequest) -> ElicitAnswer {
        match request {
            ElicitRequest::Form { schema, .. } => ElicitAnswer::Accept(defaults(&schema)),
            ElicitRequest::Url { .. } => ElicitAnswer::Decline,
        }
    }
}

/// The defaults a form's schema gives, by property: what a form shows filled in before the
/// user changes anything (SEP-1034).
pub fn defaults(schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Map::new();
    };
    properties
        .iter()
        .filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone())))
        .collect()
}

/// The capability the client declares for `modes`; `None` when it handles no request at all.
pub(crate) fn capability(modes: ElicitModes) -> Option<ElicitationCapability> {
    if !modes.form && !modes.url {
        return None;
    }
    let mut capability = ElicitationCapability::new();
    if modes.form {
        capability = capability.with_form(FormElicitationCapability::new());
    }
    if modes.url {
        capability = capability.with_url(UrlElicitationCapability::new());
    }
    Some(capability)
}

/// Asks `elicitor` what the user answers to a server's request.
pub(crate) async fn answer(
    elicitor: &dyn Elicitor,
    server_id: &str,
    params: ElicitRequestParams,
) -> ElicitResult {
    let modes = elicitor.modes();
    let request = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } if modes.form => match serde_json::to_value(&requested_schema) {
            Ok(schema) => ElicitRequest::Form { message, schema },
            // A schema that does not serialise cannot be shown: declined, not guessed at.
            Err(_) => return ElicitResult::new(ElicitationAction::Decline),
        },
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } if modes.url => ElicitRequest::Url {
            message,
            url,
            elicitation_id,
        },
        // A kind the client did not declare: a server that asks anyway is declined.
        _ => return ElicitResult::new(ElicitationAction::Decline),
    };
    match elicitor.elicit(server_id, request).await {
        ElicitAnswer::Accept(values) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(values))
        }
        ElicitAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        ElicitAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form", "message": "who are you?", "requestedSchema": schema
        }))
        .unwrap()
    }

    #[test]
    fn defaults_are_read_per_property_and_absent_ones_left_out() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }});
        assert_eq!(
            Value::Object(defaults(&schema)),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
        );
        assert!(defaults(&json!({})).is_empty());
    }

    #[tokio::test]
    async fn a_form_is_answered_with_defaults_and_a_url_declined() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 3}}});
        let result = answer(&AcceptDefaults, "s", form(schema)).await;
        assert_eq!(result.action, ElicitationAction::Accept);
        assert_eq!(result.content, Some(json!({"n": 3})));
        let url: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "pay", "url": "https://example.com/pay", "elicitationId": "e1"
        }))
        .unwrap();
        assert_eq!(
            answer(&AcceptDefaults, "s", url).await.action,
            ElicitationAction::Decline,
            "URL mode was not declared"
        );
    }

    #[tokio::test]
    async fn without_an_elicitor_of_the_apps_nothing_is_declared_and_all_is_declined() {
        assert_eq!(capability(DeclineAll.modes()), None);
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 3}}});
        let result = answer(&DeclineAll, "s", form(schema)).await;
        assert_eq!(result.action, ElicitationAction::Decline);
        assert_eq!(result.content, None);
        let declared = serde_json::to_value(capability(AcceptDefaults.modes())).unwrap();
        assert_eq!(declared, json!({"form": {}}));
    }
}
