//! The facade of the audit page: the rules and the trail.

use std::path::{Path, PathBuf};

use agent::persist::{AuditEntry, AuditFilter};

use super::Companion;
use crate::error::CompanionError;
use crate::view::audit::{AuditQuery, AuditView, ExportFormat, RuleView};

impl Companion {
    /// The always/never rules, newest first, revoked ones included.
    pub fn rules(&self) -> Result<Vec<RuleView>, CompanionError> {
        crate::audit::rules(&self.ctx)
    }

    /// Revokes a rule.
    pub fn revoke_rule(&self, rule_id: &str) -> Result<RuleView, CompanionError> {
        Ok(self.engine().revoke_rule(rule_id)?.into())
    }

    /// The audit trail, newest first, as the engine keeps it.
    pub fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, CompanionError> {
        Ok(self.engine().audit_trail(filter)?)
    }

    /// The audit trail, newest first, as the page shows it.
    pub fn audit_views(&self, query: &AuditQuery) -> Result<Vec<AuditView>, CompanionError> {
        crate::audit::views(&self.ctx, query)
    }

    /// Writes the audit trail (as filtered) to a new file in `dir` and returns its path.
    pub fn export_audit(
        &self,
        query: &AuditQuery,
        format: ExportFormat,
        dir: &Path,
    ) -> Result<PathBuf, CompanionError> {
        crate::audit::export(&self.ctx, query, format, dir)
    }
}
