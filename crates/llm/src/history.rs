//! Pieces of history conversion that every provider needs.

use agent::{Blob, FunctionCall, FunctionResponse, GenerateContentConfig, LlmRequest};

/// The system instruction as one text, if there is any.
pub(crate) fn system_text(request: &LlmRequest) -> Option<String> {
    let text = request
        .config
        .as_ref()
        .and_then(|c| c.system_instruction.as_ref())
        .map(|c| {
            c.parts
                .iter()
                .filter_map(agent::Part::text)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    (!text.trim().is_empty()).then_some(text)
}

/// The functions the model is shown.
pub(crate) fn declarations(request: &LlmRequest) -> Vec<&agent::FunctionDeclaration> {
    request
        .config
        .as_ref()
        .map(|c: &GenerateContentConfig| c.visible_function_declarations().collect())
        .unwrap_or_default()
}

/// A declaration's parameter schema; services want an object schema even for no parameters.
pub(crate) fn parameters(declaration: &agent::FunctionDeclaration) -> serde_json::Value {
    declaration
        .parameters
        .clone()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}))
}

/// A function response as the text a model reads: the seed's `{"output": …}` / `{"error": …}`.
pub(crate) fn response_text(response: &FunctionResponse) -> String {
    serde_json::to_string(&response.response).unwrap_or_default()
}

/// Whether a function response reports an error (Anthropic's `is_error`).
pub(crate) fn is_error(response: &FunctionResponse) -> bool {
    response.error().is_some()
}

/// The text of a blob the model can read as text (JSON, plain text), if it is one.
pub(crate) fn blob_text(blob: &Blob) -> Option<String> {
    let mime = blob.mime_type.as_deref().unwrap_or_default().to_lowercase();
    let textual = mime.starts_with("text/") || mime == "application/json";
    if textual {
        String::from_utf8(blob.raw_data.clone()).ok()
    } else {
        None
    }
}

/// Whether a blob is an image.
pub(crate) fn is_image(blob: &Blob) -> bool {
    blob.mime_type
        .as_deref()
        .is_some_and(|m| m.to_lowercase().starts_with("image/"))
}

/// Pairs function calls and responses by id for services that need ids on both, also when the
/// stored history lacks them (older sessions, other runtimes): an id-less call gets `call_<n>`,
/// an id-less response takes the oldest unanswered call of the same function.
#[derive(Debug, Default)]
pub(crate) struct CallIds {
    open: Vec<(String, String)>,
    counter: usize,
}

impl CallIds {
    fn fresh(&mut self) -> String {
        self.counter += 1;
        format!("call_{}", self.counter)
    }

    /// The id to send for this call.
    pub fn call(&mut self, call: &FunctionCall) -> String {
        let id = match call.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => id.to_owned(),
            None => self.fresh(),
        };
        self.open.push((id.clone(), call.name.clone()));
        id
    }

    /// The id to send for this response.
    pub fn response(&mut self, response: &FunctionResponse) -> String {
        if let Some(id) = response.id.as_deref().filter(|id| !id.is_empty()) {
            self.open.retain(|(open, _)| open != id);
            return id.to_owned();
        }
        match self
            .open
            .iter()
            .position(|(_, name)| *name == response.name)
        {
            Some(i) => self.open.remove(i).0,
            None => self.fresh(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    #[test]
    fn id_less_calls_and_responses_pair_by_name_in_order() {
        let mut ids = CallIds::default();
        let a = ids.call(&FunctionCall::new("list", Map::new()));
        let b = ids.call(&FunctionCall::new("send", Map::new()));
        let c = ids.call(&FunctionCall::new("list", Map::new()));
        assert_eq!(ids.response(&FunctionResponse::new("send", Map::new())), b);
        assert_eq!(ids.response(&FunctionResponse::new("list", Map::new())), a);
        assert_eq!(ids.response(&FunctionResponse::new("list", Map::new())), c);
        let with_id = FunctionCall {
            id: Some("fc_1".to_owned()),
            ..FunctionCall::new("x", Map::new())
        };
        assert_eq!(ids.call(&with_id), "fc_1");
        assert_eq!(
            ids.response(&FunctionResponse::new("x", Map::new()).with_id("fc_1")),
            "fc_1"
        );
    }
}
