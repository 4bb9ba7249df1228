//! The general query path: statements DataFusion plans and executes over Shoal's tables.
//! `scope` carries the statement's snapshot to the table providers, `schema` maps names to
//! tables, `rewrite` bridges PostgreSQL-only syntax, `pg_catalog`/`information_schema`/
//! `functions` supply what clients expect, `arithmetic` gives numbers PostgreSQL's types and
//! overflow errors, and `errors` maps failures to SQLSTATEs.

pub mod access_path;
pub mod arithmetic;
pub mod array_agg;
pub mod array_compare;
pub mod array_literal;
pub mod array_parameters;
pub mod backend_functions;
pub mod backup_functions;
mod bit_casts;
pub mod bpchar;
pub mod builtins;
mod bytea;
pub mod checks;
pub mod civil_time;
pub mod column_names;
pub mod column_origin;
pub mod column_provider;
pub mod correlated;
pub mod count_row;
pub mod datetime;
pub mod datetime_construct;
pub mod errors;
pub mod expr_pass;
pub mod filter_first;
pub mod float_math;
pub mod format;
pub mod functions;
pub mod group_by_key;
mod group_control;
pub mod in_list;
pub mod in_subquery;
pub mod index_join;
pub mod index_order;
pub mod information_schema;
pub mod integer_gcd;
pub mod join_subqueries;
pub mod join_using;
pub mod json;
mod lateral_srf;
pub mod math_domain;
pub mod natural_join;
pub mod outer_join_constants;
pub mod pg_catalog;
pub mod pg_dump_queries;
pub mod pg_errors;
mod pg_keywords;
pub mod pg_literals;
mod plain_results;
pub mod privilege_functions;
pub mod provider;
pub mod psql_describe;
pub mod query_memory;
pub mod query_runtime;
pub mod rewrite;
mod row_compare;
pub mod row_scan_exec;
pub mod row_stream;
pub mod scalar_rows;
pub mod scalar_subquery;
pub mod schema;
pub mod scope;
pub(crate) mod select_srf;
pub mod set_all;
pub mod shoal_memory;
pub mod subquery_nullable;
pub mod text_codes;
pub mod text_input;
pub mod text_types;
pub mod topk_partitions;
pub mod typecheck;
pub mod unknown_literals;
pub mod value_order;
pub mod values_types;
pub mod view_definition;
pub mod wal_functions;
pub mod wall_clock;
pub mod window_types;

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::Dialect;
use datafusion::common::ParamValues;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast;

use crate::error::SqlResult;
use schema::{ShoalCatalogList, DATABASE_NAME, SEARCH_PATH_SCHEMA};
use scope::PlanScope;

/// Rows per Arrow batch in scans and execution.
pub const BATCH_SIZE_ROWS: usize = 8192;

