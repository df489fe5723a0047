//! [`EngineStore`] over the [`Store`]: the engine's invocations, calls, rules, dispatch journal and
//! audit trail in the same database as the sessions, so one transaction covers a whole step.
//!
//! Each record is stored whole as JSON beside copies of the fields it is looked up by (see
//! migration 2). Reads parse the JSON with [`agent::json::from_str`], so a damaged row is reported
//! with its table, key and field instead of failing somewhere later.

use agent::DataError;
use agent::persist::{
    AuditEntry, AuditFilter, CallFilter, CallRecord, CallStatus, Commit, EngineStore,
    InvocationRecord, InvocationStatus, JournalEntry, JournalOp, PersistError, Rule,
    SessionSnapshot,
};
use agent::{StateMap, ToolOutcome};
use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params, params_from_iter};

use crate::{Store, StoreError, serialize_events};

impl From<StoreError> for PersistError {
    fn from(err: StoreError) -> PersistError {
        match err {
            StoreError::SessionNotFound(_) => PersistError::NotFound(err.to_string()),
            StoreError::StaleSequence { .. } => PersistError::Conflict(err.to_string()),
            // Boxed whole rather than flattened to a string: the message names the database file
            // and the engine can still downcast to see what went wrong.
            other => PersistError::Other(Box::new(other)),
        }
    }
}

/// A record serialised before the transaction starts, so the write lock is held only for SQL.
struct Encoded<'a, T> {
    record: &'a T,
    data: String,
}

fn encode<'a, T>(
    records: &'a [T],
    what: &'static str,
    key: impl Fn(&T) -> String,
    to_json: impl Fn(&T) -> serde_json::Result<String>,
) -> Result<Vec<Encoded<'a, T>>, StoreError> {
    records
        .iter()
        .map(|record| {
            let data = to_json(record).map_err(|source| StoreError::SerializeRecord {
                what,
                key: key(record),
                source,
            })?;
            Ok(Encoded { record, data })
        })
        .collect()
}

/// The text a status is stored and filtered as: its serde name, so the column and the JSON agree.
fn call_status_text(status: CallStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(text)) => text,
        // Unit variants always serialise as strings; this arm only keeps the function total.
        _ => format!("{status:?}"),
    }
}

fn invocation_status_text(status: InvocationStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(text)) => text,
        _ => format!("{status:?}"),
    }
}

fn to_sql_int(value: u64, what: &str) -> Result<i64, PersistError> {
    i64::try_from(value)
        .map_err(|_| PersistError::Other(format!("{what} {value} is out of range").into()))
}

/// Whether SQLite refused a row because the session it names does not exist.
fn is_foreign_key_violation(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(e, _)
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY
    )
}

impl Store {
    fn persist_err(&self, err: rusqlite::Error) -> PersistError {
        self.db_err(err).into()
    }

    /// A row's insert failed: a missing session is [`PersistError::NotFound`] naming the row.
    fn row_err(&self, err: rusqlite::Error, what: &str, key: &str, session: &str) -> PersistError {
        if is_foreign_key_violation(&err) {
            PersistError::NotFound(format!("session {session} of {what} {key} does not exist"))
        } else {
            self.persist_err(err)
        }
    }

