//! Card messages as Feishu's card service sees them: the checks a card's JSON must pass before
//! it is sent or updated (answered, as Feishu does, with 230099 and a sub-code in the message),
//! the record of every version a card went through, and finding a card's interactive elements
//! (a button by its `name`, the form around it, whether it is disabled) for the test hook that
//! clicks them.
//!
//! Sources: "卡片 JSON 2.0 结构" and its breaking-changes notes (elements under `body`, the
//! `action` and `note` modules gone, unknown attributes refused, `update_multi` only `true`), the
//! sub-codes of 230099 in "更新已发送的消息卡片" (200621 unparsable, 200861 a tag 2.0 dropped,
//! 200380 unknown template), 200530 (a form field without `name`) and 200830 (a 2.0 card updated
//! to 1.0) from "卡片回传交互回调".

use serde::Serialize;
use serde_json::Value;

/// Why a card's JSON was refused: Feishu's sub-code, where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Failed to create card content, ext=ErrCode: {code}; ErrPath: {path}; ErrMsg: {msg}; ErrorValue: {value}; "
)]
pub(crate) struct CardError {
    pub(crate) code: u32,
    pub(crate) path: String,
    pub(crate) msg: String,
    pub(crate) value: String,
}

fn refuse(code: u32, path: &str, msg: &str, value: impl Into<String>) -> CardError {
    CardError {
        code,
        path: path.to_owned(),
        msg: msg.to_owned(),
        value: value.into(),
    }
}

const PARSE: u32 = 200_621;
const DROPPED_IN_V2: u32 = 200_861;
const NO_TEMPLATE: u32 = 200_380;
const FORM_NAME: u32 = 200_530;
/// A card sent as JSON 2.0 cannot become a 1.0 card.
pub(crate) const V2_TO_V1: u32 = 200_830;

/// Top-level attributes of a JSON 2.0 card.
const V2_ROOT: &[&str] = &["schema", "config", "card_link", "header", "body"];
/// Components of JSON 2.0 (containers, display, interactive), by `tag`.
const V2_TAGS: &[&str] = &[
    "column_set",
    "column",
    "form",
    "interactive_container",
    "collapsible_panel",
    "markdown",
    "div",
    "plain_text",
    "hr",
    "img",
    "img_combination",
    "person",
    "person_list",
    "chart",
    "table",
    "audio",
    "video",
    "button",
    "input",
    "overflow",
    "select_static",
    "multi_select_static",
    "select_person",
    "multi_select_person",
    "select_img",
    "date_picker",
    "picker_time",
    "picker_datetime",
    "checker",
];
/// Tags JSON 1.0 had that 2.0 refuses.
const V1_ONLY_TAGS: &[&str] = &["action", "note"];
/// Interactive components that need a `name` inside a form.
const FORM_FIELDS: &[&str] = &[
    "input",
    "select_static",
    "multi_select_static",
    "select_person",
    "multi_select_person",
    "date_picker",
    "picker_time",
    "picker_datetime",
    "checker",
    "select_img",
];
/// Header colours (`header.template`).
pub(crate) const TEMPLATES: &[&str] = &[
    "blue",
    "wathet",
    "turquoise",
    "green",
    "yellow",
    "orange",
    "red",
    "carmine",
    "violet",
    "purple",
    "indigo",
    "grey",
    "default",
];

/// Whether a card is JSON 2.0.
pub(crate) fn is_v2(card: &Value) -> bool {
    card.get("schema").and_then(Value::as_str) == Some("2.0")
}

/// Checks a card's JSON as Feishu's card service does and answers it parsed.
pub(crate) fn validate(content: &str) -> Result<Value, CardError> {
    let card: Value = serde_json::from_str(content).map_err(|e| {
        refuse(
            PARSE,
            "ROOT",
            "parse card json err, please check whether the card json is correct",
            e.to_string(),
        )
    })?;
    let Some(root) = card.as_object() else {
        return Err(refuse(
            PARSE,
            "ROOT",
            "parse card json err, please check whether the card json is correct",
            "the card is not a JSON object",
        ));
    };
    if root.get("type").and_then(Value::as_str) == Some("template") {
        // The emulator's tenant has no cards built in the card builder.
        let id = card["data"]["template_id"].as_str().unwrap_or_default();
        return Err(refuse(
            NO_TEMPLATE,
            "ROOT",
            "template does not exist, please confirm whether this template has been released",
            format!("templateID: {id}"),
        ));
    }
    match root.get("schema") {
        None => validate_v1(&card)?,
        Some(Value::String(s)) if s == "2.0" => validate_v2(&card)?,
        Some(other) => {
            return Err(refuse(
                PARSE,
                "ROOT -> schema",
                "unsupported card schema",
                other.to_string(),
            ));
        }
    }
    Ok(card)
}

