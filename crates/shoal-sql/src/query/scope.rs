//! What a statement's planning and execution can see beyond the SQL text: the engine, the
//! statement's snapshot, the session's search_path and settings, and (for UPDATE/DELETE) which
//! table's scan must record row handles. One per session, updated before every statement, read
//! by the catalog providers and functions that DataFusion calls back into.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_storage::catalog::{Oid, RelationKind};
use shoal_storage::Snapshot;

use crate::engine::Engine;
use crate::query::provider::RowCapture;
use crate::timezone::{SessionZone, TimeZone};

pub struct PlanScope {
    pub engine: Arc<Engine>,
    pub snapshot: Mutex<Snapshot>,
    pub search_path: Mutex<Vec<String>>,
    /// The tables whose scans record row handles, each with where to record them (DML's
    /// target table; SELECT ... FOR UPDATE's locked tables).
    pub dml_capture: Mutex<Vec<(Oid, RowCapture)>>,
    /// Session settings, for current_setting() and SHOW.
    pub settings: Mutex<HashMap<String, String>>,
    /// set_config() calls of the running statement, (name, value, is_local) in call order,
    /// for the session to apply when the statement succeeds.
    pub set_config_calls: Mutex<Vec<(String, String, bool)>>,
    /// currval() answers from here: the last value nextval returned per sequence in this session.
    pub sequence_last: Mutex<HashMap<Oid, i64>>,
    /// The session time zone, for the functions that show or read local time.
    pub time_zone: SessionZone,
    pub backend_pid: i32,
    /// LISTEN and NOTIFY of this session (NOTIFY and pg_notify() queue here).
    pub notifications: crate::notify::SessionNotifications,
    /// This session's advisory locks.
    pub advisory_locks: crate::advisory::SessionLocks,
    /// SQL-level prepared statements (PREPARE), by name.
    pub prepared_statements: Mutex<std::collections::BTreeMap<String, crate::session::SqlPrepared>>,
    /// The protocol's named prepared statements (Parse with a name, until Close or DEALLOCATE),
    /// by name, for pg_prepared_statements and for Bind, which refuses a name not here; the
    /// connection keeps the statements themselves.
    pub protocol_statements: Mutex<std::collections::BTreeMap<String, crate::session::SqlPrepared>>,
    /// Whether the running transaction is SERIALIZABLE: table reads are then noted in
    /// `tables_read`, which its commit checks (see `IsolationLevel::Serializable`).
    track_reads: std::sync::atomic::AtomicBool,
    tables_read: Mutex<Vec<shoal_storage::TableId>>,
    /// Open SQL cursors (DECLARE), by name.
    pub cursors: Mutex<std::collections::BTreeMap<String, crate::session::SqlCursor>>,
    /// NOTICEs the running statement raised, for the connection to send before its result.
    pub notices: Mutex<Vec<crate::error::Notice>>,
    /// The role the client logged in as (session_user; current_user unless SET ROLE).
    session_user: Mutex<String>,
    /// The transaction's deferred foreign keys and SET CONSTRAINTS choices.
    pub deferred_constraints: Mutex<crate::constraints::DeferredConstraints>,
    /// When the running statement started, in microseconds since the epoch
    /// (statement_timestamp()).
    statement_started_micros: std::sync::atomic::AtomicI64,
    /// The session's online backup, between pg_backup_start and pg_backup_stop.
    pub backup: Mutex<Option<crate::query::backup_functions::SessionBackup>>,
    /// The statement being planned names a `tableoid` column: only then do the system
    /// catalogs carry one, so that `SELECT *` does not show it (it is a system column).
    pub wants_tableoid: std::sync::atomic::AtomicBool,
    /// The transition tables (`REFERENCING OLD TABLE AS ...`) of the trigger functions
    /// running, innermost last: unqualified names find them before any table, as
    /// PostgreSQL's ephemeral named relations.
    pub transition_tables: Mutex<Vec<(String, Arc<dyn datafusion::datasource::TableProvider>)>>,
}

impl std::fmt::Debug for PlanScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanScope")
            .field("backend_pid", &self.backend_pid)
            .finish()
    }
}

impl PlanScope {
    pub fn new(engine: Arc<Engine>, backend_pid: i32) -> Self {
        let notifications =
            crate::notify::SessionNotifications::new(engine.notifications.clone(), backend_pid);
        let advisory_locks =
            crate::advisory::SessionLocks::new(engine.advisory_locks.clone(), backend_pid);
        PlanScope {
            notifications,
            advisory_locks,
            prepared_statements: Mutex::default(),
            protocol_statements: Mutex::default(),
            cursors: Mutex::default(),
            track_reads: std::sync::atomic::AtomicBool::new(false),
            statement_started_micros: std::sync::atomic::AtomicI64::new(0),
            notices: Mutex::default(),
            session_user: Mutex::new(shoal_storage::catalog_roles::BOOTSTRAP_SUPERUSER.to_string()),
            deferred_constraints: Mutex::default(),
            tables_read: Mutex::default(),
            backup: Mutex::default(),
            wants_tableoid: Default::default(),
            transition_tables: Mutex::default(),
            engine,
            snapshot: Mutex::new(Snapshot { ts: 0, txn: 0 }),
            search_path: Mutex::new(vec!["public".to_string()]),
            dml_capture: Mutex::new(Vec::new()),
            settings: Mutex::new(HashMap::new()),
            set_config_calls: Mutex::new(Vec::new()),
            sequence_last: Mutex::new(HashMap::new()),
            time_zone: SessionZone::default(),
            backend_pid,
        }
    }

