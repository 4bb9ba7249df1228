//! Triggers: CREATE TRIGGER, DROP TRIGGER, ALTER TABLE ... ENABLE/DISABLE TRIGGER, and firing
//! them from INSERT, UPDATE and DELETE on row tables.
//!
//! As in PostgreSQL: BEFORE ROW triggers run as each row is about to be written and may change
//! it (the NEW they return) or skip it (NULL); AFTER ROW triggers run at the end of the
//! statement, in the order the rows were written; statement triggers run once before and once
//! after. Triggers of one kind fire in the order of their names. A trigger function is a
//! PL/pgSQL function `RETURNS trigger`; it sees NEW, OLD, TG_OP, TG_NAME, TG_WHEN, TG_LEVEL,
//! TG_TABLE_NAME, TG_TABLE_SCHEMA, TG_RELID, TG_NARGS and TG_ARGV.
//!
//! Every write path of a row table fires them: INSERT, UPDATE, DELETE and ON CONFLICT in `dml`,
//! COPY FROM (`copy::load`) and foreign-key actions (`dml::referential`); the fast path and
//! kept plans are not taken for a table with triggers. AFTER triggers may read the statement's
//! rows as transition tables (`REFERENCING OLD TABLE AS o NEW TABLE AS n`): in-memory tables
//! that the trigger function's queries find by those names (`PlanScope::transition_tables`)
//! while it runs. Column tables fire them too (`dml::column`). TRUNCATE
//! fires the statement triggers of each table it empties (`ddl::truncate`); a view's INSTEAD
//! OF triggers do the writes of statements on it (`dml::instead`).

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::{MemTable, TableProvider};
use datafusion::sql::sqlparser::ast;
use shoal_plpgsql::{Block, Stmt};
use shoal_storage::catalog::{TableDef, ViewDef};
use shoal_storage::catalog_functions::{RoutineDef, RoutineReturn};
use shoal_storage::catalog_triggers::{TriggerDef, TriggerEvent, TriggerTiming};
use shoal_storage::types::{DataType, Value};
use shoal_storage::Transaction;

use super::plpgsql::vars::{Datum, VarType};
use super::plpgsql::{self, named_row, Invocation, Outcome, Returns};
use crate::ddl::{ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub async fn create_trigger(
    session: &mut Session,
    ct: ast::CreateTrigger,
) -> SqlResult<StatementResult> {
    let name = ident(
        ct.name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .ok_or_else(|| SqlError::syntax("trigger name expected"))?,
    );
    if ct.is_constraint {
        return Err(SqlError::unsupported("CREATE CONSTRAINT TRIGGER"));
    }
    let timing = match ct.period {
        Some(ast::TriggerPeriod::Before) => TriggerTiming::Before,
        Some(ast::TriggerPeriod::After) | Some(ast::TriggerPeriod::For) => TriggerTiming::After,
        Some(ast::TriggerPeriod::InsteadOf) => TriggerTiming::InsteadOf,
        None => return Err(SqlError::syntax("BEFORE or AFTER expected")),
    };
    let mut events = Vec::new();
    let mut update_columns = Vec::new();
    for e in &ct.events {
        events.push(match e {
            ast::TriggerEvent::Insert => TriggerEvent::Insert,
            ast::TriggerEvent::Update(cols) => {
                update_columns.extend(cols.iter().map(ident));
                TriggerEvent::Update
            }
            ast::TriggerEvent::Delete => TriggerEvent::Delete,
            ast::TriggerEvent::Truncate => TriggerEvent::Truncate,
        });
    }
    let for_each_row = matches!(
        ct.trigger_object,
        Some(ast::TriggerObjectKind::ForEach(ast::TriggerObject::Row))
            | Some(ast::TriggerObjectKind::For(ast::TriggerObject::Row))
    );
    if for_each_row && events.contains(&TriggerEvent::Truncate) {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "TRUNCATE FOR EACH ROW triggers are not supported",
        ));
    }
    let Some(body) = &ct.exec_body else {
        return Err(SqlError::syntax("EXECUTE FUNCTION expected"));
    };
    let function = trigger_function(session, &body.func_desc.name)?;
    super::check_execute(&session.scope, &function)?;
    let args = body
        .func_desc
        .args
        .iter()
        .flatten()
        .map(|a| match &a.data_type {
            // A quoted argument (see `statement::with_trigger_arguments_quoted`), or a name.
            ast::DataType::Custom(name, modifiers) if modifiers.is_empty() && name.0.len() == 1 => {
                match name.0[0].as_ident() {
                    Some(i) if i.quote_style.is_some() => i.value.clone(),
                    Some(i) => i.value.to_ascii_lowercase(),
                    None => name.to_string(),
                }
            }
            other => other.to_string().to_ascii_lowercase(),
        })
        .collect();
    let (schema, table) = split_name(&ct.table_name);
    let target = relation(session, schema.as_deref(), &table)?;
    check_kind(&target, timing, for_each_row, &ct, &events)?;
    let (old_table, new_table) = transition_table_names(&target, timing, &ct, &events)?;
    let mut catalog = session.engine.catalog.write();
    let mut triggers = target.triggers().to_vec();
    if let Some(old) = triggers.iter().position(|t| t.name == name) {
        if !ct.or_replace {
            return Err(SqlError::new(
                code::DUPLICATE_OBJECT,
                format!(
                    "trigger \"{name}\" for relation \"{}\" already exists",
                    target.name()
                ),
            ));
        }
        triggers.remove(old);
    }
    let oid = catalog.allocate_oid();
    triggers.push(TriggerDef {
        oid,
        name,
        function: function.oid,
        timing,
        events,
        update_columns,
        for_each_row,
        when_sql: ct.condition.as_ref().map(|c| c.to_string()),
        args,
        enabled: true,
        old_table,
        new_table,
    });
    triggers.sort_by(|a, b| a.name.cmp(&b.name));
    target.store(&mut catalog, triggers)?;
    Ok(StatementResult::command("CREATE TRIGGER"))
}