pub fn new_session_state(scope: Arc<PlanScope>) -> SessionState {
    let mut config = SessionConfig::new()
        .with_default_catalog_and_schema(DATABASE_NAME, SEARCH_PATH_SCHEMA)
        .with_create_default_catalog_and_schema(false)
        .with_information_schema(false)
        .with_target_partitions(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
        )
        .with_batch_size(BATCH_SIZE_ROWS);
    {
        let opts = config.options_mut();
        opts.sql_parser.dialect = Dialect::PostgreSQL;
        opts.sql_parser.parse_float_as_decimal = true;
        opts.sql_parser.enable_ident_normalization = true;
        opts.sql_parser.map_string_types_to_utf8view = false;
        opts.sql_parser.default_null_ordering = "nulls_max".to_string();
        opts.execution.time_zone = Some("+00:00".to_string());
        // A dynamic filter is state that one run of a plan leaves for the next, and kept plans
        // (`kept_plan`) run again; scans of in-memory rows gain little from them.
        // Each kind is its own setting (the umbrella one sets them only when set by name).
        opts.optimizer.enable_dynamic_filter_pushdown = false;
        opts.optimizer.enable_topk_dynamic_filter_pushdown = false;
        opts.optimizer.enable_join_dynamic_filter_pushdown = false;
        opts.optimizer.enable_aggregate_dynamic_filter_pushdown = false;
    }
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(query_memory::runtime_env())
        .with_default_features()
        // DataFusion's analyzer rules, with Shoal's typing of string literals before its
        // type coercion.
        .with_analyzer_rules(vec![
            Arc::new(unknown_literals::UnknownLiterals),
            Arc::new(crate::numeric::plan::NumericSemantics),
            Arc::new(datafusion::optimizer::analyzer::resolve_grouping_function::ResolveGroupingFunction::new()),
            Arc::new(datafusion::optimizer::analyzer::type_coercion::TypeCoercion::new()),
            Arc::new(join_subqueries::JoinSubqueries),
        ])
        .with_catalog_list(Arc::new(ShoalCatalogList::new(scope.clone())))
        // Appended after DataFusion's own rules.
        .with_optimizer_rule(Arc::new(text_codes::GroupOnTextCodes))
        .with_physical_optimizer_rule(Arc::new(topk_partitions::TopKWholeKey))
        .with_physical_optimizer_rule(Arc::new(filter_first::FilterFirst))
        .with_physical_optimizer_rule(Arc::new(index_join::IndexLookupJoin))
        .with_physical_optimizer_rule(Arc::new(index_order::IndexOrder));
    // Before DataFusion's own planners, which take `@>` and `<@` over lists for array_has_all
    // with other NULL rules.
    if let Some(planners) = builder.expr_planners() {
        planners.insert(0, Arc::new(array_compare::ArrayOperators));
    }
    let mut state = builder.build();
    // First: it wraps DataFusion's own string functions, which Shoal's wrappers then wrap.
    plain_results::register(&mut state);
    let zone = scope.time_zone.clone();
    let engine = scope.engine.clone();
    crate::advisory::register(&mut state, &scope);
    backend_functions::register(&mut state, &scope);
    wal_functions::register(&mut state, &scope);
    backup_functions::register(&mut state, &scope);
    group_control::register(&mut state, &scope);
    bit_casts::register(&mut state);
    crate::routines::register(&mut state);
    state
        .register_udf(Arc::new(crate::statement_stats::views::reset_function(
            &scope,
        )))
        .expect("function registration cannot fail");
    state
        .register_udf(Arc::new(unknown_literals::SiblingTyped::udf()))
        .expect("function registration cannot fail");
    privilege_functions::register(&mut state, &scope);
    functions::register(&mut state, scope);
    builtins::register(&mut state, &zone);
    math_domain::register(&mut state);
    float_math::register(&mut state);
    crate::interval::functions::register(&mut state);
    crate::numeric::kernels::register(&mut state);
    // After builtins and math_domain: it wraps their functions.
    crate::numeric::functions::register(&mut state);
    bytea::register(&mut state);
    bpchar::register(&mut state);
    json::register(&mut state);
    array_compare::register(&mut state);
    array_agg::register(&mut state);
    state.register_udtf("pg_get_keywords", Arc::new(pg_keywords::PgGetKeywords));
    scalar_rows::register(&mut state);
    value_order::register(&mut state, &engine);
    state
        .register_expr_planner(Arc::new(typecheck::OperatorTypeCheck {
            text_out: state
                .udf("pg_text_out")
                .expect("builtins register pg_text_out"),
        }))
        .expect("registering an expression planner cannot fail");
    // Appended, so it runs after DataFusion's type coercion.
    state.add_analyzer_rule(Arc::new(arithmetic::PgArithmetic));
    state.add_analyzer_rule(Arc::new(wall_clock::WallClock::new(zone.clone())));
    state.add_analyzer_rule(Arc::new(text_input::TextInput::new(zone)));
    state.add_analyzer_rule(Arc::new(crate::interval::order::IntervalOrder::default()));
    state.add_analyzer_rule(Arc::new(text_types::BpcharAsText));
    state.add_analyzer_rule(Arc::new(in_list::InListOverColumns));
    state.add_analyzer_rule(Arc::new(value_order::ValueOrder::new(engine)));
    state
}