    /// Whether the role the session acts as (current_user) is a superuser.
    pub fn current_role_is_superuser(&self) -> bool {
        self.engine
            .catalog
            .read()
            .role_named(&self.current_role())
            .is_some_and(|r| r.superuser)
    }

    /// The transition table named `name` of a trigger function running, if there is one.
    pub fn transition_table(
        &self,
        name: &str,
    ) -> Option<Arc<dyn datafusion::datasource::TableProvider>> {
        let tables = self.transition_tables.lock();
        tables
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    /// Where a scan of table `oid` records its row handles, if it records them.
    pub fn capture_for(&self, oid: Oid) -> Option<RowCapture> {
        let captures = self.dml_capture.lock();
        captures
            .iter()
            .find(|(t, _)| *t == oid)
            .map(|(_, c)| c.clone())
    }

    pub fn time_zone(&self) -> TimeZone {
        self.time_zone.get()
    }

    /// Turns the noting of table reads on (a SERIALIZABLE transaction's statement) or off.
    /// Raises a NOTICE: `IF EXISTS` and `IF NOT EXISTS` say what they skipped.
    pub fn notice(&self, code: &'static str, message: String) {
        self.notices.lock().push(crate::error::Notice {
            severity: "NOTICE",
            code,
            message,
            detail: None,
            hint: None,
        });
    }

    /// The session user: SET SESSION AUTHORIZATION's, else the role that logged in.
    pub fn session_user(&self) -> String {
        let user = self.settings.lock().get("session_authorization").cloned();
        match user {
            Some(user) if !user.is_empty() => user,
            _ => self.authenticated_user(),
        }
    }

    /// The role the client logged in as (SET SESSION AUTHORIZATION does not change it).
    pub fn authenticated_user(&self) -> String {
        self.session_user.lock().clone()
    }

    /// The role statements run as: SET ROLE's, else the session user.
    pub fn current_role(&self) -> String {
        // The settings lock is let go before session_user takes it again.
        let role = self.settings.lock().get("role").cloned();
        match role {
            Some(role) if role != "none" => role,
            _ => self.session_user(),
        }
    }

    /// The client logged in as `role`.
    pub fn log_in_as(&self, role: &str) {
        *self.session_user.lock() = role.to_string();
    }

    /// A WARNING for the client, sent as `notice` is.
    pub fn warning(&self, code: &'static str, message: String) {
        self.notices.lock().push(crate::error::Notice {
            severity: "WARNING",
            code,
            message,
            detail: None,
            hint: None,
        });
    }

    pub fn mark_statement_start(&self, micros: i64) {
        self.statement_started_micros
            .store(micros, std::sync::atomic::Ordering::Relaxed);
    }

    /// statement_timestamp(): when the running statement started.
    pub fn statement_started_micros(&self) -> i64 {
        self.statement_started_micros
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_read_tracking(&self, on: bool) {
        self.track_reads
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// A statement read `table` (row or column table).
    pub fn note_read(&self, table: shoal_storage::TableId) {
        if self.track_reads.load(std::sync::atomic::Ordering::Relaxed) {
            let mut read = self.tables_read.lock();
            if !read.contains(&table) {
                read.push(table);
            }
        }
    }

    /// The tables noted since the last call.
    pub fn take_reads(&self) -> Vec<shoal_storage::TableId> {
        std::mem::take(&mut *self.tables_read.lock())
    }

    pub fn snapshot(&self) -> Snapshot {
        *self.snapshot.lock()
    }

    /// The schemas an unqualified name is looked up in, in order: pg_catalog first (as
    /// PostgreSQL does implicitly), then the search_path.
    pub fn lookup_schemas(&self) -> Vec<String> {
        let mut out = vec!["pg_catalog".to_string()];
        for s in self.search_path.lock().iter() {
            if s != "pg_catalog" {
                out.push(s.clone());
            }
        }
        out
    }

    /// The schema new unqualified objects are created in: the first existing search_path entry.
    pub fn creation_schema(&self) -> Option<String> {
        let catalog = self.engine.catalog.read();
        self.search_path
            .lock()
            .iter()
            .find(|s| catalog.schemas.contains_key(*s) && *s != "pg_catalog")
            .cloned()
    }

    /// current_schemas(): the search_path's schemas that exist, in order, with pg_catalog first
    /// when `implicit` and the path does not name it (it is searched first then, as in
    /// PostgreSQL).
    pub fn current_schemas(&self, implicit: bool) -> Vec<String> {
        let catalog = self.engine.catalog.read();
        let path = self.search_path.lock();
        let mut schemas = Vec::new();
        if implicit && !path.iter().any(|s| s == "pg_catalog") {
            schemas.push("pg_catalog".to_string());
        }
        schemas.extend(
            path.iter()
                .filter(|s| catalog.schemas.contains_key(*s) || *s == "pg_catalog")
                .cloned(),
        );
        schemas
    }

    /// Resolves a possibly qualified relation name to (schema, kind, oid).
    pub fn resolve_relation(
        &self,
        schema: Option<&str>,
        name: &str,
    ) -> Option<(String, RelationKind, Oid)> {
        let catalog = self.engine.catalog.read();
        let candidates = match schema {
            Some(s) => vec![s.to_string()],
            None => self.lookup_schemas(),
        };
        candidates
            .into_iter()
            .find_map(|s| catalog.lookup(&s, name).map(|(k, o)| (s, k, o)))
    }
}