/// JSON 1.0: `elements` (or `i18n_elements`) at the top; kept as Feishu still accepts it.
fn validate_v1(card: &Value) -> Result<(), CardError> {
    let has_elements = card.get("elements").is_some_and(Value::is_array)
        || card.get("i18n_elements").is_some_and(Value::is_object);
    if !has_elements {
        return Err(refuse(
            PARSE,
            "ROOT",
            "parse card json err, please check whether the card json is correct",
            "a card needs elements (1.0) or schema 2.0 with body.elements",
        ));
    }
    Ok(())
}

fn validate_v2(card: &Value) -> Result<(), CardError> {
    let parse_err = "parse card json err, please check whether the card json is correct";
    for key in card.as_object().map(|o| o.keys()).into_iter().flatten() {
        if key == "elements" || key == "i18n_elements" {
            return Err(refuse(
                DROPPED_IN_V2,
                &format!("ROOT -> {key}"),
                "cards of schema V2 no longer support this capability",
                format!("{key} moved under body"),
            ));
        }
        if !V2_ROOT.contains(&key.as_str()) {
            return Err(refuse(
                PARSE,
                &format!("ROOT -> {key}"),
                parse_err,
                format!("unknown attribute {key}"),
            ));
        }
    }
    if card["config"]["update_multi"] == Value::Bool(false) {
        return Err(refuse(
            PARSE,
            "ROOT -> config -> update_multi",
            "cards of schema V2 only support shared cards (update_multi: true)",
            "false",
        ));
    }
    if let Some(header) = card.get("header") {
        if !header.is_object() {
            return Err(refuse(PARSE, "ROOT -> header", parse_err, "not an object"));
        }
        if let Some(template) = header.get("template")
            && !template.as_str().is_some_and(|t| TEMPLATES.contains(&t))
        {
            return Err(refuse(
                PARSE,
                "ROOT -> header -> template",
                parse_err,
                template.to_string(),
            ));
        }
    }
    let Some(elements) = card["body"].get("elements") else {
        return Err(refuse(
            PARSE,
            "ROOT -> body",
            parse_err,
            "body.elements is required",
        ));
    };
    let mut names = Vec::new();
    walk(elements, "ROOT -> body -> elements", false, &mut names)
}