/// What PostgreSQL allows where: INSTEAD OF row triggers on views only, and no row-level
/// BEFORE or AFTER triggers on them.
fn check_kind(
    target: &Target,
    timing: TriggerTiming,
    for_each_row: bool,
    ct: &ast::CreateTrigger,
    events: &[TriggerEvent],
) -> SqlResult<()> {
    let wrong_object = |what: &str, detail: &str| {
        SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("\"{}\" is a {what}", target.name()),
        )
        .with_detail(detail.to_string())
    };
    match (target, timing) {
        (Target::Table(_), TriggerTiming::InsteadOf) => Err(wrong_object(
            "table",
            "Tables cannot have INSTEAD OF triggers.",
        )),
        (Target::Table(_), _) => Ok(()),
        (Target::View(_), TriggerTiming::InsteadOf) => {
            let refuse = |m: &str| Err(SqlError::new(code::FEATURE_NOT_SUPPORTED, m.to_string()));
            if !for_each_row {
                return refuse("INSTEAD OF triggers must be FOR EACH ROW");
            }
            if ct.condition.is_some() {
                return refuse("INSTEAD OF triggers cannot have WHEN conditions");
            }
            if ct
                .events
                .iter()
                .any(|e| matches!(e, ast::TriggerEvent::Update(c) if !c.is_empty()))
            {
                return refuse("INSTEAD OF triggers cannot have column lists");
            }
            if events.contains(&TriggerEvent::Truncate) {
                return Err(wrong_object("view", "Views cannot have TRUNCATE triggers."));
            }
            Ok(())
        }
        (Target::View(_), _) if for_each_row => Err(wrong_object(
            "view",
            "Views cannot have row-level BEFORE or AFTER triggers.",
        )),
        // BEFORE and AFTER STATEMENT: they fire when INSTEAD OF triggers do a statement's
        // writes (`dml::instead`).
        (Target::View(_), _) if events.contains(&TriggerEvent::Truncate) => {
            Err(wrong_object("view", "Views cannot have TRUNCATE triggers."))
        }
        (Target::View(_), _) => Ok(()),
    }
}