    /// Reads every row of `sql` as `(key, data)` and parses `data`; a damaged row names itself.
    fn read_rows<T>(
        &self,
        sql: &str,
        args: &[SqlValue],
        table: &'static str,
        parse: impl Fn(&str) -> Result<T, DataError>,
    ) -> Result<Vec<T>, PersistError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.persist_err(e))?;
        let mut rows = stmt
            .query(params_from_iter(args))
            .map_err(|e| self.persist_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.persist_err(e))? {
            let key: String = row.get(0).map_err(|e| self.persist_err(e))?;
            let data = row.get_ref(1).map_err(|e| self.persist_err(e))?;
            let text = data
                .as_str()
                .map_err(|e| self.persist_err(rusqlite::Error::from(e)))?;
            let record = parse(text).map_err(|source| StoreError::CorruptRecord {
                path: self.path.clone(),
                table,
                key,
                source: Box::new(source),
            })?;
            out.push(record);
        }
        Ok(out)
    }

    fn read_one<T>(
        &self,
        sql: &str,
        key: &str,
        table: &'static str,
        parse: impl Fn(&str) -> Result<T, DataError>,
    ) -> Result<Option<T>, PersistError> {
        Ok(self
            .read_rows(sql, &[SqlValue::Text(key.to_owned())], table, parse)?
            .pop())
    }

    fn upsert_invocation(
        &self,
        tx: &Transaction<'_>,
        inv: &Encoded<'_, InvocationRecord>,
    ) -> Result<(), PersistError> {
        let r = inv.record;
        tx.prepare_cached(
            "INSERT INTO invocations (id, session_id, status, started_at, data)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id,
                 status = excluded.status, started_at = excluded.started_at, data = excluded.data",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                r.id,
                r.session_id,
                invocation_status_text(r.status),
                r.started_at,
                inv.data
            ])
        })
        .map_err(|e| self.row_err(e, "invocation", &r.id, &r.session_id))?;
        Ok(())
    }

    /// Inserts a new call (version 1) or replaces the stored one only if it is still at
    /// `version - 1`: the compare and the write are one statement, so nothing can slip between.
    fn upsert_call(
        &self,
        tx: &Transaction<'_>,
        call: &Encoded<'_, CallRecord>,
    ) -> Result<(), PersistError> {
        let r = call.record;
        let version = to_sql_int(r.version, "call version")?;
        let status = call_status_text(r.status);
        let row_err = |e| self.row_err(e, "call", &r.call_id, &r.session_id);
        let written = match r.version {
            0 => {
                return Err(PersistError::Conflict(format!(
                    "call {} carries version 0; a new call is version 1",
                    r.call_id
                )));
            }
            1 => tx
                .prepare_cached(
                    "INSERT INTO tool_calls
                         (call_id, session_id, invocation_id, status, version, created_at, data)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (call_id) DO NOTHING",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        r.call_id,
                        r.session_id,
                        r.invocation_id,
                        status,
                        version,
                        r.created_at,
                        call.data
                    ])
                })
                .map_err(row_err)?,
            _ => tx
                .prepare_cached(UPDATE_CALL)
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        r.call_id,
                        r.session_id,
                        r.invocation_id,
                        status,
                        version,
                        r.created_at,
                        call.data
                    ])
                })
                .map_err(row_err)?,
        };
        if written == 1 {
            return Ok(());
        }
        // Only on the failure path: say what the stored version is, so the log explains the race.
        let stored: Option<i64> = tx
            .prepare_cached("SELECT version FROM tool_calls WHERE call_id = ?1")
            .and_then(|mut stmt| stmt.query_row([&r.call_id], |row| row.get(0)).optional())
            .map_err(|e| self.persist_err(e))?;
        Err(PersistError::Conflict(match stored {
            Some(stored) => format!(
                "call {} is at version {stored}; the commit carried version {} (expected {})",
                r.call_id,
                r.version,
                stored + 1
            ),
            None => format!(
                "call {} does not exist; the commit carried version {} (a new call is version 1)",
                r.call_id, r.version
            ),
        }))
    }

    fn upsert_rule(
        &self,
        tx: &Transaction<'_>,
        rule: &Encoded<'_, Rule>,
    ) -> Result<(), PersistError> {
        let r = rule.record;
        tx.prepare_cached(
            "INSERT INTO rules (id, tool, created_at, data) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET tool = excluded.tool,
                 created_at = excluded.created_at, data = excluded.data",
        )
        .and_then(|mut stmt| stmt.execute(params![r.id, r.tool, r.created_at, rule.data]))
        .map_err(|e| self.persist_err(e))?;
        Ok(())
    }

    fn start_dispatch(
        &self,
        tx: &Transaction<'_>,
        entry: &JournalEntry,
        data: &str,
    ) -> Result<(), PersistError> {
        let inserted = tx
            .prepare_cached(
                "INSERT INTO dispatch_journal
                     (call_id, attempt, session_id, started_at, finished_at, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (call_id, attempt) DO NOTHING",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    entry.call_id,
                    entry.attempt,
                    entry.session_id,
                    entry.started_at,
                    entry.finished_at,
                    data
                ])
            })
            .map_err(|e| self.row_err(e, "dispatch of call", &entry.call_id, &entry.session_id))?;
        if inserted == 0 {
            return Err(PersistError::Conflict(format!(
                "dispatch attempt {} of call {} is already in the journal",
                entry.attempt, entry.call_id
            )));
        }
        Ok(())
    }

    fn finish_dispatch(
        &self,
        tx: &Transaction<'_>,
        call_id: &str,
        attempt: u32,
        finished_at: i64,
        outcome: Option<ToolOutcome>,
    ) -> Result<(), PersistError> {
        let updated = tx
            .prepare_cached(FINISH_DISPATCH)
            .and_then(|mut stmt| {
                stmt.execute(params![
                    call_id,
                    attempt,
                    finished_at,
                    outcome.map(ToolOutcome::as_str)
                ])
            })
            .map_err(|e| self.persist_err(e))?;
        if updated == 1 {
            return Ok(());
        }
        let finished: Option<Option<i64>> = tx
            .prepare_cached(
                "SELECT finished_at FROM dispatch_journal WHERE call_id = ?1 AND attempt = ?2",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![call_id, attempt], |row| row.get(0))
                    .optional()
            })
            .map_err(|e| self.persist_err(e))?;
        Err(PersistError::Conflict(match finished {
            Some(Some(at)) => {
                format!("dispatch attempt {attempt} of call {call_id} already finished at {at}")
            }
            _ => format!("dispatch attempt {attempt} of call {call_id} was never started"),
        }))
    }

    fn append_audit(
        &self,
        tx: &Transaction<'_>,
        entry: &Encoded<'_, AuditEntry>,
    ) -> Result<(), PersistError> {
        let r = entry.record;
        tx.prepare_cached(
            "INSERT INTO audit_log (at, session_id, call_id, tool, kind, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                r.at,
                r.session_id,
                r.call_id,
                r.tool,
                r.kind,
                entry.data
            ])
        })
        .map_err(|e| self.persist_err(e))?;
        Ok(())
    }
}

