//! Calendar arithmetic for the emulator. The demo tenant lives in `Asia/Shanghai`, which has been
//! UTC+8 without daylight saving since 1991, so a fixed offset is exact and no time-zone database
//! is needed. Days are counted from the Unix epoch in local time ("local days").

/// The tenant's time zone, as Feishu names it in `time_info.timezone`.
pub(crate) const TIME_ZONE: &str = "Asia/Shanghai";
/// `Asia/Shanghai` is UTC+8 all year.
pub(crate) const OFFSET_SECS: i64 = 8 * 3600;
/// Seconds in a day.
pub(crate) const DAY: i64 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day count (inverse of [`days_from_civil`]).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are in range by construction (1..=31 and 1..=12).
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// Day of the week of a day count: 0 = Monday … 6 = Sunday (1970-01-01 was a Thursday).
pub(crate) fn weekday(days: i64) -> u32 {
    // rem_euclid(7) is in 0..7.
    u32::try_from((days + 3).rem_euclid(7)).unwrap_or(0)
}

/// The local day a Unix timestamp (seconds) falls on.
pub(crate) fn local_day(ts: i64) -> i64 {
    (ts + OFFSET_SECS).div_euclid(DAY)
}

/// The Unix timestamp of local midnight starting `day`.
pub(crate) fn local_midnight(day: i64) -> i64 {
    day * DAY - OFFSET_SECS
}

/// `2020-10-28T22:30:00+08:00`: RFC 3339 in the tenant's zone, as free/busy answers.
pub(crate) fn format_rfc3339_local(ts: i64) -> String {
    let local = ts + OFFSET_SECS;
    let (y, m, d) = civil_from_days(local.div_euclid(DAY));
    let secs = local.rem_euclid(DAY);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+08:00",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// `2018-09-01`, the form all-day events use.
pub(crate) fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Parses `YYYY-MM-DD` into a day count.
pub(crate) fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// Parses an RFC 3339 date-time (`2020-10-28T12:00:00+08:00`, `…Z`, optional fraction) into a
/// Unix timestamp in seconds.
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, rest) = text.split_once(['T', 't', ' '])?;
    let days = parse_date(date)?;
    let (clock, offset) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let split = rest.rfind(['+', '-'])?;
        let (clock, zone) = rest.split_at(split);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = zone.get(1..)?.split_once(':')?;
        let hours: i64 = hours.parse().ok()?;
        let minutes: i64 = minutes.parse().ok()?;
        (clock, sign * (hours * 3600 + minutes * 60))
    };
    let clock = clock.split('.').next()?;
    let mut fields = clock.splitn(3, ':');
    let hour: i64 = fields.next()?.parse().ok()?;
    let minute: i64 = fields.next()?.parse().ok()?;
    let second: i64 = fields.next()?.parse().ok()?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days * DAY + hour * 3600 + minute * 60 + second - offset)
}

/// How often a recurring event repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freq {
    Daily,
    Weekly,
    Monthly,
}

/// The subset of an RFC 5545 RRULE the emulator expands: `FREQ` (DAILY, WEEKLY, MONTHLY),
/// `INTERVAL`, `BYDAY` (plain weekdays), `COUNT` and `UNTIL`. Feishu rejects COUNT with UNTIL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    freq: Freq,
    interval: i64,
    by_day: Vec<u32>,
    count: Option<u64>,
    until: Option<i64>,
}