/// The names of the OLD and NEW transition tables of `REFERENCING`, checked as PostgreSQL
/// does: AFTER triggers of one event on a table, without a column list.
fn transition_table_names(
    target: &Target,
    timing: TriggerTiming,
    ct: &ast::CreateTrigger,
    events: &[TriggerEvent],
) -> SqlResult<(Option<String>, Option<String>)> {
    let (mut old_table, mut new_table) = (None, None);
    let invalid = |m: &str| SqlError::new(code::INVALID_OBJECT_DEFINITION, m.to_string());
    for r in &ct.referencing {
        if let Target::View(_) = target {
            return Err(SqlError::new(
                code::WRONG_OBJECT_TYPE,
                format!("\"{}\" is a view", target.name()),
            )
            .with_detail("Triggers on views cannot have transition tables.".to_string()));
        }
        if timing != TriggerTiming::After {
            return Err(invalid(
                "transition table name can only be specified for an AFTER trigger",
            ));
        }
        if events.contains(&TriggerEvent::Truncate) {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "TRUNCATE triggers with transition tables are not supported",
            ));
        }
        if events.len() > 1 {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "transition tables cannot be specified for triggers with more than one event",
            ));
        }
        if ct
            .events
            .iter()
            .any(|e| matches!(e, ast::TriggerEvent::Update(c) if !c.is_empty()))
        {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "transition tables cannot be specified for triggers with column lists",
            ));
        }
        let name = r
            .transition_relation_name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(ident)
            .ok_or_else(|| SqlError::syntax("transition table name expected"))?;
        let event = events[0];
        match r.refer_type {
            ast::TriggerReferencingType::NewTable => {
                if !matches!(event, TriggerEvent::Insert | TriggerEvent::Update) {
                    return Err(invalid(
                        "NEW TABLE can only be specified for an INSERT or UPDATE trigger",
                    ));
                }
                if new_table.replace(name).is_some() {
                    return Err(invalid("NEW TABLE cannot be specified multiple times"));
                }
            }
            ast::TriggerReferencingType::OldTable => {
                if !matches!(event, TriggerEvent::Delete | TriggerEvent::Update) {
                    return Err(invalid(
                        "OLD TABLE can only be specified for a DELETE or UPDATE trigger",
                    ));
                }
                if old_table.replace(name).is_some() {
                    return Err(invalid("OLD TABLE cannot be specified multiple times"));
                }
            }
        }
    }
    if old_table.is_some() && old_table == new_table {
        return Err(invalid(
            "OLD TABLE name and NEW TABLE name cannot be the same",
        ));
    }
    Ok((old_table, new_table))
}

/// The relation a trigger is on.
enum Target {
    Table(Arc<TableDef>),
    View(Arc<ViewDef>),
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Table(t) => &t.name,
            Target::View(v) => &v.name,
        }
    }

    fn triggers(&self) -> &[TriggerDef] {
        match self {
            Target::Table(t) => &t.triggers,
            Target::View(v) => &v.triggers,
        }
    }

    /// Puts the relation back with these triggers.
    fn store(
        &self,
        catalog: &mut shoal_storage::catalog::Catalog,
        triggers: Vec<TriggerDef>,
    ) -> SqlResult<()> {
        match self {
            Target::Table(t) => {
                let mut def = (**t).clone();
                def.triggers = triggers;
                catalog.replace_table(def)?;
            }
            Target::View(v) => {
                let mut def = (**v).clone();
                def.triggers = triggers;
                catalog.replace_view(def)?;
            }
        }
        Ok(())
    }
}

fn trigger_function(session: &Session, name: &ast::ObjectName) -> SqlResult<Arc<RoutineDef>> {
    let (schema, fname) = split_name(name);
    let schemas = match schema {
        Some(s) => vec![s],
        None => session.scope.lookup_schemas(),
    };
    let catalog = session.engine.catalog.read();
    let found = schemas
        .iter()
        .flat_map(|s| catalog.routines_named(s, &fname))
        .find(|r| r.input_types().is_empty())
        .cloned();
    match found {
        Some(r) if r.returns == RoutineReturn::Trigger => Ok(r),
        Some(_) => Err(SqlError::new(
            code::INVALID_OBJECT_DEFINITION,
            format!("function {fname} must return type trigger"),
        )),
        None => Err(SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!("function {fname}() does not exist"),
        )),
    }
}

