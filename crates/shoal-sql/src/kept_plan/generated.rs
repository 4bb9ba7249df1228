//! Kept plans of the query a prepared UPDATE, DELETE or `SELECT ... FOR UPDATE` runs to find
//! its rows (`dml::modify::find_rows`).
//!
//! Such a statement is run with its placeholders left in it, and the SQL the DML code generates
//! from it keeps them: `SELECT t.__shoal_row_position, $1 FROM t WHERE t.k = $2`. That text is
//! the same at every execution, so its plan is kept with the prepared statement, as a prepared
//! query's is (see the module above): the first execution runs it planned the ordinary way
//! (with the values written into it), the second builds the kept plan, the later ones only
//! bind their values. Every other query the statement generates (the READ COMMITTED re-check
//! of a changed row, foreign key actions) is planned each time with the values written in.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use parking_lot::Mutex;

use super::{convert_values, keepable, KeptPlan};
use crate::error::{SqlError, SqlResult};
use crate::session::Session;

/// Generated queries kept per prepared statement: one is the rule, a few allow for plans made
/// under other settings; past that the slots start over.
const MAX_KEPT_PER_STATEMENT: usize = 4;

/// The bound parameters of a prepared statement running with its placeholders in place.
#[derive(Debug)]
pub struct StatementParams {
    /// The parameter types as Parse described them.
    pub types: Vec<ArrowType>,
    pub values: Vec<ScalarValue>,
    pub plans: Arc<GeneratedPlans>,
}

/// The kept plans of one prepared statement's generated queries, by their SQL text.
#[derive(Debug, Default)]
pub struct GeneratedPlans {
    by_sql: Mutex<HashMap<String, Generated>>,
}

#[derive(Debug, Clone)]
struct Generated {
    catalog_version: u64,
    settings_generation: u64,
    kept: Kept,
}

#[derive(Debug, Clone)]
enum Kept {
    /// Run once: the next execution builds the kept plan.
    Untried,
    Plan(Arc<KeptPlan>),
    /// Not keepable (see `keepable`): every execution plans it.
    Never,
}

impl GeneratedPlans {
    fn get(&self, sql: &str, catalog_version: u64, settings_generation: u64) -> Option<Kept> {
        let by_sql = self.by_sql.lock();
        let g = by_sql.get(sql)?;
        (g.catalog_version == catalog_version && g.settings_generation == settings_generation)
            .then(|| g.kept.clone())
    }

    /// Whether one of the queries has a kept plan now: for tests and diagnostics.
    pub fn any_kept(&self) -> bool {
        self.by_sql
            .lock()
            .values()
            .any(|g| matches!(g.kept, Kept::Plan(_)))
    }

    fn set(&self, sql: &str, catalog_version: u64, settings_generation: u64, kept: Kept) {
        let mut by_sql = self.by_sql.lock();
        if by_sql.len() >= MAX_KEPT_PER_STATEMENT && !by_sql.contains_key(sql) {
            by_sql.clear();
        }
        by_sql.insert(
            sql.to_string(),
            Generated {
                catalog_version,
                settings_generation,
                kept,
            },
        );
    }
}

/// Runs the generated query `sql`, whose placeholders are `params`', on its kept plan when it
/// has one, and builds that plan at its second execution.
pub async fn run(
    session: &Session,
    params: &StatementParams,
    sql: &str,
) -> SqlResult<Vec<RecordBatch>> {
    let catalog_version = session.engine.catalog.read().version;
    let generation = session.settings.generation();
    let plans = &params.plans;
    match plans.get(sql, catalog_version, generation) {
        None => {
            plans.set(sql, catalog_version, generation, Kept::Untried);
            run_substituted(session, sql, &params.values).await
        }
        Some(Kept::Never) => run_substituted(session, sql, &params.values).await,
        Some(Kept::Plan(kept)) => match convert_values(kept.param_types(), &params.values) {
            Some(values) => {
                let physical = kept.instantiate(values)?;
                let inline = kept.runs_inline(&physical);
                crate::query::collect_physical(physical, kept.task_ctx(), inline).await
            }
            None => run_substituted(session, sql, &params.values).await,
        },
        Some(Kept::Untried) => {
            let logical =
                crate::query::plan_statement(session.state(), &session.scope, parse_one(sql)?)
                    .await?;
            let Some(types) = keepable(&logical, &params.types) else {
                plans.set(sql, catalog_version, generation, Kept::Never);
                return run_substituted(session, sql, &params.values).await;
            };
            // Values that do not convert exactly leave the plan to be built by a later
            // execution whose values do.
            let Some(values) = convert_values(&types, &params.values) else {
                return run_substituted(session, sql, &params.values).await;
            };
            let built = KeptPlan::build(session.state(), &logical, types, values).await?;
            let kept = built.kept.map_or(Kept::Never, Kept::Plan);
            plans.set(sql, catalog_version, generation, kept);
            crate::query::collect_physical(built.physical, built.task_ctx, built.inline).await
        }
    }
}

/// Runs `sql` planned the ordinary way, with `values` written in for its placeholders.
pub async fn run_substituted(
    session: &Session,
    sql: &str,
    values: &[ScalarValue],
) -> SqlResult<Vec<RecordBatch>> {
    let mut stmt = parse_one(sql)?;
    crate::params::substitute(&mut stmt, values)?;
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    crate::query::execute_plan(session.state(), plan, None).await
}

fn parse_one(sql: &str) -> SqlResult<datafusion::sql::sqlparser::ast::Statement> {
    crate::session::parse_sql(sql)?
        .pop()
        .ok_or_else(|| SqlError::internal("empty generated query"))
}
