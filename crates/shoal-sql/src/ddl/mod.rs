//! DDL: every statement that changes the catalog, dispatched from `execute` to a module per
//! statement kind: CREATE TABLE (`table`), indexes (`index`), sequences (`sequence`), views
//! (`view`), schemas (`schema`), DROP of relations (`drop`) and TRUNCATE (`truncate`); ALTER
//! TABLE and table constraints live in `alter`. Catalog changes take effect immediately; ROLLBACK
//! undoes them (`undo`), as PostgreSQL's DDL is transactional. Storage tables and indexes are
//! created alongside their catalog entries under the same OIDs.

mod access_method;
mod alter;
mod alter_type;
mod comment;
mod drop;
mod extension;
pub use extension::AVAILABLE as AVAILABLE_EXTENSIONS;
mod enum_type;
mod index;
pub(crate) mod index_predicate;
mod owned;
pub(crate) mod role_membership;
mod roles;
mod schema;
mod sequence;
mod table;
mod truncate;
pub(crate) mod undo;
mod view;

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog_privileges::ObjectClass;
use shoal_storage::Transaction;

use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

use alter::alter_table;
pub use alter::columns_named_in;

/// Unquoted identifiers fold to lower case; quoted ones keep their case.
pub fn ident_of(s: &str) -> String {
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_lowercase()
    }
}

pub(crate) fn ident(i: &ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// (schema, name) of a possibly qualified object name.
pub fn split_name(name: &ast::ObjectName) -> (Option<String>, String) {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => ident(i),
            other => other.to_string(),
        })
        .collect();
    match parts.as_slice() {
        [n] => (None, n.clone()),
        [.., s, n] => (Some(s.clone()), n.clone()),
        [] => (None, String::new()),
    }
}

/// The storage type a column declared with `t` gets (user-defined enums included).
pub(crate) fn column_type(
    session: &Session,
    t: &ast::DataType,
) -> SqlResult<shoal_storage::types::DataType> {
    let search_path = session.scope.search_path.lock().clone();
    crate::types::column_type(t, &session.engine.catalog.read(), &search_path)
}

pub(crate) fn creation_target(
    session: &Session,
    name: &ast::ObjectName,
) -> SqlResult<(String, String)> {
    let (schema, rel) = split_name(name);
    let schema = match schema {
        Some(s) => s,
        None => session.scope.creation_schema().ok_or_else(|| {
            SqlError::new(
                code::INVALID_SCHEMA_NAME,
                "no schema has been selected to create in",
            )
        })?,
    };
    if !session.engine.catalog.read().schemas.contains_key(&schema) {
        return Err(SqlError::new(
            code::INVALID_SCHEMA_NAME,
            format!("schema \"{schema}\" does not exist"),
        ));
    }
    Ok((schema, rel))
}

/// Whether `stmt` can change the catalog: the caller keeps what it changed for ROLLBACK
/// (`undo::DdlMark`, taken around the statement whether it completes, fails or is canceled).
/// Not TRUNCATE: it deletes rows in its transaction and may wait for other transactions'
/// rows, which must not happen while holding the catalog statement lock.
pub fn changes_catalog(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::CreateTable(_)
            | Statement::CreateIndex(_)
            | Statement::CreateSchema { .. }
            | Statement::CreateSequence { .. }
            | Statement::CreateView(_)
            | Statement::Drop { .. }
            | Statement::AlterTable(_)
            | Statement::AlterIndex { .. }
            | Statement::CreateType { .. }
            | Statement::AlterType(_)
            | Statement::CreateRole(_)
            | Statement::AlterRole { .. }
            | Statement::Grant(_)
            | Statement::Revoke(_)
            | Statement::AlterSchema(_)
            | Statement::Comment { .. }
            | Statement::CreateExtension(_)
            | Statement::DropExtension(_)
            | Statement::CreateFunction(_)
            | Statement::DropFunction(_)
            | Statement::AlterFunction(_)
            | Statement::CreateProcedure { .. }
            | Statement::DropProcedure { .. }
            | Statement::CreateTrigger(_)
            | Statement::DropTrigger(_)
    ) || crate::session::role_membership_text(stmt).is_some()
        || crate::session::alter_sequence_text(stmt).is_some()
}

