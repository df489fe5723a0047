//! The shapes of Feishu's ids, and the one way a URL path is built from them.
//!
//! An id the model passes (an event, chat, message, document, folder or task) ends up in a URL
//! path or a query. Unchecked, `event_id = "../../../../../task/v2/tasks/G"` would turn a calendar
//! delete into `DELETE /open-apis/task/v2/tasks/G`, a write the user never saw on the approval
//! card. So every id is checked against the shape Feishu gives it before any request, the tools
//! declare those shapes in their JSON Schemas (so the engine refuses a bad id at argument
//! validation, before a write is held for approval), and [`ApiPath`] builds every path from
//! fixed segments and checked ids, each percent-encoded as exactly one segment.
//!
//! The shapes are deliberately narrow character sets (letters, digits, `_`, `-`, and for calendar
//! ids `.` and `@` as Feishu's own ids carry them) with Feishu's documented prefixes: none admits
//! `/`, `?`, `#`, `%`, whitespace, or a segment made only of dots.

use std::fmt;

/// A kind of Feishu id, with its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// A calendar (`feishu.cn_…@group.calendar.feishu.cn`); comes from Feishu, not the model.
    Calendar,
    /// A calendar event, or one instance of a recurring one (`<uuid>_0`, `<uuid>_<start>`).
    Event,
    /// A chat (`oc_…`).
    Chat,
    /// A message (`om_…`).
    Message,
    /// A person's open_id (`ou_…`).
    OpenId,
    /// A docx document (`doxcn…` or 27 letters and digits).
    Document,
    /// A drive folder token (`fldcn…` or letters and digits).
    Folder,
    /// A task v2 guid (a UUID).
    Task,
}

/// Letters and digits only.
const ALNUM: &str = "A-Za-z0-9";

impl IdKind {
    /// The argument's name in messages ("event id").
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Calendar => "calendar id",
            IdKind::Event => "event id",
            IdKind::Chat => "chat id",
            IdKind::Message => "message id",
            IdKind::OpenId => "open_id",
            IdKind::Document => "document id",
            IdKind::Folder => "folder token",
            IdKind::Task => "task guid",
        }
    }

    /// What a valid one looks like, for the error message and the schema's description.
    pub fn example(self) -> &'static str {
        match self {
            IdKind::Calendar => "feishu.cn_xxx@group.calendar.feishu.cn",
            IdKind::Event => "0a1b2c3d-4e5f-6789-abcd-ef0123456789_0",
            IdKind::Chat => "oc_5ad11d72b830411d72b836c20",
            IdKind::Message => "om_dc13264520392913993dd051dba21dcf",
            IdKind::OpenId => "ou_7d8a6e6df7621556ce0d21922b676706",
            IdKind::Document => "doxcnePuYufKa49ISjhD8Ih0ikh",
            IdKind::Folder => "fldcnMsNb5bHhIW9IjG1LVswg",
            IdKind::Task => "d300a75f-c56a-4be9-80d1-e47653028ceb",
        }
    }

    /// The shape as a JSON Schema `pattern` (an ECMA 262 regular expression, anchored).
    pub fn pattern(self) -> String {
        match self {
            IdKind::Calendar => format!("^[{ALNUM}_@-][{ALNUM}._@-]{{0,127}}$"),
            IdKind::Event => format!("^[{ALNUM}-]{{1,64}}_[0-9]{{1,20}}$"),
            IdKind::Chat => format!("^oc_[{ALNUM}]{{1,64}}$"),
            IdKind::Message => format!("^om_[{ALNUM}_]{{1,64}}$"),
            IdKind::OpenId => format!("^ou_[{ALNUM}]{{1,64}}$"),
            IdKind::Document | IdKind::Folder => format!("^[{ALNUM}]{{8,64}}$"),
            IdKind::Task => format!("^[{ALNUM}-]{{8,64}}$"),
        }
    }

    /// Whether `value` has this kind's shape; the same rule as [`IdKind::pattern`].
    pub fn matches(self, value: &str) -> bool {
        let alnum = |c: char| c.is_ascii_alphanumeric();
        let all = |s: &str, ok: &dyn Fn(char) -> bool, min: usize, max: usize| {
            (min..=max).contains(&s.len()) && s.chars().all(ok)
        };
        match self {
            IdKind::Calendar => {
                let mut chars = value.chars();
                chars
                    .next()
                    .is_some_and(|c| alnum(c) || c == '_' || c == '@' || c == '-')
                    && all(
                        chars.as_str(),
                        &|c| alnum(c) || matches!(c, '.' | '_' | '@' | '-'),
                        0,
                        127,
                    )
            }
            IdKind::Event => value.rsplit_once('_').is_some_and(|(series, instance)| {
                all(series, &|c| alnum(c) || c == '-', 1, 64)
                    && all(instance, &|c| c.is_ascii_digit(), 1, 20)
            }),
            IdKind::Chat => value
                .strip_prefix("oc_")
                .is_some_and(|rest| all(rest, &alnum, 1, 64)),
            IdKind::Message => value
                .strip_prefix("om_")
                .is_some_and(|rest| all(rest, &|c| alnum(c) || c == '_', 1, 64)),
            IdKind::OpenId => value
                .strip_prefix("ou_")
                .is_some_and(|rest| all(rest, &alnum, 1, 64)),
            IdKind::Document | IdKind::Folder => all(value, &alnum, 8, 64),
            IdKind::Task => all(value, &|c| alnum(c) || c == '-', 8, 64),
        }
    }

    /// `value` if it has this kind's shape, otherwise an error saying so.
    pub fn check<'a>(self, argument: &str, value: &'a str) -> Result<&'a str, BadId> {
        if self.matches(value) {
            Ok(value)
        } else {
            Err(BadId {
                argument: argument.to_owned(),
                kind: self,
                value: value.to_owned(),
            })
        }
    }

    /// A JSON Schema for a string argument of this kind, with `description`.
    pub fn schema(self, description: &str) -> serde_json::Value {
        let description = if description.is_empty() {
            format!("A Feishu {}, like {}.", self.noun(), self.example())
        } else {
            format!("{description} Like {}.", self.example())
        };
        serde_json::json!({"type": "string", "pattern": self.pattern(), "description": description})
    }
}

