//! What a stdio server wrote to stderr, kept for the settings page and for the words of a
//! crash: the last lines, bounded in count and length, so a chatty server cannot fill memory.

use std::collections::VecDeque;

/// Lines kept.
const LINES: usize = 200;
/// Characters kept of one line.
const LINE_CHARS: usize = 1000;

/// The last lines a server wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrLog {
    lines: VecDeque<String>,
}

impl StderrLog {
    /// Adds a line, dropping the oldest beyond the bound.
    pub fn push(&mut self, line: &str) {
        let mut line: String = line.chars().take(LINE_CHARS).collect();
        if line.len() < line.capacity() / 2 {
            line.shrink_to_fit();
        }
        if self.lines.len() == LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// Everything kept, one line each.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    /// The last line that says something.
    pub fn last_line(&self) -> Option<String> {
        self.lines
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_each_cut_to_length() {
        let mut log = StderrLog::default();
        for n in 0..LINES + 5 {
            log.push(&format!("line {n}"));
        }
        log.push(&"x".repeat(5000));
        log.push("   ");
        let text = log.text();
        assert!(!text.contains("line 6\n"), "the oldest are gone");
        assert!(text.contains("line 7\n"));
        assert_eq!(text.lines().count(), LINES);
        assert_eq!(log.last_line().map(|l| l.len()), Some(LINE_CHARS));
    }
}
