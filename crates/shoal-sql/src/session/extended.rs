//! The extended query protocol's side of a session: Parse analyzes a statement once (and plans
//! queries, so Describe can answer with parameter and result types), and Execute runs it with
//! bound values, on the fast path or its kept plan (`kept_plan`) when the catalog and the
//! settings have not changed since.

use std::sync::Arc;

use shoal_storage::catalog::Oid;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{self, Statement};

use super::{parse_sql, ResultColumn, Session, StatementResult, TxnState};
use crate::error::{SqlError, SqlResult};
use crate::fastpath::{self, FastPlan};
use crate::interrupt::interruptible;
use crate::kept_plan::generated::{GeneratedPlans, StatementParams};
use crate::kept_plan::{self, KeptPlan};
use crate::query::row_stream::RowStream;
use crate::types::pg_oid_for_arrow;
use crate::{dml, params, query};

/// A statement parsed (and, for queries, planned) once by the extended protocol's Parse.
#[derive(Debug)]
pub struct Prepared {
    pub sql: String,
    pub stmt: Option<Statement>,
    /// Parameter types, as declared by the client or inferred from the statement.
    pub param_types: Vec<ArrowType>,
    pub param_oids: Vec<u32>,
    /// Result columns; None when the statement returns no rows.
    pub columns: Option<Vec<ResultColumn>>,
    /// Shared with the copies the session's Parse cache hands out (see `ParseCache`).
    plan: Arc<parking_lot::Mutex<Option<PlannedQuery>>>,
    /// The fast-path plan and the catalog version it was resolved against.
    fast: Arc<parking_lot::Mutex<Option<(Arc<FastPlan>, u64)>>>,
    /// The kept plans of the queries an UPDATE, DELETE or locking SELECT generates.
    generated: Arc<GeneratedPlans>,
    /// The role and catalog version under which the statement's privileges were last found
    /// sufficient (see `check_prepared_privileges`).
    privileges_met: Arc<parking_lot::Mutex<Option<(Oid, u64)>>>,
    /// A query planned at Parse only for Describe (it runs a routine's body or modifies data
    /// first, see `describe_prepared`): its columns hold until the catalog changes.
    described_only: bool,
}

/// A prepared query's plans, and what they were made under.
#[derive(Debug)]
struct PlannedQuery {
    logical: LogicalPlan,
    catalog_version: u64,
    settings_generation: u64,
    kept: Kept,
}

#[derive(Debug)]
enum Kept {
    /// Not run yet. The first execution runs planned the ordinary way: building a kept plan
    /// costs more than one planning, and many statements run once (an unnamed statement of
    /// the extended protocol is parsed for every execution).
    Unrun,
    /// Run once: the next execution builds the kept plan.
    Untried,
    Plan(Arc<KeptPlan>),
    /// The plan cannot be kept (see `kept_plan`): every execution plans it.
    Never,
}

impl Prepared {
    /// Another handle on the same statement, sharing its plans.
    fn share(&self) -> Prepared {
        Prepared {
            sql: self.sql.clone(),
            stmt: self.stmt.clone(),
            param_types: self.param_types.clone(),
            param_oids: self.param_oids.clone(),
            columns: self.columns.clone(),
            plan: self.plan.clone(),
            fast: self.fast.clone(),
            generated: self.generated.clone(),
            privileges_met: self.privileges_met.clone(),
            described_only: self.described_only,
        }
    }

    /// Whether the query's plan is kept now: for tests and diagnostics.
    pub fn has_kept_plan(&self) -> bool {
        matches!(
            self.plan.lock().as_ref().map(|p| &p.kept),
            Some(Kept::Plan(_))
        )
    }

    /// Whether the query an UPDATE, DELETE or locking SELECT runs to find its rows has a kept
    /// plan now: for tests and diagnostics.
    pub fn has_kept_target_plan(&self) -> bool {
        self.generated.any_kept()
    }
}

