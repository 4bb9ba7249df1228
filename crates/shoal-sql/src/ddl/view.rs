//! CREATE [OR REPLACE] VIEW: the query is planned once to check it and to name its columns, and
//! the relations it reads are recorded so that DROP can find the views that depend on them.

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog::{Oid, RelationKind, ViewDef};

use super::{creation_target, ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub(super) async fn create_view(
    session: &mut Session,
    cv: ast::CreateView,
) -> SqlResult<StatementResult> {
    let (schema, name) = creation_target(session, &cv.name)?;
    let existing = session.engine.catalog.read().lookup(&schema, &name);
    if let Some((kind, _)) = existing {
        if cv.if_not_exists {
            return Ok(StatementResult::command("CREATE VIEW"));
        }
        if !(cv.or_replace && kind == RelationKind::View) {
            return Err(SqlError::new(
                code::DUPLICATE_TABLE,
                format!("relation \"{name}\" already exists"),
            ));
        }
    }
    let plan = crate::query::plan_statement(
        session.state(),
        &session.scope,
        Statement::Query(cv.query.clone()),
    )
    .await?;
    let mut column_names: Vec<String> = plan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    for (i, c) in cv.columns.iter().enumerate() {
        if let Some(n) = column_names.get_mut(i) {
            *n = ident(&c.name);
        }
    }
    let depends_on = query_relations(session, &cv.query);
    let mut catalog = session.engine.catalog.write();
    // OR REPLACE swaps the definition only once the new query has planned.
    if let Some((RelationKind::View, old)) = existing {
        catalog.remove_view(old);
    }
    let oid = catalog.allocate_oid();
    catalog.insert_view(ViewDef {
        oid,
        schema,
        name,
        query_sql: cv.query.to_string(),
        column_names,
        depends_on,
    })?;
    Ok(StatementResult::command("CREATE VIEW"))
}

/// The tables and views a query names (CTE names that shadow nothing resolve to nothing).
fn query_relations(session: &Session, query: &ast::Query) -> Vec<Oid> {
    let mut found = Vec::new();
    let _ = ast::visit_relations(query, |name| {
        let (schema, rel) = split_name(name);
        if let Some((_, RelationKind::Table | RelationKind::View, oid)) =
            session.scope.resolve_relation(schema.as_deref(), &rel)
        {
            if !found.contains(&oid) {
                found.push(oid);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}