// The statements with a WHERE clause on hot paths, named so the test below can check their plans.

/// Replaces a call only if it is still at the version before the new one.
const UPDATE_CALL: &str = "UPDATE tool_calls SET session_id = ?2, invocation_id = ?3, status = ?4,
        version = ?5, created_at = ?6, data = ?7
    WHERE call_id = ?1 AND version = ?5 - 1";
/// json_set edits the stored record in place: no read, parse and rewrite of the row.
const FINISH_DISPATCH: &str = "UPDATE dispatch_journal SET finished_at = ?3,
        data = json_set(data, '$.finished_at', ?3, '$.outcome', ?4)
    WHERE call_id = ?1 AND attempt = ?2 AND finished_at IS NULL";
const INVOCATION_BY_ID: &str = "SELECT id, data FROM invocations WHERE id = ?1";
const CALL_BY_ID: &str = "SELECT call_id, data FROM tool_calls WHERE call_id = ?1";
const UNFINISHED_DISPATCHES: &str = "SELECT call_id || '/' || attempt, data FROM dispatch_journal
    WHERE finished_at IS NULL ORDER BY started_at, call_id, attempt";
const DISPATCHES_OF_CALL: &str = "SELECT call_id || '/' || attempt, data FROM dispatch_journal
    WHERE call_id = ?1 ORDER BY attempt";

/// `(?n, ?n+1, …)` for `count` values, numbered after the `args` already bound.
fn placeholders(args: &[SqlValue], count: usize) -> String {
    let first = args.len() + 1;
    let list: Vec<String> = (first..first + count).map(|i| format!("?{i}")).collect();
    format!("({})", list.join(", "))
}

fn invocations_query(statuses: &[InvocationStatus]) -> (String, Vec<SqlValue>) {
    let args: Vec<SqlValue> = statuses
        .iter()
        .map(|s| SqlValue::Text(invocation_status_text(*s)))
        .collect();
    let sql = format!(
        "SELECT id, data FROM invocations WHERE status IN {} ORDER BY started_at, id",
        placeholders(&[], args.len())
    );
    (sql, args)
}

/// The SQL of [`EngineStore::calls`]: only the filters given, so each variant can use its index.
fn calls_query(filter: &CallFilter) -> (String, Vec<SqlValue>) {
    let mut sql = String::from("SELECT call_id, data FROM tool_calls WHERE 1");
    let mut args = Vec::new();
    if let Some(session_id) = &filter.session_id {
        args.push(SqlValue::Text(session_id.clone()));
        sql.push_str(&format!(" AND session_id = ?{}", args.len()));
    }
    if let Some(invocation_id) = &filter.invocation_id {
        args.push(SqlValue::Text(invocation_id.clone()));
        sql.push_str(&format!(" AND invocation_id = ?{}", args.len()));
    }
    if !filter.statuses.is_empty() {
        sql.push_str(" AND status IN ");
        sql.push_str(&placeholders(&args, filter.statuses.len()));
        args.extend(
            filter
                .statuses
                .iter()
                .map(|s| SqlValue::Text(call_status_text(*s))),
        );
    }
    // rowid breaks ties in insertion order: parallel calls share a millisecond, and the inbox
    // must list them in the order the model made them.
    sql.push_str(" ORDER BY created_at, rowid");
    (sql, args)
}

