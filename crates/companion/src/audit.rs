//! The audit page as the UI reads it: the rules (newest first, revoked ones included), the
//! trail as filtered, and the trail written to a file (JSON or CSV) the user can keep.

use std::path::{Path, PathBuf};

use crate::context::Context;
use crate::error::CompanionError;
use crate::view::audit::{AuditQuery, AuditView, ExportFormat, RuleView};

/// The rules, newest first, revoked ones included.
pub(crate) fn rules(ctx: &Context) -> Result<Vec<RuleView>, CompanionError> {
    let mut rules: Vec<RuleView> = ctx
        .engine()
        .rules()?
        .into_iter()
        .map(RuleView::from)
        .collect();
    rules.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    Ok(rules)
}

/// The audit trail, newest first.
pub(crate) fn views(ctx: &Context, query: &AuditQuery) -> Result<Vec<AuditView>, CompanionError> {
    Ok(ctx
        .engine()
        .audit_trail(&query.into())?
        .into_iter()
        .map(AuditView::from)
        .collect())
}

/// Writes the audit trail (as filtered, every entry) to a new file in `dir`; answers its path.
pub(crate) fn export(
    ctx: &Context,
    query: &AuditQuery,
    format: ExportFormat,
    dir: &Path,
) -> Result<PathBuf, CompanionError> {
    let entries = views(
        ctx,
        &AuditQuery {
            limit: None,
            ..query.clone()
        },
    )?;
    let (text, ext) = match format {
        ExportFormat::Json => (
            serde_json::to_string_pretty(&entries)
                .map_err(|e| CompanionError::Other(e.to_string()))?,
            "json",
        ),
        ExportFormat::Csv => (crate::view::audit::audit_csv(&entries), "csv"),
    };
    let stamp = jiff::ZonedDateTime::now()
        .strftime("%Y%m%d-%H%M%S")
        .to_string();
    let path = dir.join(format!("feishu-companion-audit-{stamp}.{ext}"));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|e| CompanionError::Other(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}
