//! Reports of what user code did wrong (or printed) while the agent ran, for the app's settings
//! page: a failing callback is skipped, a failing tool answers `FAILED`, and in both cases the
//! user should see the traceback, so each becomes a [`Report`] handed to the app's [`Reporter`].

use std::fmt;
use std::sync::Arc;

use crate::error::SandboxError;

/// One thing worth showing the user about their code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The file.
    pub file: String,
    /// The tool or callback, such as `tool check_order_status` or `before_model_callback`.
    pub function: String,
    /// What went wrong (the traceback for an exception); `None` when the call worked and this
    /// only carries its output.
    pub error: Option<String>,
    /// The line of the file where it went wrong, when known.
    pub line: Option<u32>,
    /// What the code printed to stdout.
    pub stdout: String,
    /// What it printed to stderr.
    pub stderr: String,
}

impl Report {
    pub(crate) fn failure(file: &str, function: &str, error: &SandboxError) -> Report {
        Report {
            file: file.to_owned(),
            function: function.to_owned(),
            error: Some(error.detail()),
            line: error.python().and_then(|e| e.line),
            stdout: String::new(),
            stderr: String::new(),
        }
    }
}

/// Where reports go. The default logs them.
#[derive(Clone)]
pub struct Reporter(Arc<dyn Fn(Report) + Send + Sync>);

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reporter(..)")
    }
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter::new(|report| match &report.error {
            Some(error) => tracing::warn!(
                file = %report.file,
                function = %report.function,
                line = report.line,
                "Python code failed:\n{error}"
            ),
            None => tracing::info!(
                file = %report.file,
                function = %report.function,
                stdout = %report.stdout,
                stderr = %report.stderr,
                "Python output"
            ),
        })
    }
}

impl Reporter {
    /// Sends reports to `sink`.
    pub fn new(sink: impl Fn(Report) + Send + Sync + 'static) -> Self {
        Reporter(Arc::new(sink))
    }

    pub(crate) fn report(&self, report: Report) {
        (self.0)(report);
    }
}
