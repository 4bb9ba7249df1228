//! DDL: CREATE/DROP of tables, indexes, sequences, views and schemas, and TRUNCATE; ALTER TABLE
//! and table constraints live in `alter`. Catalog changes take effect immediately and are not
//! undone by ROLLBACK (a documented gap: PostgreSQL's DDL is transactional). Storage tables and
//! indexes are created alongside their catalog entries under the same OIDs.

mod access_method;
mod alter;
mod alter_type;
pub(crate) mod index_predicate;

use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog::{
    AccessMethod, Catalog, ColumnDef, ConstraintKind, Identity, IndexDef, Oid, RelationKind,
    SequenceDef, SequenceState, TableDef, ViewDef,
};
use shoal_storage::types::DataType;
use shoal_storage::{StorageError, Transaction};

use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};
use crate::types::{from_sql_type, is_serial_type};

use alter::{
    add_constraint, alter_table, pending_from_table_constraint, referential_action,
    PendingConstraint,
};

/// Unquoted identifiers fold to lower case; quoted ones keep their case.
pub fn ident_of(s: &str) -> String {
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_lowercase()
    }
}

pub(super) fn ident(i: &ast::Ident) -> String {
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

fn creation_target(session: &Session, name: &ast::ObjectName) -> SqlResult<(String, String)> {
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

pub async fn execute(
    session: &mut Session,
    txn: &mut Transaction,
    stmt: Statement,
) -> SqlResult<StatementResult> {
    if let Some(d) = &session.engine.durability {
        d.check_writable()?;
    }
    match stmt {
        Statement::CreateTable(ct) => create_table(session, txn, ct).await,
        Statement::CreateIndex(ci) => create_index(session, ci),
        Statement::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => {
            let name = match &schema_name {
                ast::SchemaName::Simple(n) | ast::SchemaName::NamedAuthorization(n, _) => {
                    split_name(n).1
                }
                ast::SchemaName::UnnamedAuthorization(i) => ident(i),
            };
            match session.engine.catalog.write().create_schema(&name) {
                Ok(_) => Ok(StatementResult::command("CREATE SCHEMA")),
                Err(_) if if_not_exists => Ok(StatementResult::command("CREATE SCHEMA")),
                Err(e) => Err(e.into()),
            }
        }
        Statement::CreateSequence {
            if_not_exists,
            name,
            data_type,
            sequence_options,
            ..
        } => {
            let (schema, rel) = creation_target(session, &name)?;
            if if_not_exists
                && session
                    .engine
                    .catalog
                    .read()
                    .lookup(&schema, &rel)
                    .is_some()
            {
                return Ok(StatementResult::command("CREATE SEQUENCE"));
            }
            let t = match &data_type {
                Some(t) => from_sql_type(t)?,
                None => DataType::Int64,
            };
            let mut catalog = session.engine.catalog.write();
            let def = sequence_def(&mut catalog, &schema, &rel, t, &sequence_options, None)?;
            catalog.insert_sequence(def)?;
            Ok(StatementResult::command("CREATE SEQUENCE"))
        }
        Statement::CreateView(cv) => create_view(session, cv).await,
        Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => drop_objects(session, object_type, if_exists, &names, cascade),
        Statement::AlterTable(at) => alter_table(session, txn, at).await,
        Statement::AlterIndex {
            name,
            operation: ast::AlterIndexOperation::RenameIndex { index_name },
        } => rename_index(session, &name, &index_name),
        Statement::Truncate(t) => truncate(session, txn, &t).await,
        Statement::CreateExtension(_) => Ok(StatementResult::command("CREATE EXTENSION")),
        other => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!(
                "statement not supported: {}",
                first_words(&other.to_string())
            ),
        )),
    }
}

