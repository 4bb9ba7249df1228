//! CREATE INDEX (plain, unique, partial or on expressions), the unique indexes that back
//! PRIMARY KEY and UNIQUE constraints, and ALTER INDEX ... RENAME. Storage keeps the indexes on
//! plain columns; indexes on expressions and partial non-unique ones live in the catalog only.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Catalog, IndexDef, Oid, RelationKind, TableDef};
use shoal_storage::{RowTable, StorageError};

use super::{ident, index_predicate, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::on_blocking_thread;
use crate::session::{Session, StatementResult};

pub(super) fn unique_name(catalog: &Catalog, schema: &str, base: &str) -> String {
    if catalog.lookup(schema, base).is_none() {
        return base.to_string();
    }
    (1..)
        .map(|i| format!("{base}{i}"))
        .find(|n| catalog.lookup(schema, n).is_none())
        .expect("some name is free")
}

/// Creates a unique index (backing a PRIMARY KEY or UNIQUE constraint, or partial when
/// `predicate_sql` is set), checking existing rows.
pub(super) async fn create_unique_index(
    session: &Session,
    def: &TableDef,
    name: &str,
    columns: &[usize],
    primary: bool,
    predicate_sql: Option<String>,
) -> SqlResult<Oid> {
    let table = session
        .engine
        .db
        .table(def.oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&def.name))?;
    let index = IndexDef {
        oid: 0,
        schema: def.schema.clone(),
        name: name.to_string(),
        table: def.oid,
        columns: columns.to_vec(),
        key_sql: columns
            .iter()
            .map(|c| def.columns[*c].name.clone())
            .collect(),
        predicate_sql,
        unique: true,
        primary,
    };
    // Compiled before the catalog changes, so a clause that does not compile leaves no trace.
    index_predicate::storage_index(&index, def)?;
    let index_oid = {
        let mut catalog = session.engine.catalog.write();
        let oid = catalog.allocate_oid();
        catalog.insert_index(IndexDef {
            oid,
            ..index.clone()
        })?;
        oid
    };
    let storage_def = index_predicate::storage_index(
        &IndexDef {
            oid: index_oid,
            ..index
        },
        def,
    )?
    .expect("a unique index on columns is kept by storage");
    let built = build_index(table, storage_def).await;
    if !matches!(built, Ok(Ok(()))) {
        session.engine.catalog.write().remove_index(index_oid);
    }
    match built? {
        Ok(()) => Ok(index_oid),
        Err(StorageError::UniqueViolation {
            key_columns, key, ..
        }) => {
            let zone = session.settings.time_zone();
            Err(crate::dml::duplicate_index_key(
                &def,
                &name,
                &key_columns,
                &key,
                zone,
            ))
        }
        Err(other) => Err(other.into()),
    }
}

/// Builds a storage index over the table's rows on a blocking thread: over a big table that
/// takes seconds. The outer error is the blocking task's own failure, the inner one the build's.
async fn build_index(
    table: Arc<RowTable>,
    def: shoal_storage::IndexDef,
) -> SqlResult<Result<(), StorageError>> {
    on_blocking_thread("index build", move || table.add_index_within_memory(def)).await
}

/// One key part of CREATE INDEX: a column, or an expression with the name PostgreSQL derives
/// index names from (the function name, else "expr").
enum IndexKey {
    Column(String),
    Expression { sql: String, name_part: String },
}

fn index_key(c: &ast::IndexColumn) -> IndexKey {
    match &c.column.expr {
        ast::Expr::Identifier(i) => IndexKey::Column(ident(i)),
        ast::Expr::Function(f) => IndexKey::Expression {
            sql: c.column.expr.to_string(),
            name_part: split_name(&f.name).1,
        },
        other => IndexKey::Expression {
            sql: other.to_string(),
            name_part: "expr".into(),
        },
    }
}

pub(super) async fn create_index(
    session: &mut Session,
    ci: ast::CreateIndex,
) -> SqlResult<StatementResult> {
    let (def, table) = crate::dml::resolve_table(session, &ci.table_name)?;
    let keys: Vec<IndexKey> = ci.columns.iter().map(index_key).collect();
    let mut cols = Vec::new();
    for key in &keys {
        if let IndexKey::Column(n) = key {
            cols.push(
                def.column_index(n)
                    .ok_or_else(|| SqlError::undefined_column(n))?,
            );
        }
    }
    let key_sql: Vec<String> = keys
        .iter()
        .map(|k| match k {
            IndexKey::Column(n) => n.clone(),
            IndexKey::Expression { sql, .. } => sql.clone(),
        })
        .collect();
    let name_parts: Vec<&str> = keys
        .iter()
        .map(|k| match k {
            IndexKey::Column(n) => n.as_str(),
            IndexKey::Expression { name_part, .. } => name_part.as_str(),
        })
        .collect();
    let name = match &ci.name {
        Some(n) => split_name(n).1,
        None => unique_name(
            &session.engine.catalog.read(),
            &def.schema,
            &format!("{}_{}_idx", def.name, name_parts.join("_")),
        ),
    };
    if session
        .engine
        .catalog
        .read()
        .lookup(&def.schema, &name)
        .is_some()
    {
        if ci.if_not_exists {
            session.scope.notice(
                code::DUPLICATE_TABLE,
                format!("relation \"{name}\" already exists, skipping"),
            );
            return Ok(StatementResult::command("CREATE INDEX"));
        }
        return Err(SqlError::new(
            code::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let catalog_only = cols.len() < keys.len() || ci.predicate.is_some();
    if ci.unique {
        if cols.len() < keys.len() {
            return Err(SqlError::unsupported("unique indexes on expressions"));
        }
        let predicate_sql = ci.predicate.as_ref().map(|p| p.to_string());
        create_unique_index(session, &def, &name, &cols, false, predicate_sql).await?;
        return Ok(StatementResult::command("CREATE INDEX"));
    }
    let oid = {
        let mut catalog = session.engine.catalog.write();
        let oid = catalog.allocate_oid();
        catalog.insert_index(IndexDef {
            oid,
            schema: def.schema.clone(),
            name: name.clone(),
            table: def.oid,
            columns: if catalog_only { vec![] } else { cols.clone() },
            key_sql,
            predicate_sql: ci.predicate.as_ref().map(|p| p.to_string()),
            unique: false,
            primary: false,
        })?;
        oid
    };
    if !catalog_only {
        let def = shoal_storage::IndexDef {
            id: oid as u64,
            name,
            columns: cols,
            unique: false,
            predicate: None,
        };
        build_index(table, def).await??;
    }
    Ok(StatementResult::command("CREATE INDEX"))
}

/// ALTER INDEX ... RENAME TO (ALTER TABLE ... RENAME TO on an index comes here too).
pub(super) fn rename_index(
    session: &Session,
    name: &ast::ObjectName,
    new_name: &ast::ObjectName,
) -> SqlResult<StatementResult> {
    let (schema, rel) = split_name(name);
    let oid = match session.scope.resolve_relation(schema.as_deref(), &rel) {
        Some((_, RelationKind::Index, oid)) => oid,
        Some(_) => {
            return Err(SqlError::new(
                code::WRONG_OBJECT_TYPE,
                format!("\"{rel}\" is not an index"),
            ))
        }
        None => return Err(SqlError::undefined_table(&rel)),
    };
    let new = split_name(new_name).1;
    session.engine.catalog.write().rename_index(oid, &new)?;
    Ok(StatementResult::command("ALTER INDEX"))
}
