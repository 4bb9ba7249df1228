//! DDL: CREATE/DROP/ALTER of tables, indexes, sequences, views and schemas, and TRUNCATE.
//! Catalog changes take effect immediately and are not undone by ROLLBACK (a documented gap:
//! PostgreSQL's DDL is transactional). Storage tables and indexes are created alongside their
//! catalog entries under the same OIDs.

use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog::{
    AccessMethod, Catalog, ColumnDef, ConstraintDef, ConstraintKind, ForeignKeyAction, Identity,
    IndexDef, Oid, RelationKind, SequenceDef, SequenceState, TableDef, ViewDef,
};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{StorageError, Transaction};

use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};
use crate::types::{from_sql_type, is_serial_type};

/// Unquoted identifiers fold to lower case; quoted ones keep their case.
pub fn ident_of(s: &str) -> String {
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_lowercase()
    }
}

fn ident(i: &ast::Ident) -> String {
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
        Statement::Truncate(t) => {
            let mut tables = Vec::new();
            for target in &t.table_names {
                let (def, table) = crate::dml::resolve_table(session, &target.name)?;
                tables.push((def, table));
            }
            for (def, table) in &tables {
                let referenced = session
                    .engine
                    .catalog
                    .read()
                    .referencing_foreign_keys(def.oid);
                if let Some((child, _)) = referenced
                    .iter()
                    .find(|(c, _)| !tables.iter().any(|(d, _)| d.oid == c.oid))
                {
                    if !matches!(t.cascade, Some(ast::CascadeOption::Cascade)) {
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
                }
                table.truncate();
            }
            Ok(StatementResult::command("TRUNCATE TABLE"))
        }
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

fn referential_action(a: &Option<ast::ReferentialAction>) -> ForeignKeyAction {
    match a {
        Some(ast::ReferentialAction::Cascade) => ForeignKeyAction::Cascade,
        Some(ast::ReferentialAction::SetNull) => ForeignKeyAction::SetNull,
        Some(ast::ReferentialAction::SetDefault) => ForeignKeyAction::SetDefault,
        Some(ast::ReferentialAction::Restrict) => ForeignKeyAction::Restrict,
        _ => ForeignKeyAction::NoAction,
    }
}

/// Table-level constraint pieces gathered from column and table clauses before OIDs exist.
enum PendingConstraint {
    Primary {
        name: Option<String>,
        columns: Vec<String>,
    },
    Unique {
        name: Option<String>,
        columns: Vec<String>,
    },
    Check {
        name: Option<String>,
        expr: String,
        column: Option<String>,
    },
    Foreign {
        name: Option<String>,
        columns: Vec<String>,
        table: ast::ObjectName,
        ref_columns: Vec<String>,
        on_delete: ForeignKeyAction,
        on_update: ForeignKeyAction,
    },
}

fn index_column_names(cols: &[ast::IndexColumn]) -> Vec<String> {
    cols.iter()
        .map(|c| ident_of(&c.column.expr.to_string()))
        .collect()
}

fn pending_from_table_constraint(c: &ast::TableConstraint) -> SqlResult<PendingConstraint> {
    Ok(match c {
        ast::TableConstraint::PrimaryKey(pk) => PendingConstraint::Primary {
            name: pk.name.as_ref().map(ident),
            columns: index_column_names(&pk.columns),
        },
        ast::TableConstraint::Unique(u) => PendingConstraint::Unique {
            name: u.name.as_ref().map(ident),
            columns: index_column_names(&u.columns),
        },
        ast::TableConstraint::Check(ch) => PendingConstraint::Check {
            name: ch.name.as_ref().map(ident),
            expr: ch.expr.to_string(),
            column: None,
        },
        ast::TableConstraint::ForeignKey(fk) => PendingConstraint::Foreign {
            name: fk.name.as_ref().map(ident),
            columns: fk.columns.iter().map(ident).collect(),
            table: fk.foreign_table.clone(),
            ref_columns: fk.referred_columns.iter().map(ident).collect(),
            on_delete: referential_action(&fk.on_delete),
            on_update: referential_action(&fk.on_update),
        },
        other => return Err(SqlError::unsupported(format!("constraint {other}"))),
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
                ast::ColumnOption::PrimaryKey(_) => {
                    col.not_null = true;
                    pending.push(PendingConstraint::Primary {
                        name: opt.name.as_ref().map(ident),
                        columns: vec![col_name.clone()],
                    });
                }
                ast::ColumnOption::Unique(_) => pending.push(PendingConstraint::Unique {
                    name: opt.name.as_ref().map(ident),
                    columns: vec![col_name.clone()],
                }),
                ast::ColumnOption::Check(ch) => pending.push(PendingConstraint::Check {
                    name: opt.name.as_ref().map(ident).or(ch.name.as_ref().map(ident)),
                    expr: ch.expr.to_string(),
                    column: Some(col_name.clone()),
                }),
                ast::ColumnOption::ForeignKey(fk) => pending.push(PendingConstraint::Foreign {
                    name: opt.name.as_ref().map(ident),
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
            access_method: AccessMethod::Heap,
            options,
        };
        catalog.insert_table(def.clone())?;
        session
            .engine
            .db
            .create_table(oid as u64, def.column_types());
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

fn drop_table_by_oid(session: &Session, oid: Oid) {
    session.engine.catalog.write().remove_table(oid);
    session.engine.db.drop_table(oid as u64);
}

fn column_positions(def: &TableDef, names: &[String]) -> SqlResult<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            def.column_index(n).ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_COLUMN,
                    format!("column \"{n}\" named in key does not exist"),
                )
            })
        })
        .collect()
}

