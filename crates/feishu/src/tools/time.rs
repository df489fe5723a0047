//! Times as the model writes them and as the user reads them.
//!
//! The model may give an RFC 3339 instant (`2026-12-01T14:00:00+08:00`), a local date-time
//! without offset (`2026-12-01 14:00`, read in the user's time zone) or a date (the start of that
//! day). Feishu wants Unix seconds as strings; people want local wall-clock time.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};

use crate::api::ApiError;

/// Reads a time the model wrote.
pub(crate) fn parse_instant(text: &str, tz: &TimeZone) -> Result<Timestamp, ApiError> {
    let text = text.trim();
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts);
    }
    if let Ok(zoned) = text.parse::<ZonedDateTime>() {
        return Ok(zoned.timestamp());
    }
    let civil = text
        .parse::<DateTime>()
        .or_else(|_| text.replacen(' ', "T", 1).parse::<DateTime>())
        .or_else(|_| {
            text.parse::<Date>()
                .map(|d| d.to_datetime(jiff::civil::Time::midnight()))
        });
    let civil = civil.map_err(|_| {
        ApiError::Malformed(format!(
            "cannot read the time {text:?}: give an ISO 8601 time such as 2026-12-01T14:00:00+08:00"
        ))
    })?;
    tz.to_ambiguous_zoned_datetime(civil)
        .compatible()
        .map(|z| z.timestamp())
        .map_err(|e| {
            ApiError::Malformed(format!(
                "the time {text:?} does not exist in this time zone: {e}"
            ))
        })
}

/// Unix seconds as Feishu wants them.
pub(crate) fn feishu_seconds(ts: Timestamp) -> String {
    ts.as_second().to_string()
}

/// Feishu's Unix seconds (a string or number) read back.
pub(crate) fn from_feishu_seconds(value: &serde_json::Value) -> Option<Timestamp> {
    let secs = match value {
        serde_json::Value::String(s) => s.parse::<i64>().ok()?,
        serde_json::Value::Number(n) => n.as_i64()?,
        _ => return None,
    };
    Timestamp::from_second(secs).ok()
}

/// `2026-12-01 14:00` in the user's time zone.
pub(crate) fn local(ts: Timestamp, tz: &TimeZone) -> String {
    ts.to_zoned_datetime(tz.clone())
        .strftime("%Y-%m-%d %H:%M")
        .to_string()
}

/// `2026-12-01 14:00–15:00 (Asia/Shanghai)`, or both dates when the span crosses midnight.
pub(crate) fn span(start: Timestamp, end: Timestamp, tz: &TimeZone) -> String {
    let (a, b) = (
        start.to_zoned_datetime(tz.clone()),
        end.to_zoned_datetime(tz.clone()),
    );
    let zone = tz.iana_name().unwrap_or("local");
    if a.date() == b.date() {
        format!(
            "{}–{} ({zone})",
            a.strftime("%Y-%m-%d %H:%M"),
            b.strftime("%H:%M")
        )
    } else {
        format!(
            "{} – {} ({zone})",
            a.strftime("%Y-%m-%d %H:%M"),
            b.strftime("%Y-%m-%d %H:%M")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shanghai() -> TimeZone {
        TimeZone::get("Asia/Shanghai").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_form_the_model_writes_is_read() {
        let tz = shanghai();
        let expected = "2026-12-01T06:00:00Z"
            .parse::<Timestamp>()
            .unwrap_or_else(|e| panic!("{e}"));
        for text in [
            "2026-12-01T14:00:00+08:00",
            "2026-12-01T06:00:00Z",
            "2026-12-01 14:00",
            "2026-12-01T14:00",
        ] {
            assert_eq!(
                parse_instant(text, &tz).unwrap_or_else(|e| panic!("{text}: {e}")),
                expected,
                "{text}"
            );
        }
        let day = parse_instant("2026-12-01", &tz).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(local(day, &tz), "2026-12-01 00:00");
        assert!(parse_instant("tomorrow at two", &tz).is_err());
    }

    #[test]
    fn spans_read_naturally_in_the_users_zone() {
        let tz = shanghai();
        let a = parse_instant("2026-12-01 14:00", &tz).unwrap_or_else(|e| panic!("{e}"));
        let b = parse_instant("2026-12-01 15:30", &tz).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(span(a, b, &tz), "2026-12-01 14:00–15:30 (Asia/Shanghai)");
        assert_eq!(feishu_seconds(a), a.as_second().to_string());
        assert_eq!(
            from_feishu_seconds(&serde_json::json!(feishu_seconds(a))),
            Some(a)
        );
    }
}
