//! The statements that need a transaction, routed to the code that runs them: queries (with
//! their data-modifying CTEs and row locks), INSERT/UPDATE/DELETE, COPY, EXPLAIN and
//! maintenance commands here, everything else to `ddl`. Before routing, the statement's
//! snapshot is installed in the plan scope, where the table providers read it.

use datafusion::common::ParamValues;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::Transaction;

use super::{columns_of_schema, rows_batch, Session, StatementResult};
use crate::error::{SqlError, SqlResult};
use crate::{ddl, dml, query};

impl Session {
    /// Everything that needs a transaction: queries, DML, DDL, COPY.
    pub(super) async fn run_in_transaction(
        &mut self,
        txn: &mut Transaction,
        mut stmt: Statement,
    ) -> SqlResult<StatementResult> {
        // Calls of PL/pgSQL functions (and of SQL functions that write) run first, in the
        // statement's transaction; their values take their place (see `routines::call`).
        if matches!(
            stmt,
            Statement::Query(_)
                | Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
        ) {
            if let Some(result) =
                crate::routines::call::evaluate_calls(self, txn, &mut stmt, true).await?
            {
                return Ok(result);
            }
        }
        let snapshot = self.engine.db.statement_snapshot(txn);
        *self.scope.snapshot.lock() = snapshot;
        if let Some(text) = super::set_show::set_constraints_text(&stmt) {
            let in_block = self.statement_in_block();
            crate::constraints::set_constraints(self, txn, text, in_block).await?;
            return Ok(StatementResult::command("SET CONSTRAINTS"));
        }
        match stmt {
            Statement::Query(q) => self.run_query(txn, *q).await,
            Statement::Call(f) => crate::routines::statement::run_call(self, txn, f).await,
            Statement::Declare { mut stmts } if stmts.len() == 1 => {
                self.declare_cursor(txn, stmts.pop().expect("one")).await
            }
            Statement::Insert(insert) => dml::insert(self, txn, insert).await,
            Statement::Update(update) => dml::update(self, txn, update).await,
            Statement::Delete(delete) => dml::delete(self, txn, delete).await,
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                values,
            } => {
                crate::copy::start(
                    self,
                    txn,
                    source,
                    to,
                    target,
                    options,
                    legacy_options,
                    values,
                )
                .await
            }
            Statement::Explain {
                statement, analyze, ..
            } => self.explain(*statement, analyze).await,
            Statement::Vacuum(_) => {
                // As in PostgreSQL: VACUUM is not transactional (it frees dead versions for
                // good), so a block's ROLLBACK could not undo it.
                if self.statement_in_block() {
                    return Err(SqlError::new(
                        crate::error::code::ACTIVE_SQL_TRANSACTION,
                        "VACUUM cannot run inside a transaction block",
                    ));
                }
                // On a blocking thread: it walks every table and may wait for the commit
                // watermark, which would stall the other connections of this one's thread.
                let db = self.engine.db.clone();
                super::on_blocking_thread("VACUUM", move || {
                    // Column tables: merge small segments first, so that GC drops the old ones.
                    crate::dml::compact::merge_small_segments(
                        &db,
                        crate::dml::compact::VACUUM_MERGE_SEGMENTS,
                    )?;
                    db.vacuum();
                    crate::allocator::release_free_memory();
                    Ok::<_, SqlError>(())
                })
                .await??;
                Ok(StatementResult::command("VACUUM"))
            }
            Statement::Analyze(_) => Ok(StatementResult::command("ANALYZE")),
            other => {
                let result = ddl::execute(self, txn, other).await;
                // Index builds and table rewrites free their sort and copy buffers now; give
                // them back (DDL is rare, so the allocator's walk costs nothing that matters).
                crate::allocator::release_free_memory();
                result
            }
        }
    }

    pub fn state(&self) -> &SessionState {
        &self.state
    }

    async fn run_query(
        &mut self,
        txn: &mut Transaction,
        mut q: ast::Query,
    ) -> SqlResult<StatementResult> {
        if dml::cte::has_modifying_cte(&q) {
            dml::cte::run_modifying_ctes(self, txn, &mut q).await?;
        }
        if !q.locks.is_empty() {
            return dml::select_for_update(self, txn, q).await;
        }
        let plan =
            query::plan_statement(&self.state, &self.scope, Statement::Query(Box::new(q))).await?;
        self.run_plan(plan, None).await
    }

    pub async fn run_plan(
        &self,
        plan: LogicalPlan,
        params: Option<ParamValues>,
    ) -> SqlResult<StatementResult> {
        let columns = super::columns_of_plan(&plan);
        // set_config(), pg_notify() and transaction-level advisory locks act as the rows are
        // made, and their effects are settled when the statement's transaction ends: such a
        // query runs to the end before it answers.
        if query::calls_transaction_scoped_function(&plan) {
            let batches = query::execute_plan(&self.state, plan, params).await?;
            return Ok(StatementResult::Rows {
                columns,
                batches,
                tag: "SELECT",
            });
        }
        let rows = query::stream_plan(&self.state, plan, params).await?;
        Ok(StatementResult::RowStream {
            columns,
            rows,
            tag: "SELECT",
        })
    }

    async fn explain(&mut self, stmt: Statement, analyze: bool) -> SqlResult<StatementResult> {
        let plan = query::plan_statement(&self.state, &self.scope, stmt).await?;
        let builder = datafusion::logical_expr::LogicalPlanBuilder::from(plan);
        let explained = if analyze {
            builder.explain_option_format(
                datafusion::logical_expr::ExplainOption::default().with_analyze(true),
            )?
        } else {
            builder.explain(false, false)?
        }
        .build()?;
        let batches = query::execute_plan(&self.state, explained, None).await?;
        // PostgreSQL returns one text column named "QUERY PLAN".
        let zone = self.settings.time_zone().clone();
        let mut lines = Vec::new();
        for b in &batches {
            let col = b.column(b.num_columns() - 1);
            for row in 0..b.num_rows() {
                let mut s = String::new();
                crate::pgtext::format_array_value(col.as_ref(), row, &zone, &mut s);
                lines.extend(s.lines().map(|l| vec![l.to_string()]));
            }
        }
        let batch = rows_batch(&["QUERY PLAN"], lines);
        Ok(StatementResult::Rows {
            columns: columns_of_schema(&batch.schema()),
            batches: vec![batch],
            tag: "EXPLAIN",
        })
    }
}