fn unique_name(catalog: &Catalog, schema: &str, base: &str) -> String {
    if catalog.lookup(schema, base).is_none() {
        return base.to_string();
    }
    (1..)
        .map(|i| format!("{base}{i}"))
        .find(|n| catalog.lookup(schema, n).is_none())
        .expect("some name is free")
}

/// Creates a unique index backing a PRIMARY KEY or UNIQUE constraint, checking existing rows.
fn create_unique_index(
    session: &Session,
    def: &TableDef,
    name: &str,
    columns: &[usize],
    primary: bool,
) -> SqlResult<Oid> {
    let table = session
        .engine
        .db
        .table(def.oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&def.name))?;
    let index_oid = {
        let mut catalog = session.engine.catalog.write();
        let oid = catalog.allocate_oid();
        catalog.insert_index(IndexDef {
            oid,
            schema: def.schema.clone(),
            name: name.to_string(),
            table: def.oid,
            columns: columns.to_vec(),
            unique: true,
            primary,
        })?;
        oid
    };
    let storage_def = shoal_storage::IndexDef {
        id: index_oid as u64,
        name: name.to_string(),
        columns: columns.to_vec(),
        unique: true,
    };
    if let Err(e) = table.add_index(storage_def) {
        session.engine.catalog.write().remove_index(index_oid);
        return Err(match e {
            StorageError::UniqueViolation {
                key_columns, key, ..
            } => {
                let cols: Vec<&str> = key_columns
                    .iter()
                    .map(|c| def.columns[*c].name.as_str())
                    .collect();
                let vals: Vec<String> = key
                    .iter()
                    .map(|v| crate::pgtext::format_value(v).unwrap_or_else(|| "null".into()))
                    .collect();
                SqlError::new(
                    code::UNIQUE_VIOLATION,
                    format!("could not create unique index \"{name}\""),
                )
                .with_detail(format!(
                    "Key ({})=({}) is duplicated.",
                    cols.join(", "),
                    vals.join(", ")
                ))
            }
            other => other.into(),
        });
    }
    Ok(index_oid)
}