/// Plans a statement (after PostgreSQL rewrites) into a DataFusion logical plan.
pub async fn plan_statement(
    state: &SessionState,
    scope: &PlanScope,
    mut stmt: ast::Statement,
) -> SqlResult<LogicalPlan> {
    rewrite::rewrite_statement(&mut stmt, scope)?;
    scope.wants_tableoid.store(
        pg_catalog::names_tableoid(&stmt),
        std::sync::atomic::Ordering::Relaxed,
    );
    checks::check_statement(&stmt, &|name| {
        state.udaf(name).is_ok() || state.udwf(name).is_ok()
    })?;
    let unknown_calls = checks::unknown_function_signatures(&stmt, &|name| {
        state.scalar_functions().contains_key(name)
            || state.aggregate_functions().contains_key(name)
            || state.window_functions().contains_key(name)
    });
    let plan = state
        .statement_to_plan(DfStatement::Statement(Box::new(stmt)))
        .await
        .map_err(|e| with_argument_types(pg_errors::from_datafusion(e), &unknown_calls))?;
    let plan = array_parameters::type_any_parameters(plan).map_err(pg_errors::from_datafusion)?;
    // Before the pass below, which turns the EXISTS this one makes outside filters into counts.
    let plan = in_subquery::three_valued_in_subqueries(plan).map_err(pg_errors::from_datafusion)?;
    let plan = scalar_subquery::aggregate_correlated_scalar_subqueries(plan)
        .map_err(pg_errors::from_datafusion)?;
    let plan =
        subquery_nullable::nullable_scalar_subqueries(plan).map_err(pg_errors::from_datafusion)?;
    let plan = outer_join_constants::unfold_nullable_constants(plan)
        .map_err(pg_errors::from_datafusion)?;
    let plan = set_all::count_copies(plan).map_err(pg_errors::from_datafusion)?;
    typecheck::check_plan(&plan)?;
    let plan = arithmetic::type_for_postgres(plan).map_err(pg_errors::from_datafusion)?;
    // The analyzer's type coercion decides the final column types (a UNION of integer and
    // numeric is numeric). Running it here makes the schema that Describe reports the schema
    // that execution produces, and type errors surface at Parse, as in PostgreSQL.
    state
        .analyzer()
        .execute_and_check(plan, state.config_options(), |_, _| {})
        .map_err(pg_errors::from_datafusion)
}

/// Runs a logical plan to completion with the given parameter values.
pub async fn execute_plan(
    state: &SessionState,
    plan: LogicalPlan,
    params: Option<ParamValues>,
) -> SqlResult<Vec<RecordBatch>> {
    let physical = physical_plan(state, plan, params).await?;
    collect_physical(physical, state.task_ctx(), false).await
}

/// Runs a physical plan to the end: on the caller's thread when `inline` (see
/// `run_small_plan`), else on the query runtime.
pub async fn collect_physical(
    plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    task_ctx: Arc<datafusion::execution::TaskContext>,
    inline: bool,
) -> SqlResult<Vec<RecordBatch>> {
    if inline {
        return run_small_plan(plan, task_ctx).await;
    }
    let batches = query_runtime::run(datafusion::physical_plan::collect(plan, task_ctx))
        .await
        .map_err(|e| crate::error::SqlError::internal(format!("query task failed: {e}")))?;
    batches.map_err(pg_errors::from_datafusion)
}

/// Runs a small physical plan (one whose scans read a few rows: see `kept_plan`) to the end on
/// the caller's thread, without the query runtime's hand-offs. A panic fails the statement.
pub async fn run_small_plan(
    plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    task_ctx: Arc<datafusion::execution::TaskContext>,
) -> SqlResult<Vec<RecordBatch>> {
    use futures::FutureExt;
    let run = datafusion::physical_plan::collect(plan, task_ctx);
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(batches) => batches.map_err(pg_errors::from_datafusion),
        Err(panic) => Err(row_stream::query_panicked(panic.as_ref())),
    }
}

