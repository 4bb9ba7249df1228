//! DROP TABLE, VIEW, INDEX and SEQUENCE (DROP SCHEMA is in `schema`). Every name is resolved
//! before anything is dropped, and the objects that depend on the targets (views, foreign keys
//! of other tables, constraints that own an index) either stop the DROP or, with CASCADE, go
//! with it, as in PostgreSQL.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{ConstraintKind, Oid, RelationKind};

use super::schema::drop_schemas;
use super::split_name;
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub(super) fn drop_objects(
    session: &mut Session,
    object_type: ast::ObjectType,
    if_exists: bool,
    names: &[ast::ObjectName],
    cascade: bool,
) -> SqlResult<StatementResult> {
    let (tag, wanted) = match object_type {
        ast::ObjectType::Table => ("DROP TABLE", Some(RelationKind::Table)),
        ast::ObjectType::View => ("DROP VIEW", Some(RelationKind::View)),
        ast::ObjectType::Index => ("DROP INDEX", Some(RelationKind::Index)),
        ast::ObjectType::Sequence => ("DROP SEQUENCE", Some(RelationKind::Sequence)),
        ast::ObjectType::Schema => ("DROP SCHEMA", None),
        other => return Err(SqlError::unsupported(format!("DROP {other}"))),
    };
    let Some(kind) = wanted else {
        drop_schemas(session, if_exists, names, cascade)?;
        return Ok(StatementResult::command(tag));
    };
    drop_relations(session, kind, if_exists, names, cascade)?;
    Ok(StatementResult::command(tag))
}

fn kind_name(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::Table => "table",
        RelationKind::View => "view",
        RelationKind::Index => "index",
        RelationKind::Sequence => "sequence",
    }
}

/// Resolves every name first, so a missing or wrong-kind name drops nothing.
fn drop_targets(
    session: &Session,
    kind: RelationKind,
    if_exists: bool,
    names: &[ast::ObjectName],
) -> SqlResult<Vec<Oid>> {
    let mut targets = Vec::new();
    for n in names {
        let (schema, rel) = split_name(n);
        match session.scope.resolve_relation(schema.as_deref(), &rel) {
            Some((_, k, oid)) if k == kind => targets.push(oid),
            Some((_, k, _)) => {
                let article = if kind == RelationKind::Index {
                    "an"
                } else {
                    "a"
                };
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!("\"{rel}\" is not {article} {}", kind_name(kind)),
                )
                .with_hint(format!(
                    "Use DROP {} to remove a {}.",
                    kind_name(k).to_uppercase(),
                    kind_name(k)
                )));
            }
            None if if_exists => session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("{} \"{rel}\" does not exist, skipping", kind_name(kind)),
            ),
            None => {
                // A missing index is an undefined object; the other kinds are relations.
                let sqlstate = match kind {
                    RelationKind::Index => code::UNDEFINED_OBJECT,
                    _ => code::UNDEFINED_TABLE,
                };
                return Err(SqlError::new(
                    sqlstate,
                    format!("{} \"{rel}\" does not exist", kind_name(kind)),
                ));
            }
        }
    }
    Ok(targets)
}

/// Views that depend on the targets but are not targets themselves: without CASCADE they make
/// the DROP fail, with CASCADE they are dropped too.
fn dependent_views_outside(
    session: &Session,
    kind: RelationKind,
    targets: &[Oid],
    cascade: bool,
) -> SqlResult<Vec<Oid>> {
    let catalog = session.engine.catalog.read();
    let mut dependents: Vec<Oid> = Vec::new();
    let mut details: Vec<String> = Vec::new();
    for &oid in targets {
        for view in catalog.dependent_views(oid) {
            if targets.contains(&view) || dependents.contains(&view) {
                continue;
            }
            dependents.push(view);
            let (_, view_name) = catalog.relation_name(view).unwrap_or_default();
            let (_, target_name) = catalog.relation_name(oid).unwrap_or_default();
            details.push(format!(
                "view {view_name} depends on {} {target_name}",
                kind_name(kind)
            ));
        }
    }
    if dependents.is_empty() || cascade {
        return Ok(dependents);
    }
    let (_, name) = catalog.relation_name(targets[0]).unwrap_or_default();
    Err(SqlError::new(
        code::DEPENDENT_OBJECTS_STILL_EXIST,
        format!(
            "cannot drop {} {name} because other objects depend on it",
            kind_name(kind)
        ),
    )
    .with_detail(details.join("\n"))
    .with_hint("Use DROP ... CASCADE to drop the dependent objects too."))
}