fn add_constraint(session: &Session, table_oid: Oid, p: PendingConstraint) -> SqlResult<()> {
    let def = session
        .engine
        .catalog
        .read()
        .tables
        .get(&table_oid)
        .cloned()
        .ok_or_else(|| SqlError::internal("table vanished"))?;
    let mut new_def = (*def).clone();
    let constraint = match p {
        PendingConstraint::Primary { name, columns } => {
            if def.primary_key().is_some() {
                return Err(SqlError::new(
                    code::INVALID_TABLE_DEFINITION,
                    format!(
                        "multiple primary keys for table \"{}\" are not allowed",
                        def.name
                    ),
                ));
            }
            let cols = column_positions(&def, &columns)?;
            // Existing NULLs make ADD PRIMARY KEY fail, as NOT NULL is implied.
            if let Some(table) = session.engine.db.table(def.oid as u64) {
                let snap = session.scope.snapshot();
                let mut null_col = None;
                table.scan(&snap, |_, bytes| {
                    for c in &cols {
                        if shoal_storage::row_codec::decode_column(&def.column_types(), bytes, *c)
                            .is_null()
                        {
                            null_col = Some(*c);
                            return false;
                        }
                    }
                    true
                });
                if let Some(c) = null_col {
                    return Err(SqlError::new(
                        code::NOT_NULL_VIOLATION,
                        format!(
                            "column \"{}\" of relation \"{}\" contains null values",
                            def.columns[c].name, def.name
                        ),
                    ));
                }
            }
            let name = name.unwrap_or_else(|| {
                unique_name(
                    &session.engine.catalog.read(),
                    &def.schema,
                    &format!("{}_pkey", def.name),
                )
            });
            let index = create_unique_index(session, &def, &name, &cols, true)?;
            for c in &cols {
                new_def.columns[*c].not_null = true;
            }
            ConstraintDef {
                oid: index + 100_000,
                name,
                kind: ConstraintKind::PrimaryKey {
                    columns: cols,
                    index,
                },
            }
        }
        PendingConstraint::Unique { name, columns } => {
            let cols = column_positions(&def, &columns)?;
            let base = format!("{}_{}_key", def.name, columns.join("_"));
            let name = name
                .unwrap_or_else(|| unique_name(&session.engine.catalog.read(), &def.schema, &base));
            let index = create_unique_index(session, &def, &name, &cols, false)?;
            ConstraintDef {
                oid: index + 100_000,
                name,
                kind: ConstraintKind::Unique {
                    columns: cols,
                    index,
                },
            }
        }
        PendingConstraint::Check { name, expr, column } => {
            let base = match &column {
                Some(c) => format!("{}_{}_check", def.name, c),
                None => format!("{}_check", def.name),
            };
            let name = name.unwrap_or_else(|| {
                let existing: Vec<&str> = def.constraints.iter().map(|c| c.name.as_str()).collect();
                if !existing.contains(&base.as_str()) {
                    base.clone()
                } else {
                    (1..)
                        .map(|i| format!("{base}{i}"))
                        .find(|n| !existing.contains(&n.as_str()))
                        .unwrap()
                }
            });
            let oid = session.engine.catalog.write().allocate_oid();
            ConstraintDef {
                oid,
                name,
                kind: ConstraintKind::Check { expr_sql: expr },
            }
        }
        PendingConstraint::Foreign {
            name,
            columns,
            table,
            ref_columns,
            on_delete,
            on_update,
        } => {
            let cols = column_positions(&def, &columns)?;
            let (rs, rn) = split_name(&table);
            let (_, kind, ref_oid) = session
                .scope
                .resolve_relation(rs.as_deref(), &rn)
                .ok_or_else(|| SqlError::undefined_table(&rn))?;
            if kind != RelationKind::Table {
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!("referenced relation \"{rn}\" is not a table"),
                ));
            }
            let ref_def = if ref_oid == def.oid {
                Arc::new(new_def.clone())
            } else {
                session
                    .engine
                    .catalog
                    .read()
                    .tables
                    .get(&ref_oid)
                    .cloned()
                    .expect("resolved")
            };
            let ref_cols: Vec<usize> = if ref_columns.is_empty() {
                ref_def
                    .primary_key()
                    .map(|(_, c)| c.to_vec())
                    .ok_or_else(|| {
                        SqlError::new(
                            code::UNDEFINED_COLUMN,
                            format!("there is no primary key for referenced table \"{rn}\""),
                        )
                    })?
            } else {
                column_positions(&ref_def, &ref_columns)?
            };
            if ref_cols.len() != cols.len() {
                return Err(SqlError::new(
                    code::INVALID_FOREIGN_KEY,
                    "number of referencing and referenced columns for foreign key disagree",
                ));
            }
            let has_unique = ref_def.constraints.iter().any(|c| matches!(&c.kind, ConstraintKind::PrimaryKey { columns, .. } | ConstraintKind::Unique { columns, .. } if { let mut a = columns.clone(); a.sort(); let mut b = ref_cols.clone(); b.sort(); a == b }));
            if !has_unique {
                return Err(SqlError::new(code::INVALID_FOREIGN_KEY, format!("there is no unique constraint matching given keys for referenced table \"{rn}\"")));
            }
            let name = name.unwrap_or_else(|| format!("{}_{}_fkey", def.name, columns.join("_")));
            let oid = session.engine.catalog.write().allocate_oid();
            ConstraintDef {
                oid,
                name,
                kind: ConstraintKind::ForeignKey {
                    columns: cols,
                    ref_table: ref_oid,
                    ref_columns: ref_cols,
                    on_delete,
                    on_update,
                },
            }
        }
    };
    new_def.constraints.push(constraint);
    session.engine.catalog.write().replace_table(new_def)?;
    Ok(())
}