impl Session {
    /// Parse: analyzes the statement once; queries are planned so Describe can answer. As
    /// in PostgreSQL, a failed Parse fails the transaction block, and a block that has failed
    /// already accepts only the statements that end it.
    pub async fn prepare(&mut self, sql: &str, declared: &[u32]) -> SqlResult<Prepared> {
        self.settle_stream_failure();
        let prepared = self.prepare_statement(sql, declared).await;
        if prepared.is_err() {
            self.fail_block();
        }
        prepared.map_err(|e| e.locate_in(sql))
    }

    /// A protocol-level error of a statement (parameters that Bind cannot decode): it fails
    /// the transaction block as the statement's own error would.
    pub fn statement_failed(&mut self) {
        self.fail_block();
    }

    async fn prepare_statement(&mut self, sql: &str, declared: &[u32]) -> SqlResult<Prepared> {
        let catalog_version = self.engine.catalog.read().version;
        let generation = self.settings.generation();
        if !matches!(self.txn, TxnState::Failed(_)) {
            if let Some(p) = self.parsed.get(sql, declared, catalog_version, generation) {
                return Ok(p);
            }
        }
        let prepared = self.analyze_statement(sql, declared).await?;
        if reanalysis_would_match(&prepared) {
            self.parsed
                .insert(&prepared, declared, catalog_version, generation);
        }
        Ok(prepared)
    }