/// Runs one DDL statement (see `changes_catalog` for who keeps what it changed).
use shoal_storage::catalog_functions::RoutineKind;

pub async fn execute(
    session: &mut Session,
    txn: &mut Transaction,
    stmt: Statement,
) -> SqlResult<StatementResult> {
    if let Some(d) = &session.engine.durability {
        d.check_writable()?;
    }
    match stmt {
        Statement::CreateTable(ct) => table::create_table(session, txn, ct).await,
        Statement::CreateIndex(ci) => index::create_index(session, ci).await,
        Statement::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => schema::create_schema(session, &schema_name, if_not_exists),
        Statement::CreateSequence {
            if_not_exists,
            name,
            data_type,
            sequence_options,
            ..
        } => sequence::create_sequence(
            session,
            &name,
            if_not_exists,
            data_type.as_ref(),
            &sequence_options,
        ),
        Statement::CreateView(cv) => view::create_view(session, cv).await,
        Statement::CreateType {
            name,
            representation,
        } => enum_type::create_type(session, &name, representation.as_ref()),
        Statement::AlterType(at) => enum_type::alter_type(session, &at),
        Statement::Drop {
            object_type: ast::ObjectType::Role | ast::ObjectType::User,
            if_exists,
            names,
            ..
        } => roles::drop_roles(session, &names, if_exists),
        Statement::Drop {
            object_type: ast::ObjectType::Type,
            if_exists,
            names,
            cascade,
            ..
        } => enum_type::drop_types(session, if_exists, &names, cascade),
        Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => drop::drop_objects(session, object_type, if_exists, &names, cascade),
        Statement::AlterTable(ast::AlterTable {
            name, operations, ..
        }) if matches!(
            operations.as_slice(),
            [ast::AlterTableOperation::OwnerTo { .. }]
        ) =>
        {
            let [ast::AlterTableOperation::OwnerTo { new_owner }] = operations.as_slice() else {
                unreachable!("matched above");
            };
            alter_relation_owner(session, &name, new_owner)
        }
        Statement::AlterTable(at) => alter_table(session, txn, at).await,
        Statement::AlterSchema(ast::AlterSchema {
            name, operations, ..
        }) if matches!(
            operations.as_slice(),
            [ast::AlterSchemaOperation::OwnerTo { .. }]
        ) =>
        {
            let [ast::AlterSchemaOperation::OwnerTo { owner }] = operations.as_slice() else {
                unreachable!("matched above");
            };
            alter_schema_owner(session, &name, owner)
        }
        Statement::Set(_) if crate::session::role_membership_text(&stmt).is_some() => {
            let text = crate::session::role_membership_text(&stmt).expect("matched");
            let text = text.to_string();
            role_membership::run(session, &text)
        }
        Statement::Set(_) if crate::session::alter_sequence_text(&stmt).is_some() => {
            let text = crate::session::alter_sequence_text(&stmt).expect("matched");
            sequence::alter_sequence(session, &text.to_string())
        }
        Statement::Comment {
            object_type,
            object_name,
            comment,
            ..
        } => comment::comment_on(session, &object_type, &object_name, comment),
        Statement::Grant(g) => crate::privileges::grant::grant(session, &g),
        Statement::Revoke(r) => crate::privileges::grant::revoke(session, &r),
        Statement::AlterIndex {
            name,
            operation: ast::AlterIndexOperation::RenameIndex { index_name },
        } => index::rename_index(session, &name, &index_name),
        Statement::Truncate(t) => truncate::truncate(session, txn, &t).await,
        Statement::CreateExtension(c) => extension::create_extension(session, &c),
        Statement::DropExtension(d) => extension::drop_extension(session, &d),
        Statement::CreateRole(c) => roles::create_role(session, &c),
        Statement::CreateFunction(cf) => {
            crate::routines::define::create_function(session, cf, RoutineKind::Function).await
        }
        Statement::AlterFunction(af) => crate::routines::alter::alter_function(session, &af),
        Statement::DropFunction(df) => crate::routines::define::drop_functions(
            session,
            &df.func_desc,
            df.if_exists,
            RoutineKind::Function,
        ),
        ref create @ Statement::CreateProcedure { .. } => {
            let Some(cf) = crate::routines::statement::procedure_definition(create).cloned() else {
                return Err(SqlError::unsupported("this form of CREATE PROCEDURE"));
            };
            crate::routines::define::create_function(session, cf, RoutineKind::Procedure).await
        }
        Statement::CreateTrigger(ct) => crate::routines::trigger::create_trigger(session, ct).await,
        Statement::DropTrigger(dt) => crate::routines::trigger::drop_trigger(session, &dt),
        Statement::DropProcedure {
            if_exists,
            proc_desc,
            ..
        } => crate::routines::define::drop_functions(
            session,
            &proc_desc,
            if_exists,
            RoutineKind::Procedure,
        ),
        Statement::AlterRole { name, operation } => roles::alter_role(session, &name, &operation),
        other => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!(
                "statement not supported: {}",
                first_words(&other.to_string())
            ),
        )),
    }
}