/// Checks an added FOREIGN KEY or CHECK against the rows already in the table.
async fn validate_existing_rows(session: &Session, table_oid: Oid) -> SqlResult<()> {
    let def = session
        .engine
        .catalog
        .read()
        .tables
        .get(&table_oid)
        .cloned()
        .expect("exists");
    let Some(last) = def.constraints.last() else {
        return Ok(());
    };
    if !matches!(
        last.kind,
        ConstraintKind::ForeignKey { .. } | ConstraintKind::Check { .. }
    ) {
        return Ok(());
    }
    let only_last = TableDef {
        constraints: vec![last.clone()],
        columns: def
            .columns
            .iter()
            .map(|c| ColumnDef {
                not_null: false,
                ..c.clone()
            })
            .collect(),
        ..(*def).clone()
    };
    let table = session.engine.db.table(table_oid as u64).expect("exists");
    let snap = session.scope.snapshot();
    let mut rows = Vec::new();
    table.scan(&snap, |_, bytes| {
        rows.push(table.decode_row(bytes));
        true
    });
    for row in rows {
        if let Err(e) = crate::constraints::check_row(session, &only_last, &row).await {
            let mut def2 = (*def).clone();
            def2.constraints.pop();
            session.engine.catalog.write().replace_table(def2)?;
            return Err(match e.code {
                code::CHECK_VIOLATION => SqlError::new(
                    code::CHECK_VIOLATION,
                    format!(
                        "check constraint \"{}\" of relation \"{}\" is violated by some row",
                        last.name, def.name
                    ),
                ),
                _ => e,
            });
        }
    }
    Ok(())
}

