//! The session's part in pg_stat_statements (see `statement_stats`): each statement marks
//! where it starts, and the protocol layer says when it has completed, after its last row or
//! its command tag went out, so a query's time includes streaming its rows, as PostgreSQL's
//! does. A statement that fails is never completed and so not counted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::Session;
use crate::statement_stats::{normalize, NormalizedStatement, Pending};

/// Statement texts this session normalized lately, so a prepared statement or a repeated text
/// is tokenized once, not at every execution. Cleared when full: texts with their constants
/// inline (simple protocol) differ at each execution and would otherwise pile up.
#[derive(Default)]
pub(crate) struct NormalizedTexts(HashMap<String, Arc<NormalizedStatement>>);

const NORMALIZED_TEXTS_MAX: usize = 256;

impl NormalizedTexts {
    fn get(&mut self, text: &str) -> Arc<NormalizedStatement> {
        if let Some(n) = self.0.get(text) {
            return n.clone();
        }
        if self.0.len() >= NORMALIZED_TEXTS_MAX {
            self.0.clear();
        }
        let n = Arc::new(normalize(text));
        self.0.insert(text.to_string(), n.clone());
        n
    }
}

impl Session {
    /// A statement whose text `text` gives starts. Without pg_stat_statements this costs one
    /// atomic load (and `text` is not called).
    pub(super) fn track_statement(&mut self, text: impl FnOnce() -> String) {
        self.pending_statement = None;
        if !self.engine.catalog.tracks_statements() {
            return;
        }
        if self.settings.get("pg_stat_statements.track") == Some("none") {
            return;
        }
        self.pending_statement = Some(Pending {
            started: Instant::now(),
            text: text(),
        });
    }

    /// Whether the running statement will be counted when it completes.
    pub fn is_tracking_statement(&self) -> bool {
        self.pending_statement.is_some()
    }

    /// The statement last started completed with command tag `tag` and `rows` rows: it is
    /// counted. Nothing happens when no statement is being tracked.
    pub fn statement_completed(&mut self, tag: &str, rows: u64) {
        let Some(pending) = self.pending_statement.take() else {
            return;
        };
        let elapsed = pending.started.elapsed();
        let normalized = self.normalized_texts.get(&pending.text);
        let track_utility = self.settings.get("pg_stat_statements.track_utility");
        let utility_off = matches!(track_utility, Some("off" | "false" | "no" | "0"));
        if !normalized.counted() || (normalized.utility && utility_off) {
            return;
        }
        let Ok((role, _)) = crate::privileges::acting_role_oid(self) else {
            return;
        };
        self.engine
            .statement_stats
            .record(role, &normalized, elapsed, tag, rows);
    }
}
