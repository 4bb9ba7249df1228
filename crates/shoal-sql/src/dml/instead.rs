//! INSERT, UPDATE and DELETE on a view with INSTEAD OF triggers, as PostgreSQL runs them: the
//! statement writes nothing itself. INSERT's rows (the view's columns, NULL where the
//! statement gives none), and the rows of the view that UPDATE and DELETE find (UPDATE's with
//! the new values as NEW), go one at a time to the view's INSTEAD OF ROW triggers, which do
//! the writing. A row counts as written when the triggers return it rather than NULL, and
//! RETURNING reads the rows as they returned them. The view's BEFORE and AFTER STATEMENT
//! triggers fire around it; a view without INSTEAD OF triggers for the statement is written
//! through to its table, whose triggers fire instead (as in PostgreSQL).

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog::{ColumnDef, RelationKind};
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};
use shoal_storage::types::{DataType, Value};
use shoal_storage::Transaction;

use super::{column_values, quote_ident, run_sql_query, table_alias};
use crate::error::{code, SqlError, SqlResult};
use crate::routines::trigger::Triggers;
use crate::session::{Session, StatementResult};

/// The view `name` names, when it has INSTEAD OF triggers for `event`: its triggers, its
/// qualified name and its own name.
async fn view_triggers(
    session: &Session,
    name: &ast::ObjectName,
    event: TriggerEvent,
) -> SqlResult<Option<(Triggers, String, String)>> {
    let (schema, rel) = crate::ddl::split_name(name);
    let Some((schema, RelationKind::View, oid)) =
        session.scope.resolve_relation(schema.as_deref(), &rel)
    else {
        return Ok(None);
    };
    let Some(view) = session.engine.catalog.read().views.get(&oid).cloned() else {
        return Ok(None);
    };
    if !view.triggers.iter().any(|t| t.fires_on(event)) {
        return Ok(None);
    }
    let qualified = format!("{}.{}", quote_ident(&schema), quote_ident(&view.name));
    let types = view_column_types(session, &qualified).await?;
    let columns = view.column_names.iter().cloned().zip(types).collect();
    Ok(Triggers::instead_of(&view, columns, event).map(|t| (t, qualified, view.name.clone())))
}

/// Whether a statement's target is a view whose INSTEAD OF triggers do its writes (Describe
/// has no table columns to type its parameters by).
pub fn writes_through_triggers(session: &Session, stmt: &Statement) -> bool {
    let (name, event) = match stmt {
        Statement::Insert(ins) => match &ins.table {
            ast::TableObject::TableName(name) => (name.clone(), TriggerEvent::Insert),
            _ => return false,
        },
        Statement::Update(upd) => match table_alias(&upd.table) {
            Ok((name, _)) => (name, TriggerEvent::Update),
            Err(_) => return false,
        },
        Statement::Delete(del) => match delete_target(del) {
            Some(name) => (name, TriggerEvent::Delete),
            None => return false,
        },
        _ => return false,
    };
    let (schema, rel) = crate::ddl::split_name(&name);
    let Some((_, RelationKind::View, oid)) =
        session.scope.resolve_relation(schema.as_deref(), &rel)
    else {
        return false;
    };
    let catalog = session.engine.catalog.read();
    catalog.views.get(&oid).is_some_and(|v| {
        v.triggers
            .iter()
            .any(|t| t.fires_on(event) && t.timing == TriggerTiming::InsteadOf)
    })
}

/// Describe's result columns for a statement `writes_through_triggers` says a view's triggers
/// write: its RETURNING over the view's columns.
pub async fn describe_returning(
    session: &Session,
    stmt: &Statement,
) -> SqlResult<Option<Vec<crate::session::ResultColumn>>> {
    let (name, alias, event, returning) = match stmt {
        Statement::Insert(ins) => match &ins.table {
            ast::TableObject::TableName(name) => (
                name.clone(),
                ins.table_alias
                    .as_ref()
                    .map(|a| super::ident_name(&a.alias)),
                TriggerEvent::Insert,
                &ins.returning,
            ),
            _ => return Ok(None),
        },
        Statement::Update(upd) => {
            let (name, alias) = table_alias(&upd.table)?;
            (name, alias, TriggerEvent::Update, &upd.returning)
        }
        Statement::Delete(del) => {
            let tables = match &del.from {
                ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
            };
            let Some(Ok((name, alias))) = tables.first().map(table_alias) else {
                return Ok(None);
            };
            (name, alias, TriggerEvent::Delete, &del.returning)
        }
        _ => return Ok(None),
    };
    let Some(items) = returning else {
        return Ok(None);
    };
    let Some((triggers, _, view_name)) = view_triggers(session, &name, event).await? else {
        return Ok(None);
    };
    let columns = view_columns(&triggers);
    let alias = alias.unwrap_or(view_name);
    Ok(Some(
        super::returning_columns(session, &columns, &alias, items, &[]).await?,
    ))
}