fn relation(session: &Session, schema: Option<&str>, table: &str) -> SqlResult<Target> {
    let found = session.scope.resolve_relation(schema, table);
    let catalog = session.engine.catalog.read();
    let oid = found.map(|(_, _, oid)| oid);
    if let Some(t) = oid.and_then(|oid| catalog.tables.get(&oid)) {
        return Ok(Target::Table(t.clone()));
    }
    if let Some(v) = oid.and_then(|oid| catalog.views.get(&oid)) {
        return Ok(Target::View(v.clone()));
    }
    Err(SqlError::new(
        code::UNDEFINED_TABLE,
        format!("relation \"{table}\" does not exist"),
    ))
}

/// DROP TRIGGER [IF EXISTS] name ON table.
pub fn drop_trigger(session: &Session, dt: &ast::DropTrigger) -> SqlResult<StatementResult> {
    let name = ident(
        dt.trigger_name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .ok_or_else(|| SqlError::syntax("trigger name expected"))?,
    );
    let Some(table_name) = &dt.table_name else {
        return Err(SqlError::syntax(
            "syntax error: DROP TRIGGER needs ON table",
        ));
    };
    let (schema, table) = split_name(table_name);
    let target = relation(session, schema.as_deref(), &table)?;
    let mut triggers = target.triggers().to_vec();
    let Some(i) = triggers.iter().position(|t| t.name == name) else {
        if dt.if_exists {
            session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("trigger \"{name}\" for relation \"{table}\" does not exist, skipping"),
            );
            return Ok(StatementResult::command("DROP TRIGGER"));
        }
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("trigger \"{name}\" for table \"{table}\" does not exist"),
        ));
    };
    triggers.remove(i);
    target.store(&mut session.engine.catalog.write(), triggers)?;
    Ok(StatementResult::command("DROP TRIGGER"))
}

/// ALTER TABLE ... ENABLE/DISABLE TRIGGER name | ALL | USER.
pub fn set_enabled(session: &Session, def: &TableDef, name: &str, enabled: bool) -> SqlResult<()> {
    let mut new_def = def.clone();
    let all = matches!(name, "all" | "user");
    let mut found = false;
    for t in &mut new_def.triggers {
        if all || t.name == name {
            t.enabled = enabled;
            found = true;
        }
    }
    if !found && !all {
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!(
                "trigger \"{name}\" for table \"{}\" does not exist",
                def.name
            ),
        ));
    }
    session.engine.catalog.write().replace_table(new_def)?;
    Ok(())
}

/// The triggers of a table (or view) for one statement's event.
pub struct Triggers {
    on: TriggerRelation,
    event: TriggerEvent,
    /// The columns an UPDATE sets (for UPDATE OF).
    set_columns: Vec<String>,
}

/// What the trigger functions see of the relation: its name and columns, and its triggers.
struct TriggerRelation {
    /// The table's definition (None for a view), for its transition tables.
    table: Option<Arc<TableDef>>,
    oid: u32,
    schema: String,
    name: String,
    columns: Vec<(String, DataType)>,
    triggers: Vec<TriggerDef>,
}

/// A row written, with its old and new values, for the AFTER ROW triggers at the end.
pub type WrittenRow = (Option<Vec<Value>>, Option<Vec<Value>>);

/// A statement's transition tables: its old rows and its new rows, each as a table.
pub struct Transition {
    old: Arc<dyn TableProvider>,
    new: Arc<dyn TableProvider>,
}