fn create_index(session: &mut Session, ci: ast::CreateIndex) -> SqlResult<StatementResult> {
    let (def, table) = crate::dml::resolve_table(session, &ci.table_name)?;
    let names = index_column_names(&ci.columns);
    let cols = column_positions(&def, &names)?;
    let name = match &ci.name {
        Some(n) => split_name(n).1,
        None => unique_name(
            &session.engine.catalog.read(),
            &def.schema,
            &format!("{}_{}_idx", def.name, names.join("_")),
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
    if ci.unique {
        create_unique_index(session, &def, &name, &cols, false)?;
    } else {
        let oid = {
            let mut catalog = session.engine.catalog.write();
            let oid = catalog.allocate_oid();
            catalog.insert_index(IndexDef {
                oid,
                schema: def.schema.clone(),
                name: name.clone(),
                table: def.oid,
                columns: cols.clone(),
                unique: false,
                primary: false,
            })?;
            oid
        };
        table.add_index(shoal_storage::IndexDef {
            id: oid as u64,
            name,
            columns: cols,
            unique: false,
        })?;
    }
    Ok(StatementResult::command("CREATE INDEX"))
}

async fn create_view(session: &mut Session, cv: ast::CreateView) -> SqlResult<StatementResult> {
    let (schema, name) = creation_target(session, &cv.name)?;
    let existing = session.engine.catalog.read().lookup(&schema, &name);
    if let Some((kind, oid)) = existing {
        if cv.if_not_exists {
            return Ok(StatementResult::command("CREATE VIEW"));
        }
        if !(cv.or_replace && kind == RelationKind::View) {
            return Err(SqlError::new(
                code::DUPLICATE_TABLE,
                format!("relation \"{name}\" already exists"),
            ));
        }
        session.engine.catalog.write().remove_view(oid);
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
    let mut catalog = session.engine.catalog.write();
    let oid = catalog.allocate_oid();
    catalog.insert_view(ViewDef {
        oid,
        schema,
        name,
        query_sql: cv.query.to_string(),
        column_names,
    })?;
    Ok(StatementResult::command("CREATE VIEW"))
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
        return Ok(StatementResult::command(tag));
    };
    // Resolve everything first so a missing name drops nothing.
    let mut targets = Vec::new();
    for n in names {
        let (schema, rel) = split_name(n);
        match session.scope.resolve_relation(schema.as_deref(), &rel) {
            Some((_, k, oid)) if k == kind => targets.push(oid),
            Some(_) => {
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!(
                        "\"{rel}\" is not a {}",
                        tag.trim_start_matches("DROP ").to_lowercase()
                    ),
                ))
            }
            None if if_exists => {}
            None => {
                let what = match kind {
                    RelationKind::Table => "table",
                    RelationKind::View => "view",
                    RelationKind::Index => "index",
                    RelationKind::Sequence => "sequence",
                };
                return Err(SqlError::new(
                    code::UNDEFINED_TABLE,
                    format!("{what} \"{rel}\" does not exist"),
                ));
            }
        }
    }
    for oid in targets {
        match kind {
            RelationKind::Table => {
                let referencing = session.engine.catalog.read().referencing_foreign_keys(oid);
                let outside: Vec<_> = referencing
                    .into_iter()
                    .filter(|(t, _)| t.oid != oid)
                    .collect();
                if !outside.is_empty() {
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
                        let mut d = (*child).clone();
                        d.constraints.retain(|x| x.oid != c.oid);
                        session.engine.catalog.write().replace_table(d)?;
                    }
                }
                drop_table_by_oid(session, oid);
            }
            RelationKind::Index => {
                let idx = session.engine.catalog.read().indexes.get(&oid).cloned();
                if let Some(idx) = idx {
                    let owning = session
                        .engine
                        .catalog
                        .read()
                        .tables
                        .get(&idx.table)
                        .cloned();
                    if let Some(t) = &owning {
                        if let Some(c) = t.constraints.iter().find(|c| matches!(&c.kind, ConstraintKind::PrimaryKey { index, .. } | ConstraintKind::Unique { index, .. } if *index == oid)) {
                            return Err(SqlError::new(code::DEPENDENT_OBJECTS_STILL_EXIST, format!("cannot drop index {} because constraint {} on table {} requires it", idx.name, c.name, t.name))
                                .with_hint(format!("You can drop constraint {} on table {} instead.", c.name, t.name)));
                        }
                    }
                    if let Some(table) = session.engine.db.table(idx.table as u64) {
                        table.drop_index(oid as u64).ok();
                    }
                    session.engine.catalog.write().remove_index(oid);
                }
            }
            RelationKind::View => {
                session.engine.catalog.write().remove_view(oid);
            }
            RelationKind::Sequence => {
                session.engine.catalog.write().remove_sequence(oid);
            }
        }
    }
    Ok(StatementResult::command(tag))
}