/// An id argument without its kind's shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{argument}: {} is not a Feishu {} (expected something like {}: letters, digits{}); use an id exactly as a list or search tool returned it", shown(.value), .kind.noun(), .kind.example(), extra_chars(*.kind))]
pub struct BadId {
    /// The argument's name (`event_id`).
    pub argument: String,
    /// What it should have been.
    pub kind: IdKind,
    /// What it was.
    pub value: String,
}

fn extra_chars(kind: IdKind) -> &'static str {
    match kind {
        IdKind::Calendar => ", '.', '@', '_' and '-'",
        IdKind::Event | IdKind::Task => " and '-' (and '_' before an event's instance number)",
        IdKind::Message => " and '_' after om_",
        IdKind::Chat | IdKind::OpenId => " after its prefix",
        IdKind::Document | IdKind::Folder => " only",
    }
}

/// The value quoted, cut short so a hostile argument cannot flood the message.
fn shown(value: &str) -> String {
    const MAX: usize = 80;
    if value.chars().count() <= MAX {
        format!("{value:?}")
    } else {
        let head: String = value.chars().take(MAX).collect();
        format!("{head:?}…")
    }
}

/// A path under `/open-apis/`, built only from fixed segments and checked ids.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiPath {
    segments: Vec<String>,
}

impl ApiPath {
    /// A path of fixed segments (`"calendar/v4/calendars"`): the app's own constants only.
    pub fn new(fixed: &'static str) -> ApiPath {
        ApiPath {
            segments: Vec::new(),
        }
        .then(fixed)
    }