/// Checks `elements` (an array of components), recursing into containers.
fn walk(
    elements: &Value,
    path: &str,
    in_form: bool,
    names: &mut Vec<String>,
) -> Result<(), CardError> {
    let parse_err = "parse card json err, please check whether the card json is correct";
    let Some(list) = elements.as_array() else {
        return Err(refuse(PARSE, path, parse_err, "elements must be an array"));
    };
    for (i, element) in list.iter().enumerate() {
        let tag = element.get("tag").and_then(Value::as_str).unwrap_or("");
        let here = format!("{path} -> [{i}](tag: {tag})");
        if V1_ONLY_TAGS.contains(&tag) {
            return Err(refuse(
                DROPPED_IN_V2,
                &here,
                "cards of schema V2 no longer support this capability",
                format!("unsupported tag {tag}"),
            ));
        }
        if !V2_TAGS.contains(&tag) {
            return Err(refuse(
                PARSE,
                &here,
                parse_err,
                format!("unknown tag {tag:?}"),
            ));
        }
        if let Some(name) = element.get("name") {
            let name = name.as_str().unwrap_or_default().to_owned();
            if !name.is_empty() {
                if names.contains(&name) {
                    return Err(refuse(
                        FORM_NAME,
                        &here,
                        "the name of a component must be unique in the card",
                        name,
                    ));
                }
                names.push(name);
            }
        }
        let named = element
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let submits = tag == "button" && element.get("form_action_type").is_some();
        if in_form && (FORM_FIELDS.contains(&tag) || submits) && !named {
            return Err(refuse(
                FORM_NAME,
                &here,
                "the name of a component in a form is empty",
                tag.to_owned(),
            ));
        }
        if tag == "form" && in_form {
            return Err(refuse(PARSE, &here, parse_err, "a form inside a form"));
        }
        if tag == "form" && !named {
            return Err(refuse(
                FORM_NAME,
                &here,
                "the name of a form is empty",
                "form",
            ));
        }
        if let Some(behaviors) = element.get("behaviors") {
            check_behaviors(behaviors, &here)?;
        }
        match tag {
            "column_set" => {
                let columns = element.get("columns").cloned().unwrap_or(Value::Null);
                let Some(columns) = columns.as_array() else {
                    return Err(refuse(PARSE, &here, parse_err, "columns must be an array"));
                };
                for (j, column) in columns.iter().enumerate() {
                    let col_path = format!("{here} -> columns -> [{j}]");
                    if column.get("tag").and_then(Value::as_str) != Some("column") {
                        return Err(refuse(PARSE, &col_path, parse_err, "not a column"));
                    }
                    if let Some(inner) = column.get("elements") {
                        walk(inner, &format!("{col_path} -> elements"), in_form, names)?;
                    }
                }
            }
            "form" | "collapsible_panel" | "interactive_container" | "column" => {
                if let Some(inner) = element.get("elements") {
                    walk(
                        inner,
                        &format!("{here} -> elements"),
                        in_form || tag == "form",
                        names,
                    )?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_behaviors(behaviors: &Value, path: &str) -> Result<(), CardError> {
    let parse_err = "parse card json err, please check whether the card json is correct";
    let Some(list) = behaviors.as_array() else {
        return Err(refuse(PARSE, path, parse_err, "behaviors must be an array"));
    };
    for behavior in list {
        match behavior.get("type").and_then(Value::as_str) {
            Some("callback") => {
                if behavior.get("value").is_none() {
                    return Err(refuse(
                        PARSE,
                        path,
                        parse_err,
                        "a callback behavior needs a value",
                    ));
                }
            }
            Some("open_url") => {
                if !behavior.get("default_url").is_some_and(Value::is_string) {
                    return Err(refuse(
                        PARSE,
                        path,
                        parse_err,
                        "an open_url behavior needs default_url",
                    ));
                }
            }
            Some("form_action") => {}
            other => {
                return Err(refuse(
                    PARSE,
                    path,
                    parse_err,
                    format!("unknown behavior type {other:?}"),
                ));
            }
        }
    }
    Ok(())
}

/// One version of a card: what it showed from `at` on, and what put it there.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CardVersion {
    /// The card's JSON.
    pub card: Value,
    /// `send`, `patch` (`PATCH /im/v1/messages/:id`) or `callback` (a click's response).
    pub source: String,
    /// Milliseconds since the Unix epoch.
    pub at: i64,
}

/// A card message a bot sent, as the test hooks report it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BotCard {
    /// `om_…`.
    pub message_id: String,
    /// The app whose bot sent it.
    pub app_id: String,
    /// The 1:1 chat with the bot it is in.
    pub chat_id: String,
    /// The person the chat is with (`ou_…`).
    pub open_id: String,
    /// What it shows now.
    pub card: Value,
    /// Every version, oldest first (the first is the one sent).
    pub versions: Vec<CardVersion>,
    /// Toasts the app's answers to clicks showed, oldest first.
    pub toasts: Vec<Value>,
    /// For a forwarded copy: the message it was forwarded from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<String>,
}

/// An interactive element found in a card: what a click on it sends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Clickable {
    pub(crate) tag: String,
    pub(crate) name: String,
    /// The `value` of its callback behaviour (`None`: the element has none).
    pub(crate) value: Option<Value>,
    pub(crate) disabled: bool,
    /// The form it submits, if it is a form's submit button: the form's field names.
    pub(crate) form_fields: Option<Vec<String>>,
}

/// Finds the element called `name` (its `name` attribute) in a card.
pub(crate) fn find_clickable(card: &Value, name: &str) -> Option<Clickable> {
    let elements = if is_v2(card) {
        &card["body"]["elements"]
    } else {
        &card["elements"]
    };
    find_in(elements, name, None)
}

fn find_in(elements: &Value, name: &str, form: Option<&Value>) -> Option<Clickable> {
    for element in elements.as_array()? {
        let tag = element["tag"].as_str().unwrap_or_default();
        if element["name"].as_str() == Some(name) {
            let value = element["behaviors"]
                .as_array()
                .and_then(|b| b.iter().find(|b| b["type"] == "callback"))
                .map(|b| b["value"].clone())
                // JSON 1.0 buttons carry `value` directly.
                .or_else(|| element.get("value").cloned());
            let submits = element.get("form_action_type").and_then(Value::as_str) == Some("submit");
            return Some(Clickable {
                tag: tag.to_owned(),
                name: name.to_owned(),
                value,
                disabled: element["disabled"].as_bool().unwrap_or(false),
                form_fields: form.filter(|_| submits).map(form_fields),
            });
        }
        let inner_form = if tag == "form" { Some(element) } else { form };
        if let Some(columns) = element["columns"].as_array() {
            for column in columns {
                if let Some(found) = find_in(&column["elements"], name, inner_form) {
                    return Some(found);
                }
            }
        }
        if let Some(found) = find_in(&element["elements"], name, inner_form) {
            return Some(found);
        }
    }
    None
}

/// The names of a form's fields (what `form_value` may carry).
fn form_fields(form: &Value) -> Vec<String> {
    fn collect(elements: &Value, out: &mut Vec<String>) {
        for element in elements.as_array().into_iter().flatten() {
            let tag = element["tag"].as_str().unwrap_or_default();
            if FORM_FIELDS.contains(&tag)
                && let Some(name) = element["name"].as_str()
            {
                out.push(name.to_owned());
            }
            for column in element["columns"].as_array().into_iter().flatten() {
                collect(&column["elements"], out);
            }
            collect(&element["elements"], out);
        }
    }
    let mut out = Vec::new();
    collect(&form["elements"], &mut out);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn approval() -> Value {
        json!({
            "schema": "2.0",
            "config": {"update_multi": true},
            "header": {"title": {"tag": "plain_text", "content": "Send a message"}, "template": "orange"},
            "body": {"elements": [
                {"tag": "markdown", "content": "**To** 产品周会"},
                {"tag": "form", "name": "decide", "elements": [
                    {"tag": "input", "name": "reason", "placeholder": {"tag": "plain_text", "content": "Reason"}},
                    {"tag": "column_set", "columns": [
                        {"tag": "column", "elements": [
                            {"tag": "button", "name": "approve", "text": {"tag": "plain_text", "content": "Approve"},
                             "type": "primary", "form_action_type": "submit",
                             "behaviors": [{"type": "callback", "value": {"call": "c1", "decision": "approve"}}]}
                        ]},
                        {"tag": "column", "elements": [
                            {"tag": "button", "name": "reject", "text": {"tag": "plain_text", "content": "Reject"},
                             "form_action_type": "submit", "disabled": true,
                             "behaviors": [{"type": "callback", "value": {"call": "c1", "decision": "reject"}}]}
                        ]}
                    ]}
                ]}
            ]}
        })
    }

    #[test]
    fn a_json_2_card_with_a_form_passes_and_its_buttons_are_found() {
        let card = validate(&approval().to_string()).unwrap();
        let approve = find_clickable(&card, "approve").unwrap();
        assert_eq!(
            approve.value,
            Some(json!({"call": "c1", "decision": "approve"}))
        );
        assert_eq!(approve.form_fields, Some(vec!["reason".to_owned()]));
        assert!(!approve.disabled);
        assert!(find_clickable(&card, "reject").unwrap().disabled);
        assert_eq!(find_clickable(&card, "nowhere"), None);
    }

    #[test]
    fn cards_feishu_refuses_are_refused_with_its_sub_codes() {
        let code = |card: Value| validate(&card.to_string()).unwrap_err().code;
        assert_eq!(validate("{not json").unwrap_err().code, PARSE);
        let mut v1_module = approval();
        v1_module["body"]["elements"] = json!([{"tag": "action", "actions": []}]);
        assert_eq!(code(v1_module), DROPPED_IN_V2);
        let mut top_elements = approval();
        top_elements["elements"] = json!([]);
        assert_eq!(code(top_elements), DROPPED_IN_V2);
        let mut unknown = approval();
        unknown["footer"] = json!({});
        assert_eq!(code(unknown), PARSE);
        let mut unnamed = approval();
        unnamed["body"]["elements"][1]["elements"][0]
            .as_object_mut()
            .unwrap()
            .remove("name");
        assert_eq!(code(unnamed), FORM_NAME);
        let mut colour = approval();
        colour["header"]["template"] = json!("pink");
        assert_eq!(code(colour), PARSE);
        let mut no_body = approval();
        no_body.as_object_mut().unwrap().remove("body");
        assert_eq!(code(no_body), PARSE);
        let mut not_shared = approval();
        not_shared["config"]["update_multi"] = json!(false);
        assert_eq!(code(not_shared), PARSE);
        assert_eq!(
            code(json!({"type": "template", "data": {"template_id": "AAq"}})),
            NO_TEMPLATE
        );
        let message = validate("[1]").unwrap_err().to_string();
        assert!(
            message.starts_with("Failed to create card content, ext=ErrCode: 200621"),
            "{message}"
        );
        // A 1.0 card is still a card.
        assert!(validate(&json!({"elements": [{"tag": "div"}]}).to_string()).is_ok());
    }
}