/// Plans `plan` physically, which takes the scans' rows under the statement's snapshot, and
/// starts it: the rows follow as the client reads them (see `row_stream`).
pub async fn stream_plan(
    state: &SessionState,
    plan: LogicalPlan,
    params: Option<ParamValues>,
) -> SqlResult<row_stream::RowStream> {
    let physical = physical_plan(state, plan, params).await?;
    Ok(row_stream::RowStream::start(physical, state.task_ctx()))
}

/// The physical plan of `plan` with its parameters bound. Making it runs the scans' reads.
pub(crate) async fn physical_plan(
    state: &SessionState,
    plan: LogicalPlan,
    params: Option<ParamValues>,
) -> SqlResult<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    let plan = match params {
        Some(p) => plan.with_param_values(p)?,
        None => plan,
    };
    match correlated::prepare(state, plan).map_err(pg_errors::from_datafusion)? {
        correlated::Prepared::Optimized(optimized) => state
            .query_planner()
            .create_physical_plan(&optimized, state)
            .await
            .map_err(pg_errors::from_datafusion),
        correlated::Prepared::PerRow(plan) => state
            .create_physical_plan(&plan)
            .await
            .map_err(pg_errors::from_datafusion),
    }
}

/// Functions whose effect belongs to the statement's transaction and is settled when it ends:
/// set_config()'s setting changes, pg_notify()'s notifications, the transaction-level advisory
/// locks. A query calling one must make all its rows before its transaction ends (a streamed
/// autocommit query would otherwise call it after the commit, and its effect would land in
/// the next transaction).
pub const TRANSACTION_SCOPED_FUNCTIONS: &[&str] = &[
    "set_config",
    "pg_notify",
    "pg_advisory_xact_lock",
    "pg_advisory_xact_lock_shared",
    "pg_try_advisory_xact_lock",
    "pg_try_advisory_xact_lock_shared",
];

/// Whether the plan calls one of `TRANSACTION_SCOPED_FUNCTIONS`.
pub fn calls_transaction_scoped_function(plan: &LogicalPlan) -> bool {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                found |= matches!(e, datafusion::logical_expr::Expr::ScalarFunction(f)
                    if TRANSACTION_SCOPED_FUNCTIONS.contains(&f.name()));
                Ok(if found {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })
        })
    });
    found
}

/// Plans and runs SQL text that Shoal generated itself (DML target queries, RETURNING, column
/// defaults, constraint checks) with the statement's snapshot, and returns all its batches.
pub async fn run_generated_sql(
    state: &SessionState,
    scope: &PlanScope,
    sql: &str,
) -> SqlResult<Vec<RecordBatch>> {
    let stmt = crate::session::parse_sql(sql)?
        .pop()
        .ok_or_else(|| crate::error::SqlError::internal("empty generated query"))?;
    let plan = plan_statement(state, scope, stmt).await?;
    execute_plan(state, plan, None).await
}

/// "function f does not exist" names the argument types, as PostgreSQL's message does, when
/// they are known from the call (see `checks::unknown_function_signatures`).
fn with_argument_types(mut e: crate::error::SqlError, calls: &[String]) -> crate::error::SqlError {
    if e.code != crate::error::code::UNDEFINED_FUNCTION {
        return e;
    }
    let Some(name) = e
        .message
        .strip_prefix("function ")
        .and_then(|m| m.strip_suffix(" does not exist"))
    else {
        return e;
    };
    if name.contains('(') {
        return e;
    }
    let prefix = format!("{name}(");
    if let Some(signature) = calls.iter().find(|c| c.starts_with(&prefix)) {
        e.message = format!("function {signature} does not exist");
    }
    e
}