async fn alter_table(
    session: &mut Session,
    _txn: &mut Transaction,
    at: ast::AlterTable,
) -> SqlResult<StatementResult> {
    let (schema, rel) = split_name(&at.name);
    let Some((_, kind, oid)) = session.scope.resolve_relation(schema.as_deref(), &rel) else {
        if at.if_exists {
            return Ok(StatementResult::command("ALTER TABLE"));
        }
        return Err(SqlError::undefined_table(&rel));
    };
    if kind != RelationKind::Table {
        if let (RelationKind::Index, Some(ast::AlterTableOperation::RenameTable { table_name })) =
            (kind, at.operations.first())
        {
            let new = match table_name {
                ast::RenameTableNameKind::As(n) | ast::RenameTableNameKind::To(n) => {
                    split_name(n).1
                }
            };
            session.engine.catalog.write().rename_index(oid, &new)?;
            return Ok(StatementResult::command("ALTER INDEX"));
        }
        return Err(SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("\"{rel}\" is not a table"),
        ));
    }
    for op in at.operations {
        let def = session
            .engine
            .catalog
            .read()
            .tables
            .get(&oid)
            .cloned()
            .ok_or_else(|| SqlError::undefined_table(&rel))?;
        let table = session
            .engine
            .db
            .table(oid as u64)
            .ok_or_else(|| SqlError::undefined_table(&rel))?;
        match op {
            ast::AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                let name = ident(&column_def.name);
                if def.column_index(&name).is_some() {
                    if if_not_exists {
                        continue;
                    }
                    return Err(SqlError::new(
                        code::DUPLICATE_COLUMN,
                        format!("column \"{name}\" of relation \"{rel}\" already exists"),
                    ));
                }
                let data_type = from_sql_type(&column_def.data_type)?;
                let mut col = ColumnDef {
                    name: name.clone(),
                    data_type: data_type.clone(),
                    not_null: false,
                    default_sql: None,
                    identity: None,
                };
                let mut pending = Vec::new();
                for opt in &column_def.options {
                    match &opt.option {
                        ast::ColumnOption::NotNull => col.not_null = true,
                        ast::ColumnOption::Default(e) => col.default_sql = Some(e.to_string()),
                        ast::ColumnOption::PrimaryKey(_) => {
                            pending.push(PendingConstraint::Primary {
                                name: None,
                                columns: vec![name.clone()],
                            })
                        }
                        ast::ColumnOption::Unique(_) => pending.push(PendingConstraint::Unique {
                            name: None,
                            columns: vec![name.clone()],
                        }),
                        ast::ColumnOption::Check(ch) => pending.push(PendingConstraint::Check {
                            name: None,
                            expr: ch.expr.to_string(),
                            column: Some(name.clone()),
                        }),
                        _ => {}
                    }
                }
                // Existing rows get the default (evaluated once, as PostgreSQL does for a constant).
                let fill = match &col.default_sql {
                    Some(d) => {
                        let batches = run_scalar(session, d).await?;
                        let array = batches
                            .ok_or_else(|| SqlError::internal("default produced no value"))?;
                        crate::dml::column_values(&array, &data_type, &name)?.remove(0)
                    }
                    None => Value::Null,
                };
                if col.not_null && fill.is_null() && table.row_count_estimate() > 0 {
                    let snap = session.scope.snapshot();
                    if table.live_row_count(&snap) > 0 {
                        return Err(SqlError::new(
                            code::NOT_NULL_VIOLATION,
                            format!("column \"{name}\" of relation \"{rel}\" contains null values"),
                        ));
                    }
                }
                let mut types = def.column_types();
                types.push(data_type);
                table.alter_columns(types, &|mut row: Vec<Value>| {
                    row.push(fill.clone());
                    row
                })?;
                let mut new_def = (*def).clone();
                new_def.columns.push(col);
                session.engine.catalog.write().replace_table(new_def)?;
                for p in pending {
                    add_constraint(session, oid, p)?;
                }
            }
            ast::AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for c in column_names {
                    let name = ident(&c);
                    let def = session
                        .engine
                        .catalog
                        .read()
                        .tables
                        .get(&oid)
                        .cloned()
                        .expect("exists");
                    let Some(pos) = def.column_index(&name) else {
                        if if_exists {
                            continue;
                        }
                        return Err(SqlError::new(
                            code::UNDEFINED_COLUMN,
                            format!("column \"{name}\" of relation \"{rel}\" does not exist"),
                        ));
                    };
                    drop_column(session, &def, pos)?;
                }
            }
            ast::AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let old = ident(&old_column_name);
                let new = ident(&new_column_name);
                let pos = def.column_index(&old).ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("column \"{old}\" does not exist"),
                    )
                })?;
                if def.column_index(&new).is_some() {
                    return Err(SqlError::new(
                        code::DUPLICATE_COLUMN,
                        format!("column \"{new}\" of relation \"{rel}\" already exists"),
                    ));
                }
                let mut new_def = (*def).clone();
                new_def.columns[pos].name = new;
                session.engine.catalog.write().replace_table(new_def)?;
            }
            ast::AlterTableOperation::RenameTable { table_name } => {
                let new = match table_name {
                    ast::RenameTableNameKind::As(n) | ast::RenameTableNameKind::To(n) => {
                        split_name(&n).1
                    }
                };
                let mut new_def = (*def).clone();
                new_def.name = new;
                session.engine.catalog.write().replace_table(new_def)?;
            }
            ast::AlterTableOperation::AddConstraint { constraint, .. } => {
                add_constraint(session, oid, pending_from_table_constraint(&constraint)?)?;
                validate_existing_rows(session, oid).await?;
            }
            ast::AlterTableOperation::DropConstraint {
                name, if_exists, ..
            } => {
                let n = ident(&name);
                let Some(c) = def.constraints.iter().find(|c| c.name == n).cloned() else {
                    if if_exists {
                        continue;
                    }
                    return Err(SqlError::new(
                        code::UNDEFINED_OBJECT,
                        format!("constraint \"{n}\" of relation \"{rel}\" does not exist"),
                    ));
                };
                if let ConstraintKind::PrimaryKey { index, .. }
                | ConstraintKind::Unique { index, .. } = &c.kind
                {
                    table.drop_index(*index as u64).ok();
                    session.engine.catalog.write().remove_index(*index);
                }
                let mut new_def = (*def).clone();
                new_def.constraints.retain(|x| x.oid != c.oid);
                session.engine.catalog.write().replace_table(new_def)?;
            }
            ast::AlterTableOperation::AlterColumn { column_name, op } => {
                let name = ident(&column_name);
                let pos = def.column_index(&name).ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("column \"{name}\" of relation \"{rel}\" does not exist"),
                    )
                })?;
                let mut new_def = (*def).clone();
                match op {
                    ast::AlterColumnOperation::SetNotNull => {
                        let snap = session.scope.snapshot();
                        let types = def.column_types();
                        let mut has_null = false;
                        table.scan(&snap, |_, bytes| {
                            has_null = shoal_storage::row_codec::decode_column(&types, bytes, pos)
                                .is_null();
                            !has_null
                        });
                        if has_null {
                            return Err(SqlError::new(
                                code::NOT_NULL_VIOLATION,
                                format!(
                                    "column \"{name}\" of relation \"{rel}\" contains null values"
                                ),
                            ));
                        }
                        new_def.columns[pos].not_null = true;
                    }
                    ast::AlterColumnOperation::DropNotNull => new_def.columns[pos].not_null = false,
                    ast::AlterColumnOperation::SetDefault { value } => {
                        new_def.columns[pos].default_sql = Some(value.to_string())
                    }
                    ast::AlterColumnOperation::DropDefault => {
                        new_def.columns[pos].default_sql = None
                    }
                    other => return Err(SqlError::unsupported(format!("ALTER COLUMN {other}"))),
                }
                session.engine.catalog.write().replace_table(new_def)?;
            }
            other => return Err(SqlError::unsupported(format!("ALTER TABLE {other}"))),
        }
    }
    Ok(StatementResult::command("ALTER TABLE"))
}