/// The SQL of [`EngineStore::audit`]: only the filters given, so each variant can use its index.
fn audit_query(filter: &AuditFilter) -> (String, Vec<SqlValue>) {
    // The id comes back as text: it is the key a damaged row is reported by.
    let mut sql = String::from("SELECT CAST(id AS TEXT), data FROM audit_log WHERE 1");
    let mut args = Vec::new();
    if let Some(session_id) = &filter.session_id {
        args.push(SqlValue::Text(session_id.clone()));
        sql.push_str(&format!(" AND session_id = ?{}", args.len()));
    }
    if let Some(tool) = &filter.tool {
        args.push(SqlValue::Text(tool.clone()));
        sql.push_str(&format!(" AND tool = ?{}", args.len()));
    }
    if let Some(prefix) = &filter.kind_prefix {
        // substr rather than LIKE: a prefix is matched exactly, case and `%`/`_` included.
        args.push(SqlValue::Text(prefix.clone()));
        let n = args.len();
        sql.push_str(&format!(" AND substr(kind, 1, length(?{n})) = ?{n}"));
    }
    if let Some(since) = filter.since {
        args.push(SqlValue::Integer(since));
        sql.push_str(&format!(" AND at >= ?{}", args.len()));
    }
    sql.push_str(" ORDER BY at DESC, id DESC");
    if let Some(limit) = filter.limit {
        args.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
    }
    (sql, args)
}

impl EngineStore for Store {
    fn create_session(
        &self,
        app_name: &str,
        user_id: &str,
        session_id: Option<&str>,
        state: &StateMap,
    ) -> Result<String, PersistError> {
        Ok(Store::create_session(self, app_name, user_id, session_id, state)?.id)
    }

    fn load_session(&self, session_id: &str) -> Result<SessionSnapshot, PersistError> {
        let session = Store::load_session(self, session_id)?;
        Ok(SessionSnapshot {
            id: session.meta.id,
            app_name: session.meta.app_name,
            user_id: session.meta.user_id,
            events: session.events,
            state: session.state,
            last_seq: session.meta.last_seq,
        })
    }