/// The view's columns, as a table's are described (for RETURNING).
fn view_columns(triggers: &Triggers) -> Vec<ColumnDef> {
    triggers
        .columns()
        .iter()
        .map(|(name, data_type)| ColumnDef {
            name: name.clone(),
            data_type: data_type.clone(),
            not_null: false,
            default_sql: None,
            identity: None,
        })
        .collect()
}

/// The storage types of a view's columns, from its planned query's fields.
async fn view_column_types(session: &Session, qualified: &str) -> SqlResult<Vec<DataType>> {
    let stmt = crate::session::parse_sql(&format!("SELECT * FROM {qualified}"))?
        .pop()
        .ok_or_else(|| SqlError::internal("a view's query gave no statement"))?;
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    Ok(plan
        .schema()
        .fields()
        .iter()
        .map(|f| crate::types::storage_type_of_field(f))
        .collect())
}

/// The end of a statement on a view with INSTEAD OF triggers: the AFTER STATEMENT triggers,
/// then the statement's result. RETURNING is computed over the rows as the INSTEAD OF
/// triggers returned them, as PostgreSQL does.
async fn finish(
    session: &mut Session,
    txn: &mut Transaction,
    triggers: &Triggers,
    alias: &str,
    tag: &'static str,
    written: Vec<Vec<Value>>,
    returning: Option<&[ast::SelectItem]>,
) -> SqlResult<StatementResult> {
    triggers
        .statement(session, txn, TriggerTiming::After)
        .await?;
    let columns = view_columns(triggers);
    let oid = (tag == "INSERT").then_some(0);
    super::returning::finish_dml(session, &columns, alias, tag, written, returning, oid).await
}

pub async fn insert(
    session: &mut Session,
    txn: &mut Transaction,
    ins: &ast::Insert,
) -> SqlResult<Option<StatementResult>> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Ok(None);
    };
    let Some((triggers, _, view_name)) = view_triggers(session, name, TriggerEvent::Insert).await?
    else {
        return Ok(None);
    };
    if ins.on.is_some() {
        return Err(SqlError::unsupported(
            "ON CONFLICT on a view with INSTEAD OF triggers",
        ));
    }
    let columns = triggers.columns().to_vec();
    let targets: Vec<usize> = match ins.columns.is_empty() {
        true => (0..columns.len()).collect(),
        false => ins
            .columns
            .iter()
            .map(|c| {
                let c = crate::ddl::split_name(c).1;
                columns.iter().position(|(n, _)| *n == c).ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("column \"{c}\" of relation \"{}\" does not exist", name),
                    )
                })
            })
            .collect::<SqlResult<_>>()?,
    };
    let Some(source) = ins.source.as_deref() else {
        return Err(SqlError::unsupported(
            "INSERT ... DEFAULT VALUES on a view with INSTEAD OF triggers",
        ));
    };
    // A view column has no default: DEFAULT is NULL.
    let mut source = source.clone();
    if let ast::SetExpr::Values(values) = source.body.as_mut() {
        for row in &mut values.rows {
            for e in &mut row.content {
                if super::is_default_keyword(e) {
                    *e = ast::Expr::value(ast::Value::Null);
                }
            }
        }
    }
    triggers
        .statement(session, txn, TriggerTiming::Before)
        .await?;
    let batches = run_sql_query(session, &source.to_string()).await?;
    let zone = session.settings.time_zone().clone();
    let mut written = Vec::new();
    for batch in &batches {
        if batch.num_columns() < targets.len() {
            return Err(SqlError::syntax(
                "INSERT has more target columns than expressions",
            ));
        }
        let given = converted(batch, 0, &targets, &columns, &zone)?;
        for r in 0..batch.num_rows() {
            let mut new = vec![Value::Null; columns.len()];
            for (i, col) in targets.iter().enumerate() {
                new[*col] = given[i][r].clone();
            }
            if let Some(row) = triggers
                .instead_of_row(session, txn, None, Some(new))
                .await?
            {
                written.push(row);
            }
        }
    }
    let alias = ins
        .table_alias
        .as_ref()
        .map(|a| super::ident_name(&a.alias))
        .unwrap_or(view_name);
    let returning = ins.returning.as_deref();
    let done = finish(
        session, txn, &triggers, &alias, "INSERT", written, returning,
    );
    Ok(Some(done.await?))
}