impl Rule {
    /// Parses `FREQ=WEEKLY;INTERVAL=1;BYDAY=MO,WE` (an `RRULE:` prefix is allowed). `None` for
    /// anything outside the supported subset, so callers can refuse it.
    pub(crate) fn parse(text: &str) -> Option<Rule> {
        let text = text.trim();
        let text = text.strip_prefix("RRULE:").unwrap_or(text);
        let mut rule = Rule {
            freq: Freq::Daily,
            interval: 1,
            by_day: Vec::new(),
            count: None,
            until: None,
        };
        let mut freq = None;
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=')?;
            match key.to_ascii_uppercase().as_str() {
                "FREQ" => {
                    freq = Some(match value.to_ascii_uppercase().as_str() {
                        "DAILY" => Freq::Daily,
                        "WEEKLY" => Freq::Weekly,
                        "MONTHLY" => Freq::Monthly,
                        _ => return None,
                    });
                }
                "INTERVAL" => rule.interval = value.parse().ok().filter(|i| *i >= 1)?,
                "BYDAY" => {
                    for day in value.split(',') {
                        let index = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
                            .iter()
                            .position(|d| d.eq_ignore_ascii_case(day))?;
                        rule.by_day.push(u32::try_from(index).ok()?);
                    }
                }
                "COUNT" => rule.count = Some(value.parse().ok()?),
                "UNTIL" => rule.until = Some(parse_until(value)?),
                "WKST" => {}
                _ => return None,
            }
        }
        rule.freq = freq?;
        if rule.count.is_some() && rule.until.is_some() {
            return None;
        }
        Some(rule)
    }

    /// Start times of the occurrences of an event first starting at `dtstart` that overlap
    /// `[from, to)`, given each lasts `duration` seconds; at most `limit` of them.
    pub(crate) fn occurrences(
        &self,
        dtstart: i64,
        duration: i64,
        from: i64,
        to: i64,
        limit: usize,
    ) -> Vec<i64> {
        let first_day = local_day(dtstart);
        let time_of_day = dtstart - local_midnight(first_day);
        let start_weekday = weekday(first_day);
        let (start_year, start_month, start_dom) = civil_from_days(first_day);
        let last_day = local_day(to) + 1;
        let mut found = Vec::new();
        let mut seen: u64 = 0;
        // Walk day by day from the first occurrence: COUNT counts from there, and the ranges
        // the API allows (< 40 days, seeds a few weeks old) keep this short.
        for day in first_day..=last_day {
            let matches = match self.freq {
                Freq::Daily => {
                    (day - first_day) % self.interval == 0
                        && (self.by_day.is_empty() || self.by_day.contains(&weekday(day)))
                }
                Freq::Weekly => {
                    let week =
                        (day - i64::from(weekday(day)) - first_day + i64::from(start_weekday)) / 7;
                    let days = if self.by_day.is_empty() {
                        vec![start_weekday]
                    } else {
                        self.by_day.clone()
                    };
                    week % self.interval == 0 && days.contains(&weekday(day))
                }
                Freq::Monthly => {
                    let (year, month, dom) = civil_from_days(day);
                    let months =
                        (year - start_year) * 12 + i64::from(month) - i64::from(start_month);
                    dom == start_dom && months % self.interval == 0
                }
            };
            if !matches {
                continue;
            }
            let start = local_midnight(day) + time_of_day;
            if self.until.is_some_and(|until| start > until) {
                break;
            }
            seen += 1;
            if self.count.is_some_and(|count| seen > count) {
                break;
            }
            if start >= to {
                break;
            }
            if start + duration > from {
                found.push(start);
                if found.len() >= limit {
                    break;
                }
            }
        }
        found
    }
}

/// `UNTIL=20250101T000000Z` or `UNTIL=20250101`.
fn parse_until(value: &str) -> Option<i64> {
    let date = value.get(0..8)?;
    let days = days_from_civil(
        date.get(0..4)?.parse().ok()?,
        date.get(4..6)?.parse().ok()?,
        date.get(6..8)?.parse().ok()?,
    );
    match value.get(8..) {
        None | Some("") => Some(local_midnight(days) + DAY - 1),
        Some(time) => {
            let time = time.strip_prefix('T')?;
            let utc = time.ends_with('Z');
            let time = time.trim_end_matches('Z');
            let secs = time.get(0..2)?.parse::<i64>().ok()? * 3600
                + time.get(2..4)?.parse::<i64>().ok()? * 60
                + time.get(4..6)?.parse::<i64>().ok()?;
            let offset = if utc { 0 } else { OFFSET_SECS };
            Some(days * DAY + secs - offset)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        assert_eq!(
            weekday(days_from_civil(2024, 9, 2)),
            0,
            "2024-09-02 was a Monday"
        );
        assert_eq!(
            parse_rfc3339("2020-10-28T12:00:00+08:00"),
            Some(1_603_857_600)
        );
        assert_eq!(parse_rfc3339("2020-10-28T04:00:00Z"), Some(1_603_857_600));
        assert_eq!(
            format_rfc3339_local(1_603_857_600),
            "2020-10-28T12:00:00+08:00"
        );
    }

    #[test]
    fn weekly_rule_with_interval_and_count() {
        let monday = local_midnight(days_from_civil(2024, 9, 2)) + 14 * 3600;
        let rule = Rule::parse("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;COUNT=3").unwrap();
        let all = rule.occurrences(monday, 3600, monday, monday + 60 * DAY, 100);
        assert_eq!(all, vec![monday, monday + 2 * DAY, monday + 14 * DAY]);
    }
}