    fn commit(&self, commit: &Commit) -> Result<u64, PersistError> {
        let events = serialize_events(&commit.events)?;
        let invocations = encode(
            &commit.invocations,
            "invocation",
            |r| r.id.clone(),
            serde_json::to_string,
        )?;
        let calls = encode(
            &commit.calls,
            "call",
            |r| r.call_id.clone(),
            serde_json::to_string,
        )?;
        let rules = encode(
            &commit.rules,
            "rule",
            |r| r.id.clone(),
            serde_json::to_string,
        )?;
        let journal = encode(
            &commit.journal,
            "dispatch of call",
            |op| match op {
                JournalOp::Start(entry) => entry.call_id.clone(),
                JournalOp::Finish { call_id, .. } => call_id.clone(),
            },
            |op| match op {
                JournalOp::Start(entry) => serde_json::to_string(entry),
                // A finish edits the stored row; it has nothing of its own to serialise.
                JournalOp::Finish { .. } => Ok(String::new()),
            },
        )?;
        let audit = encode(
            &commit.audit,
            "audit entry",
            |r| r.kind.clone(),
            serde_json::to_string,
        )?;

        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.persist_err(e))?;
        let last_seq = if !commit.events.is_empty() {
            self.append_in(
                &tx,
                &commit.session_id,
                commit.expected_seq,
                &commit.events,
                &events,
            )?
        } else if !commit.session_id.is_empty() {
            self.last_seq_in(&tx, &commit.session_id)?
        } else {
            0
        };
        for inv in &invocations {
            self.upsert_invocation(&tx, inv)?;
        }
        for call in &calls {
            self.upsert_call(&tx, call)?;
        }
        for rule in &rules {
            self.upsert_rule(&tx, rule)?;
        }
        for op in &journal {
            match op.record {
                JournalOp::Start(entry) => self.start_dispatch(&tx, entry, &op.data)?,
                JournalOp::Finish {
                    call_id,
                    attempt,
                    finished_at,
                    outcome,
                } => self.finish_dispatch(&tx, call_id, *attempt, *finished_at, *outcome)?,
            }
        }
        for entry in &audit {
            self.append_audit(&tx, entry)?;
        }
        tx.commit().map_err(|e| self.persist_err(e))?;
        Ok(last_seq)
    }

    fn invocation(&self, invocation_id: &str) -> Result<Option<InvocationRecord>, PersistError> {
        self.read_one(
            INVOCATION_BY_ID,
            invocation_id,
            "invocations",
            agent::json::from_str,
        )
    }

    fn invocations_with_status(
        &self,
        statuses: &[InvocationStatus],
    ) -> Result<Vec<InvocationRecord>, PersistError> {
        if statuses.is_empty() {
            return Ok(Vec::new());
        }
        let (sql, args) = invocations_query(statuses);
        self.read_rows(&sql, &args, "invocations", agent::json::from_str)
    }

    fn call(&self, call_id: &str) -> Result<Option<CallRecord>, PersistError> {
        self.read_one(CALL_BY_ID, call_id, "tool_calls", agent::json::from_str)
    }

    fn calls(&self, filter: &CallFilter) -> Result<Vec<CallRecord>, PersistError> {
        let (sql, args) = calls_query(filter);
        self.read_rows(&sql, &args, "tool_calls", agent::json::from_str)
    }

    fn rules(&self) -> Result<Vec<Rule>, PersistError> {
        self.read_rows(
            "SELECT id, data FROM rules ORDER BY created_at, id",
            &[],
            "rules",
            agent::json::from_str,
        )
    }

    fn unfinished_dispatches(&self) -> Result<Vec<JournalEntry>, PersistError> {
        self.read_rows(
            UNFINISHED_DISPATCHES,
            &[],
            "dispatch_journal",
            agent::json::from_str,
        )
    }

    fn dispatches(&self, call_id: &str) -> Result<Vec<JournalEntry>, PersistError> {
        self.read_rows(
            DISPATCHES_OF_CALL,
            &[SqlValue::Text(call_id.to_owned())],
            "dispatch_journal",
            agent::json::from_str,
        )
    }

    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, PersistError> {
        let (sql, args) = audit_query(filter);
        self.read_rows(&sql, &args, "audit_log", agent::json::from_str)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// SQLite's plan for `sql`, one line per step.
    fn plan(store: &Store, sql: &str, args: &[SqlValue]) -> Vec<String> {
        let conn = store.conn();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map(params_from_iter(args), |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Every query the engine runs per step or per resume reaches its rows through an index.
    #[test]
    fn hot_queries_never_scan_a_table() {
        let store = Store::open_in_memory().unwrap();
        let text = |s: &str| SqlValue::Text(s.to_owned());
        let mut queries: Vec<(String, Vec<SqlValue>)> = vec![
            (
                UPDATE_CALL.to_owned(),
                (1..=7).map(SqlValue::Integer).collect(),
            ),
            (
                FINISH_DISPATCH.to_owned(),
                vec![
                    text("c"),
                    SqlValue::Integer(1),
                    SqlValue::Integer(2),
                    text("x"),
                ],
            ),
            (INVOCATION_BY_ID.to_owned(), vec![text("i")]),
            (CALL_BY_ID.to_owned(), vec![text("c")]),
            (UNFINISHED_DISPATCHES.to_owned(), vec![]),
            (DISPATCHES_OF_CALL.to_owned(), vec![text("c")]),
            invocations_query(&[InvocationStatus::Running, InvocationStatus::Suspended]),
            calls_query(&CallFilter {
                statuses: vec![CallStatus::AwaitingApproval, CallStatus::AwaitingAuth],
                ..CallFilter::default()
            }),
            calls_query(&CallFilter {
                invocation_id: Some("i".into()),
                ..CallFilter::default()
            }),
            calls_query(&CallFilter {
                session_id: Some("s".into()),
                statuses: vec![CallStatus::AwaitingApproval],
                ..CallFilter::default()
            }),
        ];
        for filter in [
            AuditFilter::default(),
            AuditFilter {
                session_id: Some("s".into()),
                ..AuditFilter::default()
            },
            AuditFilter {
                tool: Some("t".into()),
                limit: Some(10),
                ..AuditFilter::default()
            },
            AuditFilter {
                since: Some(1),
                kind_prefix: Some("approval.".into()),
                ..AuditFilter::default()
            },
        ] {
            queries.push(audit_query(&filter));
        }
        for (sql, args) in &queries {
            let steps = plan(&store, sql, args);
            assert!(
                steps
                    .iter()
                    .all(|step| !step.starts_with("SCAN") || step.contains("INDEX")),
                "{sql}\n{steps:#?}"
            );
        }
    }
}