pub async fn update(
    session: &mut Session,
    txn: &mut Transaction,
    upd: &ast::Update,
) -> SqlResult<Option<StatementResult>> {
    let Ok((name, alias)) = table_alias(&upd.table) else {
        return Ok(None);
    };
    let Some((triggers, qualified, view_name)) =
        view_triggers(session, &name, TriggerEvent::Update).await?
    else {
        return Ok(None);
    };
    if upd.from.is_some() {
        return Err(SqlError::unsupported(
            "UPDATE ... FROM on a view with INSTEAD OF triggers",
        ));
    }
    let columns = triggers.columns().to_vec();
    let mut assigned = Vec::new();
    let mut values = Vec::new();
    for a in &upd.assignments {
        let ast::AssignmentTarget::ColumnName(target) = &a.target else {
            return Err(SqlError::unsupported(
                "UPDATE of a view with a column tuple",
            ));
        };
        let c = crate::ddl::split_name(target).1;
        let at = columns.iter().position(|(n, _)| *n == c).ok_or_else(|| {
            SqlError::new(
                code::UNDEFINED_COLUMN,
                format!("column \"{c}\" of relation \"{name}\" does not exist"),
            )
        })?;
        assigned.push(at);
        values.push(match super::is_default_keyword(&a.value) {
            true => "NULL".to_string(),
            false => a.value.to_string(),
        });
    }
    let alias = alias.unwrap_or(view_name);
    triggers
        .statement(session, txn, TriggerTiming::Before)
        .await?;
    let batches = view_rows(session, &qualified, &alias, &values, upd.selection.as_ref()).await?;
    let zone = session.settings.time_zone().clone();
    let all: Vec<usize> = (0..columns.len()).collect();
    let mut written = Vec::new();
    for batch in &batches {
        let old_rows = converted(batch, 0, &all, &columns, &zone)?;
        let new_values = converted(batch, columns.len(), &assigned, &columns, &zone)?;
        for r in 0..batch.num_rows() {
            let old: Vec<Value> = old_rows.iter().map(|c| c[r].clone()).collect();
            let mut new = old.clone();
            for (i, col) in assigned.iter().enumerate() {
                new[*col] = new_values[i][r].clone();
            }
            if let Some(row) = triggers
                .instead_of_row(session, txn, Some(&old), Some(new))
                .await?
            {
                written.push(row);
            }
        }
    }
    let returning = upd.returning.as_deref();
    let done = finish(
        session, txn, &triggers, &alias, "UPDATE", written, returning,
    );
    Ok(Some(done.await?))
}

fn delete_target(del: &ast::Delete) -> Option<ast::ObjectName> {
    let tables = match &del.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    table_alias(tables.first()?).ok().map(|(name, _)| name)
}

pub async fn delete(
    session: &mut Session,
    txn: &mut Transaction,
    del: &ast::Delete,
) -> SqlResult<Option<StatementResult>> {
    let tables = match &del.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    let Some(Ok((name, alias))) = tables.first().map(table_alias) else {
        return Ok(None);
    };
    let Some((triggers, qualified, view_name)) =
        view_triggers(session, &name, TriggerEvent::Delete).await?
    else {
        return Ok(None);
    };
    if tables.len() > 1 || del.using.is_some() {
        return Err(SqlError::unsupported(
            "DELETE ... USING on a view with INSTEAD OF triggers",
        ));
    }
    let columns = triggers.columns().to_vec();
    let alias = alias.unwrap_or(view_name);
    triggers
        .statement(session, txn, TriggerTiming::Before)
        .await?;
    let batches = view_rows(session, &qualified, &alias, &[], del.selection.as_ref()).await?;
    let zone = session.settings.time_zone().clone();
    let all: Vec<usize> = (0..columns.len()).collect();
    let mut written = Vec::new();
    for batch in &batches {
        let old_rows = converted(batch, 0, &all, &columns, &zone)?;
        for r in 0..batch.num_rows() {
            let old: Vec<Value> = old_rows.iter().map(|c| c[r].clone()).collect();
            // RETURNING shows the view's row that was deleted.
            if triggers
                .instead_of_row(session, txn, Some(&old), None)
                .await?
                .is_some()
            {
                written.push(old);
            }
        }
    }
    let returning = del.returning.as_deref();
    let done = finish(
        session, txn, &triggers, &alias, "DELETE", written, returning,
    );
    Ok(Some(done.await?))
}

/// The view's rows that `selection` finds: all its columns, then `extra` (SET values).
async fn view_rows(
    session: &Session,
    qualified: &str,
    alias: &str,
    extra: &[String],
    selection: Option<&ast::Expr>,
) -> SqlResult<Vec<RecordBatch>> {
    let alias = quote_ident(alias);
    let mut sql = format!("SELECT {alias}.*");
    for (i, e) in extra.iter().enumerate() {
        sql.push_str(&format!(", {e} AS \"__shoal_set_{i}\""));
    }
    sql.push_str(&format!(" FROM {qualified} AS {alias}"));
    if let Some(s) = selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    run_sql_query(session, &sql).await
}

/// The values of batch columns `first ..` as the view's columns `targets` (one batch column
/// each, in order), converted as a write to those columns converts them.
fn converted(
    batch: &RecordBatch,
    first: usize,
    targets: &[usize],
    columns: &[(String, DataType)],
    zone: &crate::timezone::TimeZone,
) -> SqlResult<Vec<Vec<Value>>> {
    targets
        .iter()
        .enumerate()
        .map(|(i, col)| {
            let (name, t) = &columns[*col];
            column_values(batch.column(first + i), t, name, zone)
        })
        .collect()
}