/// `ALTER TABLE | VIEW | SEQUENCE name OWNER TO role`.
fn alter_relation_owner(
    session: &Session,
    name: &ast::ObjectName,
    owner: &ast::Owner,
) -> SqlResult<StatementResult> {
    let (schema, rel) = split_name(name);
    let (schema, kind, oid) = session
        .scope
        .resolve_relation(schema.as_deref(), &rel)
        .ok_or_else(|| SqlError::undefined_table(&rel))?;
    crate::privileges::grant::alter_owner(
        session,
        (ObjectClass::Relation, oid),
        Some(kind),
        &rel,
        Some(&schema),
        owner,
    )
}

/// `ALTER SCHEMA name OWNER TO role`.
fn alter_schema_owner(
    session: &Session,
    name: &ast::ObjectName,
    owner: &ast::Owner,
) -> SqlResult<StatementResult> {
    let schema = ident_of(&name.to_string());
    let oid = session
        .engine
        .catalog
        .read()
        .schemas
        .get(&schema)
        .map(|s| s.oid)
        .ok_or_else(|| {
            SqlError::new(
                code::INVALID_SCHEMA_NAME,
                format!("schema \"{schema}\" does not exist"),
            )
        })?;
    crate::privileges::grant::alter_owner(
        session,
        (ObjectClass::Schema, oid),
        None,
        &schema,
        None,
        owner,
    )
}

pub(crate) fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// Closes the row table `def` names to writers (`RowTable::close_for_rebuild`), then logs the
/// image of the table that replaces it, for a rebuild from the rows this statement read
/// (ALTER COLUMN TYPE, SET ACCESS METHOD). Fails with 55P03 when another transaction has
/// written to the table and not ended, or committed after this statement read it: the rebuilt
/// table would lose that change. If the log refuses the image, the old table is opened again.
/// A column table is not checked.
fn close_and_log_rebuild<'a>(
    session: &Session,
    def: &shoal_storage::catalog::TableDef,
    image: impl Iterator<Item = (u64, &'a [u8])>,
) -> SqlResult<()> {
    let closed = session.engine.db.table(def.oid as u64);
    if let Some(table) = &closed {
        if !table.close_for_rebuild(&session.scope.snapshot()) {
            return Err(rewrite_blocked(&def.name));
        }
    }
    let logged = session.engine.log_table_image(def.oid as u64, image);
    if let (Err(_), Some(table)) = (&logged, &closed) {
        table.reopen_after_failed_rebuild();
    }
    logged
}

/// 55P03, as a NOWAIT lock would give: another transaction has changes in `table` that an
/// ALTER TABLE rewriting its rows would lose or make unreplayable. PostgreSQL waits for such
/// writers; with no relation locks, Shoal cannot.
fn rewrite_blocked(table: &str) -> SqlError {
    SqlError::new(
        code::LOCK_NOT_AVAILABLE,
        format!("could not obtain lock on relation \"{table}\""),
    )
    .with_detail(
        "Another transaction has changes in the table that it has not committed, or committed \
         after this statement read the table; this ALTER TABLE rewrites the rows and does not \
         wait for it.",
    )
    .with_hint("Retry once the other transactions have ended.")
}