fn drop_relations(
    session: &Session,
    kind: RelationKind,
    if_exists: bool,
    names: &[ast::ObjectName],
    cascade: bool,
) -> SqlResult<()> {
    let targets = drop_targets(session, kind, if_exists, names)?;
    if kind == RelationKind::Table {
        for &oid in &targets {
            drop_referencing_foreign_keys(session, oid, &targets, cascade)?;
        }
    }
    let dependents = dependent_views_outside(session, kind, &targets, cascade)?;
    for view in dependents {
        session.engine.catalog.write().remove_view(view);
    }
    for oid in targets {
        match kind {
            RelationKind::Table => drop_table_by_oid(session, oid),
            RelationKind::Index => drop_index(session, oid)?,
            RelationKind::View => {
                session.engine.catalog.write().remove_view(oid);
            }
            RelationKind::Sequence => {
                session.engine.catalog.write().remove_sequence(oid);
            }
        }
    }
    Ok(())
}

/// Foreign keys of other tables that reference `oid` block DROP TABLE; CASCADE drops the
/// constraints (not the referencing tables), as PostgreSQL does.
fn drop_referencing_foreign_keys(
    session: &Session,
    oid: Oid,
    targets: &[Oid],
    cascade: bool,
) -> SqlResult<()> {
    let referencing = session.engine.catalog.read().referencing_foreign_keys(oid);
    let outside: Vec<_> = referencing
        .into_iter()
        .filter(|(t, _)| !targets.contains(&t.oid))
        .collect();
    if outside.is_empty() {
        return Ok(());
    }
    if !cascade {
        let name = session
            .engine
            .catalog
            .read()
            .tables
            .get(&oid)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        return Err(SqlError::new(
            code::DEPENDENT_OBJECTS_STILL_EXIST,
            format!("cannot drop table {name} because other objects depend on it"),
        )
        .with_detail(format!(
            "constraint {} on table {} depends on table {name}",
            outside[0].1.name, outside[0].0.name
        ))
        .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
    }
    for (child, c) in outside {
        let current = session
            .engine
            .catalog
            .read()
            .tables
            .get(&child.oid)
            .cloned();
        if let Some(current) = current {
            let mut d = (*current).clone();
            d.constraints.retain(|x| x.oid != c.oid);
            session.engine.catalog.write().replace_table(d)?;
        }
    }
    Ok(())
}

/// DROP INDEX: indexes that back a PRIMARY KEY or UNIQUE constraint go with the constraint.
fn drop_index(session: &Session, oid: Oid) -> SqlResult<()> {
    let Some(idx) = session.engine.catalog.read().indexes.get(&oid).cloned() else {
        return Ok(());
    };
    let owning = session
        .engine
        .catalog
        .read()
        .tables
        .get(&idx.table)
        .cloned();
    if let Some(t) = &owning {
        let backing = t.constraints.iter().find(|c| {
            matches!(&c.kind, ConstraintKind::PrimaryKey { index, .. }
                | ConstraintKind::Unique { index, .. } if *index == oid)
        });
        if let Some(c) = backing {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop index {} because constraint {} on table {} requires it",
                    idx.name, c.name, t.name
                ),
            )
            .with_hint(format!(
                "You can drop constraint {} on table {} instead.",
                c.name, t.name
            )));
        }
    }
    if let Some(table) = session.engine.db.table(idx.table as u64) {
        table.drop_index(oid as u64).ok();
    }
    session.engine.catalog.write().remove_index(oid);
    Ok(())
}

pub(super) fn drop_table_by_oid(session: &Session, oid: Oid) {
    session.engine.catalog.write().remove_table(oid);
    session.engine.db.drop_table(oid as u64);
}