impl Triggers {
    /// The triggers that fire for `event` on `def`; None when there are none (the common case,
    /// which costs one look at the table's definition).
    pub fn of(
        def: &Arc<TableDef>,
        event: TriggerEvent,
        set_columns: &[String],
    ) -> Option<Triggers> {
        if !def.triggers.iter().any(|t| t.fires_on(event)) {
            return None;
        }
        Some(Triggers {
            on: TriggerRelation {
                table: Some(def.clone()),
                oid: def.oid,
                schema: def.schema.clone(),
                name: def.name.clone(),
                columns: def
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.data_type.clone()))
                    .collect(),
                triggers: def.triggers.clone(),
            },
            event,
            set_columns: set_columns.to_vec(),
        })
    }

    /// The INSTEAD OF triggers of view `view` (whose columns are `columns`) for `event`; None
    /// when it has none, and the view's own rules apply.
    pub fn instead_of(
        view: &ViewDef,
        columns: Vec<(String, DataType)>,
        event: TriggerEvent,
    ) -> Option<Triggers> {
        if !view
            .triggers
            .iter()
            .any(|t| t.fires_on(event) && t.timing == TriggerTiming::InsteadOf)
        {
            return None;
        }
        Some(Triggers {
            on: TriggerRelation {
                table: None,
                oid: view.oid,
                schema: view.schema.clone(),
                name: view.name.clone(),
                columns,
                triggers: view.triggers.clone(),
            },
            event,
            set_columns: Vec::new(),
        })
    }

    fn matching(&self, timing: TriggerTiming, row: bool) -> impl Iterator<Item = &TriggerDef> {
        self.on.triggers.iter().filter(move |t| {
            t.fires_on(self.event)
                && t.timing == timing
                && t.for_each_row == row
                && (t.update_columns.is_empty()
                    || self.event != TriggerEvent::Update
                    || t.update_columns
                        .iter()
                        .any(|c| self.set_columns.contains(c)))
        })
    }

    /// The relation's columns, as NEW and OLD have them.
    pub fn columns(&self) -> &[(String, DataType)] {
        &self.on.columns
    }

    /// Whether `other` is the same event on the same table.
    pub fn same_target(&self, other: &Triggers) -> bool {
        self.on.oid == other.on.oid && self.event == other.event
    }

    /// Whether BEFORE ROW triggers fire: each must see the rows written before its own (a
    /// column table's writer appends them first).
    pub fn has_before_row(&self) -> bool {
        self.matching(TriggerTiming::Before, true).next().is_some()
    }

    fn has_after_row(&self) -> bool {
        self.matching(TriggerTiming::After, true).next().is_some()
    }

    fn has_transition_tables(&self) -> bool {
        [true, false].into_iter().any(|row| {
            self.matching(TriggerTiming::After, row)
                .any(TriggerDef::has_transition_tables)
        })
    }

    /// Whether the statement keeps the rows it writes for the AFTER triggers: for AFTER ROW
    /// triggers, or for transition tables.
    pub fn keeps_rows(&self) -> bool {
        self.has_after_row() || self.has_transition_tables()
    }

    /// The statement's transition tables, made of the rows it wrote; None when no AFTER
    /// trigger reads them.
    pub fn transition(&self, rows: &[WrittenRow]) -> SqlResult<Option<Transition>> {
        let Some(def) = self
            .on
            .table
            .as_ref()
            .filter(|_| self.has_transition_tables())
        else {
            return Ok(None);
        };
        let schema = crate::query::provider::table_schema(def);
        let table_of = |rows: Vec<&Vec<Value>>| -> SqlResult<Arc<dyn TableProvider>> {
            let arrays = def
                .columns
                .iter()
                .enumerate()
                .map(|(c, col)| {
                    crate::types::array_from_values(&col.data_type, rows.iter().map(|r| &r[c]))
                })
                .collect();
            let batch = RecordBatch::try_new(schema.clone(), arrays)?;
            Ok(Arc::new(MemTable::try_new(
                schema.clone(),
                vec![vec![batch]],
            )?))
        };
        Ok(Some(Transition {
            old: table_of(rows.iter().filter_map(|(old, _)| old.as_ref()).collect())?,
            new: table_of(rows.iter().filter_map(|(_, new)| new.as_ref()).collect())?,
        }))
    }

    pub async fn statement(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        timing: TriggerTiming,
    ) -> SqlResult<()> {
        self.statement_with(session, txn, timing, None).await
    }

    async fn statement_with(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        timing: TriggerTiming,
        transition: Option<&Transition>,
    ) -> SqlResult<()> {
        let triggers: Vec<TriggerDef> = self.matching(timing, false).cloned().collect();
        for t in &triggers {
            self.fire(session, txn, t, None, None, transition).await?;
        }
        Ok(())
    }

    /// The AFTER triggers at the end of a statement that wrote `rows` (kept if `keeps_rows`):
    /// the row triggers for each row, then the statement triggers.
    pub async fn after_statement(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        rows: Vec<WrittenRow>,
    ) -> SqlResult<()> {
        let transition = self.transition(&rows)?;
        self.after_rows(session, txn, rows, transition.as_ref())
            .await?;
        self.after_statement_triggers(session, txn, transition.as_ref())
            .await
    }

    /// The AFTER STATEMENT triggers, which read `transition` if they have transition tables.
    pub async fn after_statement_triggers(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        transition: Option<&Transition>,
    ) -> SqlResult<()> {
        self.statement_with(session, txn, TriggerTiming::After, transition)
            .await
    }

    /// BEFORE ROW triggers: the row to write (as they changed it), or None to skip it.
    pub async fn before_row(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        old: Option<&[Value]>,
        new: Option<Vec<Value>>,
    ) -> SqlResult<Option<Vec<Value>>> {
        self.row_in_turn(session, txn, TriggerTiming::Before, old, new)
            .await
    }

    /// A view's INSTEAD OF ROW triggers, which do the row's write: the row as they returned
    /// it (the write counts), or None when one returned NULL (nothing was written).
    pub async fn instead_of_row(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        old: Option<&[Value]>,
        new: Option<Vec<Value>>,
    ) -> SqlResult<Option<Vec<Value>>> {
        self.row_in_turn(session, txn, TriggerTiming::InsteadOf, old, new)
            .await
    }

    /// The row triggers of `timing` in turn, each given the row the one before returned.
    async fn row_in_turn(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        timing: TriggerTiming,
        old: Option<&[Value]>,
        new: Option<Vec<Value>>,
    ) -> SqlResult<Option<Vec<Value>>> {
        let triggers: Vec<TriggerDef> = self.matching(timing, true).cloned().collect();
        let mut new = new;
        for t in &triggers {
            let returned = self
                .fire(session, txn, t, old, new.as_deref(), None)
                .await?;
            match returned {
                // The trigger's WHEN said no: the row goes on unchanged.
                Fired::Skipped => {}
                Fired::Row(row) => {
                    if new.is_some() {
                        new = Some(row);
                    }
                }
                Fired::Null => return Ok(None),
            }
        }
        Ok(match (new, old) {
            (Some(n), _) => Some(n),
            (None, Some(o)) => Some(o.to_vec()),
            (None, None) => None,
        })
    }

    /// AFTER ROW triggers for the rows the statement wrote, in order.
    pub async fn after_rows(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        rows: Vec<WrittenRow>,
        transition: Option<&Transition>,
    ) -> SqlResult<()> {
        let triggers: Vec<TriggerDef> =
            self.matching(TriggerTiming::After, true).cloned().collect();
        if triggers.is_empty() {
            return Ok(());
        }
        for (old, new) in rows {
            for t in &triggers {
                self.fire(session, txn, t, old.as_deref(), new.as_deref(), transition)
                    .await?;
            }
        }
        Ok(())
    }

    /// Runs trigger `t` with its transition tables (from `transition`) visible by their
    /// names while it runs.
    async fn fire(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        t: &TriggerDef,
        old: Option<&[Value]>,
        new: Option<&[Value]>,
        transition: Option<&Transition>,
    ) -> SqlResult<Fired> {
        let tables: Vec<(String, Arc<dyn TableProvider>)> = match transition {
            Some(tr) => [(&t.old_table, &tr.old), (&t.new_table, &tr.new)]
                .into_iter()
                .filter_map(|(name, table)| Some((name.clone()?, table.clone())))
                .collect(),
            None => Vec::new(),
        };
        if tables.is_empty() {
            return self.fire_now(session, txn, t, old, new).await;
        }
        let depth = {
            let mut visible = session.scope.transition_tables.lock();
            let depth = visible.len();
            visible.extend(tables);
            depth
        };
        let fired = Box::pin(self.fire_now(session, txn, t, old, new)).await;
        session.scope.transition_tables.lock().truncate(depth);
        fired
    }

    async fn fire_now(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        t: &TriggerDef,
        old: Option<&[Value]>,
        new: Option<&[Value]>,
    ) -> SqlResult<Fired> {
        let columns = self.on.columns.clone();
        let row = |values: Option<&[Value]>| match values {
            Some(v) => Datum::Row(named_row(&columns, v.to_vec())),
            None => Datum::Unassigned,
        };
        let text = |s: &str| (VarType::Scalar(DataType::Text), Datum::text(s));
        let specials = vec![
            ("new".to_string(), VarType::Row(columns.clone()), row(new)),
            ("old".to_string(), VarType::Row(columns.clone()), row(old)),
            ("tg_name".into(), text(&t.name).0, text(&t.name).1),
            (
                "tg_when".into(),
                VarType::Scalar(DataType::Text),
                Datum::text(match t.timing {
                    TriggerTiming::Before => "BEFORE",
                    TriggerTiming::After => "AFTER",
                    TriggerTiming::InsteadOf => "INSTEAD OF",
                }),
            ),
            (
                "tg_level".into(),
                VarType::Scalar(DataType::Text),
                Datum::text(if t.for_each_row { "ROW" } else { "STATEMENT" }),
            ),
            (
                "tg_op".into(),
                VarType::Scalar(DataType::Text),
                Datum::text(match self.event {
                    TriggerEvent::Insert => "INSERT",
                    TriggerEvent::Update => "UPDATE",
                    TriggerEvent::Delete => "DELETE",
                    TriggerEvent::Truncate => "TRUNCATE",
                }),
            ),
            (
                "tg_table_name".into(),
                text(&self.on.name).0,
                text(&self.on.name).1,
            ),
            (
                "tg_relname".into(),
                text(&self.on.name).0,
                text(&self.on.name).1,
            ),
            (
                "tg_table_schema".into(),
                text(&self.on.schema).0,
                text(&self.on.schema).1,
            ),
            (
                "tg_relid".into(),
                VarType::Scalar(DataType::Int64),
                Datum::Scalar(DataType::Int64, Value::Int64(self.on.oid as i64)),
            ),
            (
                "tg_nargs".into(),
                VarType::Scalar(DataType::Int32),
                Datum::Scalar(DataType::Int32, Value::Int32(t.args.len() as i32)),
            ),
            (
                "tg_argv".into(),
                VarType::Scalar(DataType::Array(Box::new(DataType::Text))),
                // NULL, not an empty array, when the trigger has no arguments.
                Datum::Scalar(
                    DataType::Array(Box::new(DataType::Text)),
                    match t.args.is_empty() {
                        true => Value::Null,
                        false => {
                            Value::Array(t.args.iter().map(|a| Value::Text(a.clone())).collect())
                        }
                    },
                ),
            ),
        ];
        if let Some(when) = &t.when_sql {
            let test = Block {
                label: None,
                declarations: Vec::new(),
                body: vec![Stmt::Return(Some(format!("coalesce(({when}), false)")))],
                handlers: Vec::new(),
            };
            let outcome = plpgsql::run(
                session,
                txn,
                Invocation {
                    name: &t.name,
                    context: &t.name,
                    body: &test,
                    params: Vec::new(),
                    returns: Returns::Scalar(DataType::Bool),
                    specials: specials.clone(),
                    transaction_control: false,
                },
            )
            .await?;
            if !matches!(outcome, Outcome::Value(Datum::Scalar(_, Value::Bool(true)))) {
                return Ok(Fired::Skipped);
            }
        }
        let function = session
            .engine
            .catalog
            .read()
            .routines
            .get(&t.function)
            .cloned();
        let Some(function) = function else {
            return Err(SqlError::new(
                code::UNDEFINED_FUNCTION,
                format!("the function of trigger \"{}\" does not exist", t.name),
            ));
        };
        if function.language != "plpgsql" {
            return Err(SqlError::unsupported(format!(
                "trigger functions in language {}",
                function.language
            )));
        }
        let body = session.routine_cache.body(&function).map_err(|e| {
            SqlError::syntax(format!(
                "{} in the body of function \"{}\"",
                e.message, function.name
            ))
        })?;
        let context = format!("{}()", function.name);
        let outcome = plpgsql::run(
            session,
            txn,
            Invocation {
                name: &function.name,
                context: &context,
                body: &body,
                params: Vec::new(),
                returns: Returns::Trigger,
                specials,
                transaction_control: false,
            },
        )
        .await?;
        Ok(match outcome {
            Outcome::Value(Datum::Row(fields)) => {
                if fields.len() != columns.len() {
                    return Err(SqlError::new(
                        code::DATATYPE_MISMATCH,
                        "returned row structure does not match the structure of the triggering table",
                    ));
                }
                Fired::Row(fields.into_iter().map(|f| f.value).collect())
            }
            _ => Fired::Null,
        })
    }
}

enum Fired {
    /// The trigger's WHEN condition was not true: it did not run.
    Skipped,
    Row(Vec<Value>),
    Null,
}
