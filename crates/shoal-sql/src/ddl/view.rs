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
    let query = qualified_relations(session, &cv.query);
    let mut catalog = session.engine.catalog.write();
    // OR REPLACE swaps the definition only once the new query has planned; the view keeps
    // its triggers.
    let mut triggers = Vec::new();
    if let Some((RelationKind::View, old)) = existing {
        if let Some(old) = catalog.remove_view(old) {
            triggers = old.triggers.clone();
        }
    }
    let oid = catalog.allocate_oid();
    catalog.insert_view(ViewDef {
        oid,
        schema,
        name,
        query_sql: query.to_string(),
        column_names,
        depends_on,
        triggers,
    })?;
    Ok(StatementResult::command("CREATE VIEW"))
}

/// `query` with every relation it reads named with its schema, so that the view reads the
/// same relations whatever the search path when it runs (PostgreSQL binds them at CREATE
/// VIEW). Names of the query's CTEs are left alone.
fn qualified_relations(session: &Session, query: &ast::Query) -> ast::Query {
    let mut ctes = CteNames(Vec::new());
    let _ = ast::Visit::visit(query, &mut ctes);
    let mut query = query.clone();
    let _ = ast::visit_relations_mut(&mut query, |name| {
        let (schema, rel) = split_name(name);
        if schema.is_none() && !ctes.0.contains(&rel) {
            if let Some((schema, _, _)) = session.scope.resolve_relation(None, &rel) {
                *name = ast::ObjectName(vec![
                    ast::ObjectNamePart::Identifier(name_ident(&schema)),
                    ast::ObjectNamePart::Identifier(name_ident(&rel)),
                ]);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    query
}

/// An identifier for `name`, quoted only where PostgreSQL would need it.
fn name_ident(name: &str) -> ast::Ident {
    match crate::query::functions::quote_ident_if_needed(name).starts_with('"') {
        true => ast::Ident::with_quote('"', name),
        false => ast::Ident::new(name),
    }
}

/// The names of the CTEs anywhere in a query.
struct CteNames(Vec<String>);

impl ast::Visitor for CteNames {
    type Break = ();

    fn pre_visit_query(&mut self, query: &ast::Query) -> std::ops::ControlFlow<()> {
        if let Some(with) = &query.with {
            self.0
                .extend(with.cte_tables.iter().map(|c| ident(&c.alias.name)));
        }
        std::ops::ControlFlow::Continue(())
    }
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