async fn run_scalar(
    session: &Session,
    expr_sql: &str,
) -> SqlResult<Option<datafusion::arrow::array::ArrayRef>> {
    let stmt = crate::session::parse_sql(&format!("SELECT {expr_sql}"))?
        .pop()
        .expect("one statement");
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    let batches = crate::query::execute_plan(session.state(), plan, None).await?;
    Ok(batches
        .into_iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| b.column(0).slice(0, 1)))
}

fn drop_column(session: &Session, def: &TableDef, pos: usize) -> SqlResult<()> {
    let table = session
        .engine
        .db
        .table(def.oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&def.name))?;
    let remap = |cols: &[usize]| -> Option<Vec<usize>> {
        if cols.contains(&pos) {
            None
        } else {
            Some(
                cols.iter()
                    .map(|c| if *c > pos { c - 1 } else { *c })
                    .collect(),
            )
        }
    };
    // Indexes and constraints on the column go with it; the others shift their positions.
    let mut new_def = def.clone();
    let indexes = session.engine.catalog.read().table_indexes(def.oid);
    for idx in &indexes {
        table.drop_index(idx.oid as u64).ok();
        session.engine.catalog.write().remove_index(idx.oid);
    }
    new_def.constraints.retain(|c| match &c.kind {
        ConstraintKind::PrimaryKey { columns, .. }
        | ConstraintKind::Unique { columns, .. }
        | ConstraintKind::ForeignKey { columns, .. } => !columns.contains(&pos),
        ConstraintKind::Check { expr_sql } => {
            !expr_sql.to_lowercase().contains(&def.columns[pos].name)
        }
    });
    for c in &mut new_def.constraints {
        match &mut c.kind {
            ConstraintKind::PrimaryKey { columns, .. }
            | ConstraintKind::Unique { columns, .. }
            | ConstraintKind::ForeignKey { columns, .. } => {
                *columns = remap(columns).expect("kept constraints do not use the column");
            }
            _ => {}
        }
    }
    new_def.columns.remove(pos);
    let types = new_def.column_types();
    table.alter_columns(types, &|mut row: Vec<Value>| {
        if pos < row.len() {
            row.remove(pos);
        }
        row
    })?;
    // Rebuild surviving indexes at their new positions.
    let mut survivors = Vec::new();
    for idx in indexes {
        if let Some(cols) = remap(&idx.columns) {
            survivors.push((idx, cols));
        }
    }
    session
        .engine
        .catalog
        .write()
        .replace_table(new_def.clone())?;
    for (idx, cols) in survivors {
        let mut catalog = session.engine.catalog.write();
        let mut d = (*idx).clone();
        d.columns = cols.clone();
        catalog.insert_index(d)?;
        drop(catalog);
        table.add_index(shoal_storage::IndexDef {
            id: idx.oid as u64,
            name: idx.name.clone(),
            columns: cols,
            unique: idx.unique,
        })?;
    }
    Ok(())
}