/// TRUNCATE deletes every visible row inside the transaction, so it is undone by ROLLBACK as in
/// PostgreSQL; storage's instant `truncate` is not transactional. CASCADE extends the set with
/// every table that references it; RESTART IDENTITY resets the tables' owned sequences (not
/// undone by ROLLBACK, a gap: PostgreSQL's reset is transactional).
async fn truncate(
    session: &mut Session,
    txn: &mut Transaction,
    t: &ast::Truncate,
) -> SqlResult<StatementResult> {
    let mut tables = Vec::new();
    let mut column_tables = Vec::new();
    for target in &t.table_names {
        match crate::dml::resolve_store(session, &target.name)? {
            (def, crate::dml::TableStore::Row(table)) => tables.push((def, table)),
            (def, crate::dml::TableStore::Column(table)) => column_tables.push((def, table)),
        }
    }
    for (def, table) in &column_tables {
        crate::dml::column::delete_all_rows(session, txn, def, table).await?;
    }
    let cascade = matches!(t.cascade, Some(ast::CascadeOption::Cascade));
    let mut i = 0;
    while i < tables.len() {
        let def = tables[i].0.clone();
        let referencing = session
            .engine
            .catalog
            .read()
            .referencing_foreign_keys(def.oid);
        for (child, _) in referencing {
            if tables.iter().any(|(d, _)| d.oid == child.oid) {
                continue;
            }
            if !cascade {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    "cannot truncate a table referenced in a foreign key constraint",
                )
                .with_detail(format!(
                    "Table \"{}\" references \"{}\".",
                    child.name, def.name
                ))
                .with_hint(format!(
                    "Truncate table \"{}\" at the same time, or use TRUNCATE ... CASCADE.",
                    child.name
                )));
            }
            let table = session
                .engine
                .db
                .table(child.oid as u64)
                .ok_or_else(|| SqlError::undefined_table(&child.name))?;
            tables.push((child, table));
        }
        i += 1;
    }
    for (_, table) in &tables {
        delete_all_rows(session, txn, table).await?;
    }
    if matches!(t.identity, Some(ast::TruncateIdentityOption::Restart)) {
        let catalog = session.engine.catalog.read();
        for seq in catalog.sequences.values() {
            let truncated = |owner: Oid| {
                tables.iter().any(|(d, _)| d.oid == owner)
                    || column_tables.iter().any(|(d, _)| d.oid == owner)
            };
            if matches!(seq.owned_by, Some((owner, _)) if truncated(owner)) {
                seq.set_value(seq.start, false);
                session.engine.log_sequence(seq);
            }
        }
    }
    Ok(StatementResult::command("TRUNCATE TABLE"))
}

