//! Startup timings for the first-paint budget (design §5): logged once each, in milliseconds
//! since the process started, for `scripts/measure-startup.sh` to read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When `main` began, and which milestones were logged.
#[derive(Debug)]
pub(crate) struct Timing {
    started: Instant,
    page_loaded: AtomicBool,
    ui_ready: AtomicBool,
}

impl Timing {
    pub(crate) fn new(started: Instant) -> Timing {
        Timing {
            started,
            page_loaded: AtomicBool::new(false),
            ui_ready: AtomicBool::new(false),
        }
    }

    /// Time since the process started: the kernel's start time where it is known (it includes
    /// loading the WebKit libraries, which happens before `main`), else since `main`.
    pub(crate) fn elapsed(&self) -> Duration {
        process_age().unwrap_or_else(|| self.started.elapsed())
    }

    /// The main window's page finished loading (its first paint follows within a frame).
    pub(crate) fn page_loaded(&self) {
        if !self.page_loaded.swap(true, Ordering::SeqCst) {
            log::info!(
                "first paint: main window page loaded {} ms after process start ({} ms after main; unix_ms={})",
                self.elapsed().as_millis(),
                self.started.elapsed().as_millis(),
                unix_ms()
            );
        }
    }

    /// The UI reported its first painted frame; returns the milliseconds since process start.
    pub(crate) fn ui_ready(&self) -> u64 {
        let ms = u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX);
        if !self.ui_ready.swap(true, Ordering::SeqCst) {
            log::info!(
                "ui ready: first frame painted {ms} ms after process start (unix_ms={})",
                unix_ms()
            );
        }
        ms
    }
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// How long ago the kernel started this process (10 ms resolution): `/proc/uptime` minus the
/// start time in `/proc/self/stat`, in clock ticks of 1/100 s (the value on every Linux
/// architecture Tauri runs on).
#[cfg(target_os = "linux")]
fn process_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    age_from_proc(&stat, &uptime)
}

#[cfg(not(target_os = "linux"))]
fn process_age() -> Option<Duration> {
    None
}

/// Parses the two `/proc` files. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from the last `)`: the start time is field 22, the 20th after it.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn age_from_proc(stat: &str, uptime: &str) -> Option<Duration> {
    const TICKS_PER_SECOND: f64 = 100.0;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_ticks: f64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let up: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let age = up - start_ticks / TICKS_PER_SECOND;
    (age >= 0.0).then(|| Duration::from_secs_f64(age))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_spaces() {
        // Fields 3..=21 are placeholders; field 22 (start time) is 12345 ticks = 123.45 s.
        let rest: Vec<String> = (3..=21).map(|i| i.to_string()).collect();
        let stat = format!("4242 (web (kit) x) {} 12345 99 98", rest.join(" "));
        let age = age_from_proc(&stat, "124.00 500.00").map(|d| d.as_millis());
        assert_eq!(age, Some(550));
        assert_eq!(age_from_proc(&stat, "100.00 1.00"), None);
        assert_eq!(age_from_proc("garbage", "1.0 1.0"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_an_age() {
        let age = process_age();
        assert!(
            age.is_some_and(|a| a < Duration::from_secs(3600)),
            "{age:?}"
        );
    }
}