    async fn analyze_statement(&mut self, sql: &str, declared: &[u32]) -> SqlResult<Prepared> {
        let mut statements = parse_sql(sql)?;
        if statements.len() > 1 {
            return Err(SqlError::syntax(
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        let stmt = statements.pop();
        if matches!(self.txn, TxnState::Failed(_)) && !stmt.as_ref().is_some_and(ends_block) {
            return Err(SqlError::in_failed_transaction());
        }
        let mut prepared = Prepared {
            sql: sql.to_string(),
            stmt: stmt.clone(),
            param_types: Vec::new(),
            param_oids: Vec::new(),
            columns: None,
            plan: Arc::default(),
            fast: Arc::default(),
            generated: Arc::default(),
            privileges_met: Arc::default(),
            described_only: false,
        };
        let Some(stmt) = stmt else {
            return Ok(prepared);
        };
        let count = params::count_placeholders(&stmt);
        let mut inferred_oids = vec![None; count];
        let inferred = self
            .describe_prepared(&stmt, count, &mut prepared, &mut inferred_oids)
            .await?;
        // A parameter passed to a user's function takes the parameter's type.
        let typed = crate::routines::call::typed_parameters(self, &stmt);
        resolve_parameter_types(
            &mut prepared,
            typed.as_ref().unwrap_or(&stmt),
            count,
            declared,
            &inferred,
            &inferred_oids,
        );
        let types = &prepared.param_types;
        prepared
            .fast
            .lock()
            .take_if(|(plan, _)| !plan.accepts(types));
        Ok(prepared)
    }

    /// What Describe reports, found at Parse: the parameter types the statement implies (None
    /// where it implies none), in `oids` the PostgreSQL types where the Arrow type does not
    /// tell (a uuid, char(n) or numeric column compared with the parameter), and, in
    /// `prepared`, its result columns and its fast or general plan when it has one.
    async fn describe_prepared(
        &mut self,
        stmt: &Statement,
        count: usize,
        prepared: &mut Prepared,
        oids: &mut [Option<u32>],
    ) -> SqlResult<Vec<Option<ArrowType>>> {
        let mut inferred: Vec<Option<ArrowType>> = vec![None; count];
        // The version before the plan: DDL landing while it is made re-plans it at once.
        let version = self.engine.catalog.read().version;
        let fast = fastpath::plan(self, stmt, count);
        match stmt {
            _ if fast.is_some() => {
                let plan = fast.expect("checked");
                for (i, slot) in inferred.iter_mut().enumerate() {
                    *slot = plan.param_type(i).map(crate::types::arrow_type);
                    oids[i] = plan
                        .param_type(i)
                        .and_then(|t| described_oid(crate::types::pg_type_of(t).0));
                }
                prepared.columns = plan.columns().map(<[ResultColumn]>::to_vec);
                *prepared.fast.lock() = Some((Arc::new(plan), version));
            }
            Statement::Query(_) | Statement::Explain { .. } => {
                if matches!(self.txn, TxnState::Idle | TxnState::Block(_)) {
                    // A call that runs a routine's body runs when the statement is executed
                    // (see `routines::call`): planned here only for Describe.
                    let runs_routines = crate::routines::call::describable(self, stmt)?;
                    let modifying = runs_routines.is_some()
                        || matches!(stmt, Statement::Query(q) if dml::cte::has_modifying_cte(q));
                    let planned = match runs_routines {
                        Some(describable) => describable,
                        None => match stmt {
                            // Planned only for Describe: execution runs the DML first.
                            Statement::Query(q) if modifying => {
                                Statement::Query(Box::new(dml::cte::describable(q)?))
                            }
                            _ => stmt.clone(),
                        },
                    };
                    let plan = self.plan_with_snapshot(planned).await?;
                    // A parameter compared with a column takes the column's field, and with it
                    // the PostgreSQL type the column declares.
                    for (name, field) in plan.get_parameter_fields()? {
                        let Some(i) = params::placeholder_index(&name).filter(|i| *i < count)
                        else {
                            continue;
                        };
                        oids[i] = field.as_ref().and_then(|f| {
                            f.metadata()
                                .get(crate::types::PG_TYPE_METADATA_KEY)
                                .and_then(|v| v.parse().ok())
                                .and_then(described_oid)
                        });
                        inferred[i] = field.map(|f| f.data_type().clone());
                    }
                    prepared.columns = Some(super::columns_of_plan(&plan));
                    prepared.described_only = modifying;
                    if !modifying {
                        *prepared.plan.lock() = Some(PlannedQuery {
                            logical: plan,
                            catalog_version: version,
                            settings_generation: self.settings.generation(),
                            kept: Kept::Unrun,
                        });
                    }
                }
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                // Calls that run a routine's body run at execution (see `routines::call`).
                let describable = crate::routines::call::describable(self, stmt)?;
                let described = describable.as_ref().unwrap_or(stmt);
                let (fields, columns) = dml::describe(self, described, count).await?;
                for (i, field) in fields.into_iter().enumerate() {
                    let Some(field) = field else { continue };
                    if let Some(type_oid) = field
                        .metadata()
                        .get(crate::types::PG_TYPE_METADATA_KEY)
                        .and_then(|v| v.parse().ok())
                    {
                        oids[i] = described_oid(type_oid);
                    }
                    inferred[i] = Some(field.data_type().clone());
                }
                prepared.columns = columns;
            }
            // EXECUTE of a PREPAREd statement answers with that statement's columns.
            Statement::Execute {
                name: Some(name), ..
            } => {
                let name = match name.0.as_slice() {
                    [ast::ObjectNamePart::Identifier(id)] if id.quote_style.is_none() => {
                        id.value.to_lowercase()
                    }
                    [ast::ObjectNamePart::Identifier(id)] => id.value.clone(),
                    _ => name.to_string(),
                };
                if let Some(p) = self.scope.prepared_statements.lock().get(&name) {
                    prepared.columns = p.prepared.columns.clone();
                }
            }
            Statement::Fetch { .. } => prepared.columns = self.fetch_columns(stmt),
            Statement::Call(f) => {
                prepared.columns = crate::routines::statement::call_columns(self, f)
            }
            Statement::ShowVariable { variable } => {
                let name = super::set_show::show_name(variable);
                prepared.columns =
                    Some(vec![ResultColumn::computed(name, crate::types::oid::TEXT)]);
            }
            _ => {}
        }
        Ok(inferred)
    }

    async fn plan_with_snapshot(&mut self, stmt: Statement) -> SqlResult<LogicalPlan> {
        query::plan_statement(&self.state, &self.scope, stmt).await
    }

    /// Execute: runs a prepared statement with bound parameter values.
    pub async fn execute_prepared(
        &mut self,
        prepared: &Prepared,
        values: Vec<ScalarValue>,
    ) -> SqlResult<StatementResult> {
        self.settle_stream_failure();
        self.take_reloaded_config();
        self.track_statement(|| prepared.sql.clone());
        // Borrowed, not cloned: only the general path below needs a copy of the statement to
        // put the parameters into, and cloning an AST on every execution is not free.
        let Some(stmt) = prepared.stmt.as_ref() else {
            return Ok(StatementResult::Empty);
        };
        if !matches!(self.txn, TxnState::Failed(_)) {
            if let Err(e) = self.check_prepared_privileges(prepared, stmt) {
                self.fail_block();
                return Err(e);
            }
            if let Some(plan) = self.fast_plan_of(prepared, stmt) {
                if let Err(e) = self.check_writable(stmt) {
                    self.fail_block();
                    return Err(e);
                }
                let (mut txn, implicit) = self.statement_transaction();
                let mut cancel = self.cancel.take();
                let timeout_ms = self.settings.statement_timeout_ms();
                let work = fastpath::execute(self, &mut txn, &plan, &values);
                let result = interruptible(timeout_ms, &mut cancel, work).await;
                self.cancel = cancel;
                return self.finish_statement(txn, implicit, result).await;
            }
        }
        if let Some(r) = self.execute_transaction_control(stmt).await {
            return r;
        }
        let is_query = matches!(stmt, Statement::Query(q) if q.locks.is_empty());
        if is_query && !matches!(self.txn, TxnState::Failed(_)) {
            if let Some(r) = self.execute_planned_query(prepared, values.clone()).await {
                return r;
            }
        }
        if !values.is_empty() && self.runs_with_placeholders(stmt) {
            self.statement_params = Some(StatementParams {
                types: prepared.param_types.clone(),
                values,
                plans: prepared.generated.clone(),
            });
            let result = Box::pin(self.execute_statement(stmt.clone())).await;
            self.statement_params = None;
            return result;
        }
        let mut stmt = stmt.clone();
        params::substitute(&mut stmt, &values)?;
        Box::pin(self.execute_statement(stmt)).await
    }

    /// Refuses a prepared statement the acting role may not run. Its needs are walked once per
    /// role and catalog version (GRANT and REVOKE change the version), so the fast path and
    /// kept plans check at the cost of a comparison.
    fn check_prepared_privileges(&self, prepared: &Prepared, stmt: &Statement) -> SqlResult<()> {
        let (role, superuser) = crate::privileges::acting_role_oid(self)?;
        if superuser {
            return Ok(());
        }
        let version = self.engine.catalog.read().version;
        if *prepared.privileges_met.lock() == Some((role, version)) {
            return Ok(());
        }
        self.check_privileges(stmt)?;
        *prepared.privileges_met.lock() = Some((role, version));
        Ok(())
    }

    /// An Execute with more than a Sync behind it: the statements up to the Sync share one
    /// implicit transaction block (PostgreSQL's), opened here unless a block is open. BEGIN,
    /// COMMIT and ROLLBACK manage the transaction themselves and open none.
    pub fn continue_pipeline(&mut self, prepared: &Prepared) {
        let controls_transaction = matches!(
            prepared.stmt,
            None | Some(
                Statement::StartTransaction { .. }
                    | Statement::Commit { .. }
                    | Statement::Rollback {
                        savepoint: None,
                        ..
                    }
            )
        );
        if !controls_transaction {
            self.begin_implicit_block();
        }
    }

    /// Sync: an implicit block of the statements since the last Sync commits (or, if one of
    /// them failed, rolls back). The commit's error, if any, is the answer to the Sync.
    pub async fn sync(&mut self) -> SqlResult<()> {
        // A statement whose rows failed while they were sent fails the batch.
        self.settle_stream_failure();
        if !self.implicit_block || matches!(self.txn, TxnState::Idle) {
            return Ok(());
        }
        self.implicit_block = false;
        self.commit_block().await.map(|_| ())
    }

    /// Whether a prepared statement runs with its placeholders left in it, so that the query
    /// that finds its rows is the same text at every execution and its plan is kept (see
    /// `kept_plan::generated`): an UPDATE or DELETE of a row table, or a locking SELECT, where
    /// the placeholders are only in what the generated queries carry (not in RETURNING).
    pub(crate) fn runs_with_placeholders(&self, stmt: &Statement) -> bool {
        let target_is_row_table = |t: &ast::TableWithJoins| match &t.relation {
            ast::TableFactor::Table { name, .. } => {
                matches!(
                    dml::resolve_store(self, name),
                    Ok((_, dml::TableStore::Row(_)))
                )
            }
            _ => false,
        };
        match stmt {
            Statement::Update(u) => {
                u.returning.is_none() && u.or.is_none() && target_is_row_table(&u.table)
            }
            Statement::Delete(d) => {
                let tables = match &d.from {
                    ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
                };
                d.returning.is_none()
                    && d.tables.is_empty()
                    && d.limit.is_none()
                    && d.order_by.is_empty()
                    && tables.len() == 1
                    && target_is_row_table(&tables[0])
            }
            Statement::Query(q) => !q.locks.is_empty() && !dml::cte::has_modifying_cte(q),
            _ => false,
        }
    }

    /// Runs a prepared query on its kept plan, or on its logical plan; None when it has no plan
    /// (it was not planned at Parse) and the caller runs it the ordinary way.
    async fn execute_planned_query(
        &mut self,
        prepared: &Prepared,
        values: Vec<ScalarValue>,
    ) -> Option<SqlResult<StatementResult>> {
        let version = self.engine.catalog.read().version;
        let generation = self.settings.generation();
        let stale = prepared
            .plan
            .lock()
            .as_ref()
            .map(|p| p.catalog_version != version || p.settings_generation != generation)?;
        if stale {
            // DDL or a setting (search_path ...) changed since: plan again.
            let stmt = prepared.stmt.clone().expect("planned statements have one");
            match self.plan_with_snapshot(stmt).await {
                Ok(logical) => {
                    *prepared.plan.lock() = Some(PlannedQuery {
                        logical,
                        catalog_version: version,
                        settings_generation: generation,
                        kept: Kept::Unrun,
                    })
                }
                Err(e) => {
                    self.fail_block();
                    return Some(Err(e));
                }
            }
        }
        let (mut txn, implicit) = self.statement_transaction();
        let snapshot = self.engine.db.statement_snapshot(&mut txn);
        *self.scope.snapshot.lock() = snapshot;
        let mut cancel = self.cancel.take();
        let timeout_ms = self.settings.statement_timeout_ms();
        // Boxed for the reason given in `execute_sql`.
        let work = Box::pin(self.run_prepared_query(prepared, values));
        let result = interruptible(timeout_ms, &mut cancel, work).await;
        self.cancel = cancel;
        Some(self.finish_statement(txn, implicit, result).await)
    }

    /// The rows of a prepared query, from its kept plan when it has one free to run.
    async fn run_prepared_query(
        &self,
        prepared: &Prepared,
        values: Vec<ScalarValue>,
    ) -> SqlResult<StatementResult> {
        let (logical, kept) = {
            let mut planned = prepared.plan.lock();
            let planned = planned.as_mut().expect("planned before");
            let kept = match &planned.kept {
                Kept::Plan(k) => Some(Some(k.clone())),
                Kept::Untried => Some(None),
                Kept::Unrun => {
                    planned.kept = Kept::Untried;
                    None
                }
                Kept::Never => None,
            };
            (planned.logical.clone(), kept)
        };
        let columns = super::columns_of_plan(&logical);
        let physical = match kept {
            // Its last execution's rows may still be read (a suspended portal): that
            // execution owns the plan's parameter values, so this one plans anew.
            Some(Some(k)) if Arc::strong_count(&k) == 2 => {
                match kept_plan::convert_values(k.param_types(), &values) {
                    Some(converted) => {
                        let plan = k.instantiate(converted)?;
                        let inline = k.runs_inline(&plan);
                        Some((plan, inline, k.task_ctx(), Some(k)))
                    }
                    None => None,
                }
            }
            Some(Some(_)) => None,
            Some(None) => match kept_plan::keepable(&logical, &prepared.param_types) {
                Some(types) => match kept_plan::convert_values(&types, &values) {
                    Some(converted) => {
                        let built =
                            KeptPlan::build(&self.state, &logical, types, converted).await?;
                        if let Some(p) = prepared.plan.lock().as_mut() {
                            p.kept = match &built.kept {
                                Some(k) => Kept::Plan(k.clone()),
                                None => Kept::Never,
                            };
                        }
                        Some((built.physical, built.inline, built.task_ctx, built.kept))
                    }
                    None => None,
                },
                None => {
                    if let Some(p) = prepared.plan.lock().as_mut() {
                        p.kept = Kept::Never;
                    }
                    None
                }
            },
            None => None,
        };
        match physical {
            // The plan ends here, so the kept plan's parameter values are free again after it.
            Some((physical, true, task_ctx, _)) => Ok(StatementResult::Rows {
                columns,
                batches: query::run_small_plan(physical, task_ctx).await?,
                tag: "SELECT",
            }),
            Some((physical, false, task_ctx, lease)) => {
                let mut rows = RowStream::start(physical, task_ctx);
                if let Some(k) = lease {
                    rows.hold(k);
                }
                Ok(StatementResult::RowStream {
                    columns,
                    rows,
                    tag: "SELECT",
                })
            }
            None => {
                let values = conform_to_plan(&logical, values);
                let params = (!values.is_empty())
                    .then(|| ParamValues::List(values.into_iter().map(Into::into).collect()));
                self.run_plan(logical, params).await
            }
        }
    }

    /// The prepared statement's fast plan, re-resolved if the catalog changed since.
    fn fast_plan_of(&self, prepared: &Prepared, stmt: &Statement) -> Option<Arc<FastPlan>> {
        let version = self.engine.catalog.read().version;
        let mut fast = prepared.fast.lock();
        match fast.as_ref() {
            Some((plan, v)) if *v == version => return Some(plan.clone()),
            None => return None,
            Some(_) => {}
        }
        // The catalog changed: resolve again; the parameter types must still match.
        let plan = fastpath::plan(self, stmt, prepared.param_types.len())
            .filter(|p| {
                (0..prepared.param_types.len()).all(|i| {
                    p.param_type(i).map(crate::types::arrow_type).as_ref()
                        == Some(&prepared.param_types[i])
                })
            })
            .map(Arc::new);
        *fast = plan.clone().map(|p| (p, version));
        plan
    }
}

/// The bound values in the types the plan gave its placeholders, where those differ and a
/// value converts without loss: a parameter the client declared int2 in `$1 * 2` was planned
/// as the literal's bigint, and the arithmetic kernels do not mix widths.
fn conform_to_plan(plan: &LogicalPlan, values: Vec<ScalarValue>) -> Vec<ScalarValue> {
    let Ok(fields) = plan.get_parameter_fields() else {
        return values;
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let Some(Some(field)) = fields.get(&format!("${}", i + 1)) else {
                return v;
            };
            kept_plan::convert_values(
                std::slice::from_ref(field.data_type()),
                std::slice::from_ref(&v),
            )
            .and_then(|mut converted| converted.pop())
            .unwrap_or(v)
        })
        .collect()
}

/// Whether analyzing the statement again (at the same catalog version and settings) would give
/// what `prepared` holds: DML, which is planned at each execution, queries planned only for
/// Describe, and queries whose plan reads row tables only (a system catalog's or a sequence's
/// rows may be taken when the plan is made).
fn reanalysis_would_match(prepared: &Prepared) -> bool {
    match &prepared.stmt {
        Some(Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)) => true,
        Some(Statement::Query(_)) => match prepared.plan.lock().as_ref() {
            Some(planned) => reads_row_tables_only(&planned.logical),
            None => prepared.fast.lock().is_some() || prepared.described_only,
        },
        _ => false,
    }
}

fn reads_row_tables_only(plan: &LogicalPlan) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut row_tables_only = true;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            row_tables_only &=
                datafusion::datasource::source_as_provider(&scan.source).is_ok_and(|p| {
                    p.downcast_ref::<crate::query::provider::RowTableProvider>()
                        .is_some()
                });
        }
        Ok(if row_tables_only {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    row_tables_only
}

/// Statements Parse has analyzed, by their text and declared parameter types: a client that
/// does not name its statements (an unnamed statement of the extended protocol, as psycopg
/// sends before it prepares one, and after any ROLLBACK) parses the same text again and again,
/// and finds the first analysis and its kept plans here. Entries hold for one catalog version
/// and settings generation; when full the cache starts over.
#[derive(Default)]
pub(super) struct ParseCache {
    catalog_version: u64,
    settings_generation: u64,
    /// By text; each with the parameter types it was declared with.
    by_text: std::collections::HashMap<String, (Vec<u32>, Prepared)>,
}

/// Statements remembered per session.
const PARSE_CACHE_STATEMENTS: usize = 128;

impl ParseCache {
    fn get(
        &mut self,
        sql: &str,
        declared: &[u32],
        catalog_version: u64,
        settings_generation: u64,
    ) -> Option<Prepared> {
        if (self.catalog_version, self.settings_generation)
            != (catalog_version, settings_generation)
        {
            self.by_text.clear();
            return None;
        }
        match self.by_text.get(sql) {
            Some((types, prepared)) if types == declared => Some(prepared.share()),
            _ => None,
        }
    }

    fn insert(
        &mut self,
        prepared: &Prepared,
        declared: &[u32],
        catalog_version: u64,
        settings_generation: u64,
    ) {
        if (self.catalog_version, self.settings_generation)
            != (catalog_version, settings_generation)
            || self.by_text.len() >= PARSE_CACHE_STATEMENTS
        {
            self.by_text.clear();
            self.catalog_version = catalog_version;
            self.settings_generation = settings_generation;
        }
        self.by_text
            .insert(prepared.sql.clone(), (declared.to_vec(), prepared.share()));
    }
}

/// The parameter types Parse reports: as the client declared them, else as inferred from the
/// statement, else from a cast written on the placeholder, else text.
fn resolve_parameter_types(
    prepared: &mut Prepared,
    stmt: &Statement,
    count: usize,
    declared: &[u32],
    inferred: &[Option<ArrowType>],
    inferred_oids: &[Option<u32>],
) {
    let cast_types = params::placeholder_cast_types(stmt, count);
    for i in 0..count {
        let declared_oid = declared.get(i).copied().unwrap_or(0);
        let inferred_type = inferred.get(i).cloned().flatten();
        let (t, oid) = match (declared_oid, inferred_type, &cast_types[i]) {
            (0, Some(t), cast) => {
                // A cast names the type more precisely than its Arrow type (`$1::oid[]`).
                let cast_oid = cast.as_ref().filter(|(ct, _)| *ct == t).map(|(_, o)| *o);
                let oid = inferred_oids
                    .get(i)
                    .copied()
                    .flatten()
                    .or(cast_oid)
                    .unwrap_or_else(|| pg_oid_for_arrow(&t));
                (t, oid)
            }
            (0, None, Some((t, oid))) => (t.clone(), *oid),
            (0, None, None) => (ArrowType::Utf8, pg_oid_for_arrow(&ArrowType::Utf8)),
            (declared, _, _) => (params::arrow_type_for_oid(declared), declared),
        };
        prepared.param_types.push(t);
        prepared.param_oids.push(oid);
    }
}

/// The type Describe gives a parameter that takes the type of a column declared `oid`. A
/// varchar column compares as text in PostgreSQL (varchar has no operators of its own), so its
/// parameters are text, as the Arrow type already says.
fn described_oid(oid: u32) -> Option<u32> {
    (oid != crate::types::oid::VARCHAR).then_some(oid)
}

/// The statements a failed block accepts: those that end it, or roll back to a savepoint.
fn ends_block(stmt: &Statement) -> bool {
    matches!(stmt, Statement::Commit { .. } | Statement::Rollback { .. })
}