/// Deletes every row visible to the statement, waiting for rows other transactions hold.
async fn delete_all_rows(
    session: &Session,
    txn: &mut Transaction,
    table: &shoal_storage::RowTable,
) -> SqlResult<()> {
    let snap = session.scope.snapshot();
    let mut rows = Vec::new();
    table.scan(&snap, |row, _| {
        rows.push(row.clone());
        true
    });
    for row in rows {
        let mut row_snap = snap.clone();
        loop {
            match table.delete(txn, &row, &row_snap) {
                Ok(shoal_storage::WriteOutcome::Done) => break,
                Ok(shoal_storage::WriteOutcome::Changed { newest: None, .. }) => break,
                Ok(shoal_storage::WriteOutcome::Changed {
                    newest_snapshot, ..
                }) => row_snap = newest_snapshot,
                Err(StorageError::WouldBlock { holder }) => {
                    session.wait_for_row_holder(txn, holder).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// ALTER INDEX ... RENAME TO (ALTER TABLE ... RENAME TO on an index comes here too).
fn rename_index(
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

fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn expr_i64(e: &ast::Expr) -> SqlResult<i64> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n
                .parse()
                .map_err(|_| SqlError::syntax(format!("invalid number {n}"))),
            _ => Err(SqlError::syntax("expected a number")),
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => Ok(-expr_i64(expr)?),
        _ => Err(SqlError::syntax("expected a number")),
    }
}

fn sequence_def(
    catalog: &mut Catalog,
    schema: &str,
    name: &str,
    t: DataType,
    options: &[ast::SequenceOptions],
    owned_by: Option<(Oid, usize)>,
) -> SqlResult<SequenceDef> {
    let type_max = match t {
        DataType::Int16 => i16::MAX as i64,
        DataType::Int32 => i32::MAX as i64,
        _ => i64::MAX,
    };
    let mut increment = 1i64;
    let mut min: Option<i64> = None;
    let mut max: Option<i64> = None;
    let mut start: Option<i64> = None;
    let mut cycle = false;
    for o in options {
        match o {
            ast::SequenceOptions::IncrementBy(e, _) => increment = expr_i64(e)?,
            ast::SequenceOptions::MinValue(Some(e)) => min = Some(expr_i64(e)?),
            ast::SequenceOptions::MaxValue(Some(e)) => max = Some(expr_i64(e)?),
            ast::SequenceOptions::StartWith(e, _) => start = Some(expr_i64(e)?),
            ast::SequenceOptions::Cycle(c) => cycle = !*c,
            _ => {}
        }
    }
    if increment == 0 {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "INCREMENT must not be zero",
        ));
    }
    let min_value = min.unwrap_or(if increment > 0 { 1 } else { -type_max });
    let max_value = max.unwrap_or(if increment > 0 { type_max } else { -1 });
    let start = start.unwrap_or(if increment > 0 { min_value } else { max_value });
    Ok(SequenceDef {
        oid: catalog.allocate_oid(),
        schema: schema.to_string(),
        name: name.to_string(),
        data_type: t,
        start,
        increment,
        min_value,
        max_value,
        cycle,
        owned_by,
        state: Arc::new(SequenceState {
            last_value: AtomicI64::new(start),
            is_called: AtomicBool::new(false),
        }),
    })
}

async fn create_table(
    session: &mut Session,
    txn: &mut Transaction,
    ct: ast::CreateTable,
) -> SqlResult<StatementResult> {
    let (schema, name) = creation_target(session, &ct.name)?;
    if session
        .engine
        .catalog
        .read()
        .lookup(&schema, &name)
        .is_some()
    {
        if ct.if_not_exists {
            return Ok(StatementResult::command("CREATE TABLE"));
        }
        return Err(SqlError::new(
            code::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    if ct.temporary {
        // Shoal keeps every table in memory; a temporary table is a normal one for now.
    }
    let mut columns: Vec<ColumnDef> = Vec::new();
    let mut pending: Vec<PendingConstraint> = Vec::new();
    let mut serials: Vec<(usize, Option<Identity>, Vec<ast::SequenceOptions>)> = Vec::new();
    let mut as_query_types = None;
    if let Some(q) = &ct.query {
        // CREATE TABLE AS: columns from the query's result.
        let plan = crate::query::plan_statement(
            session.state(),
            &session.scope,
            Statement::Query(q.clone()),
        )
        .await?;
        let fields: Vec<(String, datafusion::arrow::datatypes::DataType)> = plan
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        as_query_types = Some(plan);
        for (i, (n, t)) in fields.into_iter().enumerate() {
            let name = ct.columns.get(i).map(|c| ident(&c.name)).unwrap_or(n);
            columns.push(ColumnDef {
                name,
                data_type: crate::params::storage_type_for_arrow(&t),
                not_null: false,
                default_sql: None,
                identity: None,
            });
        }
    }
    for (i, c) in ct.columns.iter().enumerate() {
        if as_query_types.is_some() {
            break;
        }
        let col_name = ident(&c.name);
        if columns.iter().any(|x| x.name == col_name) {
            return Err(SqlError::new(
                code::DUPLICATE_COLUMN,
                format!("column \"{col_name}\" specified more than once"),
            ));
        }
        let data_type = from_sql_type(&c.data_type)?;
        let mut col = ColumnDef {
            name: col_name.clone(),
            data_type,
            not_null: false,
            default_sql: None,
            identity: None,
        };
        if is_serial_type(&c.data_type) {
            col.not_null = true;
            serials.push((i, None, vec![]));
        }
        for opt in &c.options {
            match &opt.option {
                ast::ColumnOption::NotNull => col.not_null = true,
                ast::ColumnOption::Null => {}
                ast::ColumnOption::Default(e) => col.default_sql = Some(e.to_string()),
                // sqlparser keeps `CONSTRAINT name` either on the option or on the inner
                // constraint, depending on the clause.
                ast::ColumnOption::PrimaryKey(pk) => {
                    col.not_null = true;
                    pending.push(PendingConstraint::Primary {
                        name: opt.name.as_ref().or(pk.name.as_ref()).map(ident),
                        columns: vec![col_name.clone()],
                    });
                }
                ast::ColumnOption::Unique(u) => pending.push(PendingConstraint::Unique {
                    name: opt.name.as_ref().or(u.name.as_ref()).map(ident),
                    columns: vec![col_name.clone()],
                }),
                ast::ColumnOption::Check(ch) => pending.push(PendingConstraint::Check {
                    name: opt.name.as_ref().map(ident).or(ch.name.as_ref().map(ident)),
                    expr: ch.expr.to_string(),
                    column: Some(col_name.clone()),
                }),
                ast::ColumnOption::ForeignKey(fk) => pending.push(PendingConstraint::Foreign {
                    name: opt.name.as_ref().or(fk.name.as_ref()).map(ident),
                    columns: vec![col_name.clone()],
                    table: fk.foreign_table.clone(),
                    ref_columns: fk.referred_columns.iter().map(ident).collect(),
                    on_delete: referential_action(&fk.on_delete),
                    on_update: referential_action(&fk.on_update),
                }),
                ast::ColumnOption::Generated {
                    generated_as,
                    sequence_options,
                    generation_expr: None,
                    ..
                } => {
                    col.not_null = true;
                    let always = matches!(generated_as, ast::GeneratedAs::Always);
                    serials.push((
                        i,
                        Some(Identity {
                            always,
                            sequence: 0,
                        }),
                        sequence_options.clone().unwrap_or_default(),
                    ));
                }
                ast::ColumnOption::Generated { .. } => {
                    return Err(SqlError::unsupported("generated columns"))
                }
                ast::ColumnOption::Identity(_) => serials.push((
                    i,
                    Some(Identity {
                        always: false,
                        sequence: 0,
                    }),
                    vec![],
                )),
                ast::ColumnOption::Collation(_) | ast::ColumnOption::Comment(_) => {}
                other => return Err(SqlError::unsupported(format!("column option {other}"))),
            }
        }
        columns.push(col);
    }
    for c in &ct.constraints {
        pending.push(pending_from_table_constraint(c)?);
    }
    if columns.is_empty() && ct.query.is_none() && ct.columns.is_empty() {
        // PostgreSQL allows zero-column tables.
    }
    let access_method = table_access_method(&ct)?;
    let options: Vec<String> = match &ct.table_options {
        ast::CreateTableOptions::With(opts) => opts
            .iter()
            .map(|o| o.to_string().replace(' ', ""))
            .collect(),
        _ => vec![],
    };
    let oid = {
        let mut catalog = session.engine.catalog.write();
        let oid = catalog.allocate_oid();
        for (col, identity, seq_opts) in &serials {
            let seq_name = format!("{name}_{}_seq", columns[*col].name);
            let t = columns[*col].data_type.clone();
            let seq = sequence_def(
                &mut catalog,
                &schema,
                &seq_name,
                t,
                seq_opts,
                Some((oid, *col)),
            )?;
            let seq_oid = seq.oid;
            let qualified = if schema == "public" {
                seq_name.clone()
            } else {
                format!("{schema}.{seq_name}")
            };
            catalog.insert_sequence(seq)?;
            columns[*col].default_sql = Some(format!("nextval('{qualified}')"));
            columns[*col].identity = identity.clone().map(|mut id| {
                id.sequence = seq_oid;
                id
            });
        }
        let def = TableDef {
            oid,
            schema: schema.clone(),
            name: name.clone(),
            columns,
            constraints: vec![],
            access_method,
            options,
        };
        catalog.insert_table(def.clone())?;
        let db = &session.engine.db;
        match access_method {
            AccessMethod::Heap => {
                db.create_table(oid as u64, def.column_types());
            }
            AccessMethod::Columnar => {
                db.create_column_table(oid as u64, crate::query::provider::table_schema(&def));
            }
        }
        oid
    };
    for p in pending {
        if let Err(e) = add_constraint(session, oid, p) {
            drop_table_by_oid(session, oid);
            return Err(e);
        }
    }
    if let Some(q) = ct.query {
        let def = session
            .engine
            .catalog
            .read()
            .tables
            .get(&oid)
            .cloned()
            .expect("just created");
        let insert = format!("INSERT INTO {} {}", crate::dml::qualified(&def), q);
        let stmt = crate::session::parse_sql(&insert)?
            .pop()
            .expect("one statement");
        let Statement::Insert(ins) = stmt else {
            unreachable!("built an INSERT")
        };
        let r = crate::dml::insert(session, txn, ins).await;
        match r {
            Ok(StatementResult::Command { rows, .. }) => {
                return Ok(StatementResult::Command {
                    tag: "SELECT".into(),
                    rows,
                    oid: None,
                })
            }
            Ok(_) => {}
            Err(e) => {
                drop_table_by_oid(session, oid);
                return Err(e);
            }
        }
    }
    Ok(StatementResult::command("CREATE TABLE"))
}

/// `USING heap | columnar` (see `parse`, which moves the clause into `hive_formats`).
fn table_access_method(ct: &ast::CreateTable) -> SqlResult<AccessMethod> {
    let Some(ast::HiveIOFormat::Using { format }) =
        ct.hive_formats.as_ref().and_then(|h| h.storage.as_ref())
    else {
        return Ok(AccessMethod::Heap);
    };
    access_method::access_method_named(&ident(format))
}

fn drop_table_by_oid(session: &Session, oid: Oid) {
    session.engine.catalog.write().remove_table(oid);
    session.engine.db.drop_table(oid as u64);
}

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
pub(super) fn create_unique_index(
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
    if let Err(e) = table.add_index(storage_def) {
        session.engine.catalog.write().remove_index(index_oid);
        return Err(match e {
            StorageError::UniqueViolation {
                key_columns, key, ..
            } => {
                let zone = session.settings.time_zone();
                crate::dml::duplicate_index_key(&def, &name, &key_columns, &key, zone)
            }
            other => other.into(),
        });
    }
    Ok(index_oid)
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

fn create_index(session: &mut Session, ci: ast::CreateIndex) -> SqlResult<StatementResult> {
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
        create_unique_index(session, &def, &name, &cols, false, predicate_sql)?;
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
        table.add_index(shoal_storage::IndexDef {
            id: oid as u64,
            name,
            columns: cols,
            unique: false,
            predicate: None,
        })?;
    }
    Ok(StatementResult::command("CREATE INDEX"))
}

async fn create_view(session: &mut Session, cv: ast::CreateView) -> SqlResult<StatementResult> {
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

fn drop_objects(
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

/// DROP SCHEMA; CASCADE drops the tables, views and sequences in it.
fn drop_schemas(
    session: &Session,
    if_exists: bool,
    names: &[ast::ObjectName],
    cascade: bool,
) -> SqlResult<()> {
    for n in names {
        let (_, schema) = split_name(n);
        let has_objects = {
            let c = session.engine.catalog.read();
            c.tables.values().any(|t| t.schema == schema)
                || c.views.values().any(|v| v.schema == schema)
                || c.sequences.values().any(|s| s.schema == schema)
        };
        if has_objects && !cascade {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop schema {schema} because other objects depend on it"),
            )
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
        }
        if has_objects {
            let tables: Vec<Oid> = session
                .engine
                .catalog
                .read()
                .tables
                .values()
                .filter(|t| t.schema == schema)
                .map(|t| t.oid)
                .collect();
            for t in tables {
                drop_table_by_oid(session, t);
            }
            let mut c = session.engine.catalog.write();
            let views: Vec<Oid> = c
                .views
                .values()
                .filter(|v| v.schema == schema)
                .map(|v| v.oid)
                .collect();
            for v in views {
                c.remove_view(v);
            }
            let seqs: Vec<Oid> = c
                .sequences
                .values()
                .filter(|s| s.schema == schema)
                .map(|s| s.oid)
                .collect();
            for s in seqs {
                c.remove_sequence(s);
            }
        }
        match session.engine.catalog.write().drop_schema(&schema) {
            Ok(()) => {}
            Err(_) if if_exists => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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
            None if if_exists => {}
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