    /// Appends fixed segments.
    #[must_use]
    pub fn then(mut self, fixed: &'static str) -> ApiPath {
        self.segments.extend(
            fixed
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        self
    }

    /// Appends one id as one segment, after checking its shape.
    pub fn id(mut self, kind: IdKind, argument: &str, value: &str) -> Result<ApiPath, BadId> {
        self.segments.push(kind.check(argument, value)?.to_owned());
        Ok(self)
    }

    /// The segments, unencoded.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// `base` + `open-apis/` + the segments, each percent-encoded as exactly one segment.
    pub fn url(&self, base: &url::Url) -> url::Url {
        let mut url = base.clone();
        {
            // A base URL that cannot have a path (`data:`…) is never configured: the endpoints
            // are http(s) URLs parsed at start-up, and `Endpoints` only holds such URLs.
            if let Ok(mut path) = url.path_segments_mut() {
                path.pop_if_empty().push("open-apis");
                for segment in &self.segments {
                    path.push(segment);
                }
            }
        }
        url
    }
}

impl fmt::Debug for ApiPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for ApiPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.segments.join("/"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const KINDS: [IdKind; 8] = [
        IdKind::Calendar,
        IdKind::Event,
        IdKind::Chat,
        IdKind::Message,
        IdKind::OpenId,
        IdKind::Document,
        IdKind::Folder,
        IdKind::Task,
    ];

    /// Hostile values no kind may accept.
    const HOSTILE: [&str; 14] = [
        "",
        ".",
        "..",
        "../../../../../task/v2/tasks/G",
        "%2e%2e",
        "%2E%2E",
        "oc_a/../../x",
        "oc_abc?x=1",
        "oc_abc#frag",
        "ou_abc/def",
        "a b",
        "abcdefgh\n",
        "abcdefgh%00",
        "abcdefgh\\..",
    ];

    #[test]
    fn the_examples_match_and_hostile_values_do_not() {
        for kind in KINDS {
            assert!(kind.matches(kind.example()), "{kind:?} example");
            for bad in HOSTILE {
                assert!(!kind.matches(bad), "{kind:?} accepted {bad:?}");
            }
        }
        assert!(IdKind::Event.matches("0a1b2c3d-4e5f-6789-abcd-ef0123456789_1733040000"));
        assert!(IdKind::Calendar.matches("feishu.cn_abc@group.calendar.feishu.cn"));
        assert!(!IdKind::Calendar.matches(".hidden"));
    }

    /// The hand-written matcher and the schema's regular expression are the same rule: what the
    /// engine's validation accepts is exactly what the client accepts.
    #[test]
    fn the_pattern_and_the_matcher_agree() {
        let samples = [
            "oc_5ad11d72b830411d72b836c20",
            "om_x100b4_abc",
            "ou_7d8a",
            "doxcnePuYufKa49ISjhD8Ih0ikh",
            "abc",
            "abcdefgh",
            "0a1b2c3d-4e5f_0",
            "a_b_1",
            "_0",
            "x@y.z",
            "@",
            "-",
            "feishu.cn_x@group.calendar.feishu.cn",
            "d300a75f-c56a-4be9-80d1-e47653028ceb",
        ];
        for kind in KINDS {
            let schema = serde_json::json!({"type": "string", "pattern": kind.pattern()});
            let validator = jsonschema::validator_for(&schema).unwrap();
            for value in samples.iter().chain(HOSTILE.iter()) {
                assert_eq!(
                    validator.is_valid(&serde_json::json!(value)),
                    kind.matches(value),
                    "{kind:?} {value:?}"
                );
            }
        }
    }

    #[test]
    fn paths_are_built_from_checked_segments() {
        let base = url::Url::parse("http://127.0.0.1:4000/feishu/").unwrap();
        let path = ApiPath::new("calendar/v4/calendars")
            .id(
                IdKind::Calendar,
                "calendar_id",
                "feishu.cn_x@group.calendar.feishu.cn",
            )
            .unwrap()
            .then("events")
            .id(IdKind::Event, "event_id", "abc-def_0")
            .unwrap();
        assert_eq!(
            path.url(&base).as_str(),
            "http://127.0.0.1:4000/feishu/open-apis/calendar/v4/calendars/feishu.cn_x@group.calendar.feishu.cn/events/abc-def_0"
        );
        let err = ApiPath::new("calendar/v4/calendars")
            .id(IdKind::Event, "event_id", "../../../../../task/v2/tasks/G")
            .unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("event_id: \"../../"), "{message}");
        assert!(message.contains("is not a Feishu event id"), "{message}");
    }

    #[test]
    fn a_long_hostile_value_is_cut_in_the_message() {
        let long = "/".repeat(10_000);
        let message = IdKind::Chat
            .check("chat_id", &long)
            .unwrap_err()
            .to_string();
        assert!(message.len() < 400, "{}", message.len());
    }
}
