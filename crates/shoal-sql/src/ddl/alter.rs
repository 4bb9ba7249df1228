//! ALTER TABLE (columns, renames, defaults, NOT NULL) and table constraints: PRIMARY KEY,
//! UNIQUE, CHECK and FOREIGN KEY, whether declared in CREATE TABLE or added later, with the
//! checks of existing rows that adding one implies. Dropping a column drops or renumbers the
//! indexes and constraints that refer to it, in this table and in tables referencing it.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{
    AccessMethod, ColumnDef, ConstraintDef, ConstraintKind, ConstraintTiming, ForeignKeyAction,
    IndexDef, Oid, RelationKind, TableDef,
};
use shoal_storage::types::Value;
use shoal_storage::Transaction;

use super::index::{create_unique_index, unique_name};
use super::{ident, ident_of, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

pub(super) fn referential_action(a: &Option<ast::ReferentialAction>) -> ForeignKeyAction {
    match a {
        Some(ast::ReferentialAction::Cascade) => ForeignKeyAction::Cascade,
        Some(ast::ReferentialAction::SetNull) => ForeignKeyAction::SetNull,
        Some(ast::ReferentialAction::SetDefault) => ForeignKeyAction::SetDefault,
        Some(ast::ReferentialAction::Restrict) => ForeignKeyAction::Restrict,
        _ => ForeignKeyAction::NoAction,
    }
}

/// Table-level constraint pieces gathered from column and table clauses before OIDs exist.
pub(super) enum PendingConstraint {
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
    },
    Foreign {
        name: Option<String>,
        columns: Vec<String>,
        table: ast::ObjectName,
        ref_columns: Vec<String>,
        on_delete: ForeignKeyAction,
        on_update: ForeignKeyAction,
        timing: ConstraintTiming,
    },
}

/// `[NOT] DEFERRABLE [INITIALLY {DEFERRED | IMMEDIATE}]` of a foreign key, as PostgreSQL reads
/// it: INITIALLY DEFERRED implies DEFERRABLE, and NOT DEFERRABLE with it is an error.
pub(super) fn constraint_timing(
    characteristics: Option<&ast::ConstraintCharacteristics>,
) -> SqlResult<ConstraintTiming> {
    let Some(c) = characteristics else {
        return Ok(ConstraintTiming::NotDeferrable);
    };
    if c.enforced == Some(false) {
        return Err(SqlError::unsupported("NOT ENFORCED constraints"));
    }
    let initially_deferred = c.initially == Some(ast::DeferrableInitial::Deferred);
    match (c.deferrable, initially_deferred) {
        (Some(false), true) => Err(SqlError::new(
            code::SYNTAX_ERROR,
            "constraint declared INITIALLY DEFERRED must be DEFERRABLE",
        )),
        (_, true) => Ok(ConstraintTiming::Deferred),
        (Some(true), false) => Ok(ConstraintTiming::Immediate),
        (_, false) => Ok(ConstraintTiming::NotDeferrable),
    }
}

fn index_column_names(cols: &[ast::IndexColumn]) -> Vec<String> {
    cols.iter()
        .map(|c| ident_of(&c.column.expr.to_string()))
        .collect()
}

pub(super) fn pending_from_table_constraint(
    c: &ast::TableConstraint,
) -> SqlResult<PendingConstraint> {
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
        },
        ast::TableConstraint::ForeignKey(fk) => {
            check_match_kind(fk.match_kind.as_ref(), fk.columns.len())?;
            PendingConstraint::Foreign {
                name: fk.name.as_ref().map(ident),
                columns: fk.columns.iter().map(ident).collect(),
                table: fk.foreign_table.clone(),
                ref_columns: fk.referred_columns.iter().map(ident).collect(),
                on_delete: referential_action(&fk.on_delete),
                on_update: referential_action(&fk.on_update),
                timing: constraint_timing(fk.characteristics.as_ref())?,
            }
        }
        other => return Err(SqlError::unsupported(format!("constraint {other}"))),
    })
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

pub(super) async fn add_constraint(
    session: &Session,
    table_oid: Oid,
    p: PendingConstraint,
) -> SqlResult<()> {
    let def = session
        .engine
        .catalog
        .read()
        .tables
        .get(&table_oid)
        .cloned()
        .ok_or_else(|| SqlError::internal("table vanished"))?;
    if def.access_method == AccessMethod::Columnar && !matches!(p, PendingConstraint::Check { .. })
    {
        // Keys need indexes, and column tables have none yet.
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "column tables do not support PRIMARY KEY, UNIQUE or FOREIGN KEY constraints yet",
        ));
    }
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
                table.scan_possibly_live(&snap, |bytes| {
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
            let index = create_unique_index(session, &def, &name, &cols, true, None).await?;
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
            let index = create_unique_index(session, &def, &name, &cols, false, None).await?;
            ConstraintDef {
                oid: index + 100_000,
                name,
                kind: ConstraintKind::Unique {
                    columns: cols,
                    index,
                },
            }
        }
        PendingConstraint::Check { name, expr } => {
            // PostgreSQL names a check after its column when it names exactly one, wherever
            // it was written.
            let base = match columns_named_in(&def, &expr).as_slice() {
                [c] => format!("{}_{}_check", def.name, def.columns[*c].name),
                _ => format!("{}_check", def.name),
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
            timing,
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
                    timing,
                },
            }
        }
    };
    new_def.constraints.push(constraint);
    session.engine.catalog.write().replace_table(new_def)?;
    Ok(())
}

/// Checks an added FOREIGN KEY or CHECK against the rows already in the table.
async fn validate_existing_rows(
    session: &Session,
    txn: &mut Transaction,
    table_oid: Oid,
) -> SqlResult<()> {
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
    // Checked now even when deferrable, as PostgreSQL validates an added key at once.
    let mut checked = last.clone();
    if let ConstraintKind::ForeignKey { timing, .. } = &mut checked.kind {
        *timing = ConstraintTiming::NotDeferrable;
    }
    let only_last = TableDef {
        constraints: vec![checked],
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
    table.scan_possibly_live(&snap, |bytes| {
        rows.push(table.decode_row(bytes));
        true
    });
    for row in rows {
        if let Err(e) = crate::constraints::check_row(session, txn, &only_last, &row).await {
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

pub(super) async fn alter_table(
    session: &mut Session,
    txn: &mut Transaction,
    at: ast::AlterTable,
) -> SqlResult<StatementResult> {
    let (schema, rel) = split_name(&at.name);
    let Some((_, kind, oid)) = session.scope.resolve_relation(schema.as_deref(), &rel) else {
        if at.if_exists {
            session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("relation \"{rel}\" does not exist, skipping"),
            );
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
    if let Some(method) = set_access_method_of(&at.operations) {
        let method = super::access_method::access_method_named(&method)?;
        super::access_method::set_access_method(session, oid, method).await?;
        return Ok(StatementResult::command("ALTER TABLE"));
    }
    let mut operations = at.operations;
    let triggers_only = operations.iter().all(|op| {
        matches!(
            op,
            ast::AlterTableOperation::EnableTrigger { .. }
                | ast::AlterTableOperation::DisableTrigger { .. }
        )
    });
    if triggers_only {
        // Of any table, column tables included.
        for op in operations {
            let def = crate::dml::store_by_oid(session, oid, &rel)?.0;
            let (name, enabled) = match op {
                ast::AlterTableOperation::EnableTrigger { name } => (name, true),
                ast::AlterTableOperation::DisableTrigger { name } => (name, false),
                _ => unreachable!("only trigger operations"),
            };
            crate::routines::trigger::set_enabled(session, &def, &ident(&name), enabled)?;
        }
        return Ok(StatementResult::command("ALTER TABLE"));
    }
    let mut identity_sequence = identity_sequence_name(&mut operations);
    for op in operations {
        // Re-read for each operation: the previous one may have changed the definition.
        let (def, table) = crate::dml::table_by_oid(session, oid, &rel)?;
        match op {
            ast::AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                let name = ident(&column_def.name);
                if def.column_index(&name).is_some() {
                    if if_not_exists {
                        session.scope.notice(
                            code::DUPLICATE_COLUMN,
                            format!(
                                "column \"{name}\" of relation \"{rel}\" already exists, skipping"
                            ),
                        );
                        continue;
                    }
                    return Err(SqlError::new(
                        code::DUPLICATE_COLUMN,
                        format!("column \"{name}\" of relation \"{rel}\" already exists"),
                    ));
                }
                let data_type = super::column_type(session, &column_def.data_type)?;
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
                        let zone = session.settings.time_zone();
                        crate::dml::column_values(&array, &data_type, &name, zone)?.remove(0)
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
                let add = |mut row: Vec<Value>| {
                    row.push(fill.clone());
                    row
                };
                if fill.is_null() {
                    // A row logged without the column reads it as NULL on replay too.
                    table.alter_columns(types, &add)?;
                } else {
                    let in_flight = table.alter_columns_unless_in_flight(types, &add)?;
                    refuse_in_flight_rewrite(session, &rel, in_flight)?;
                }
                session.engine.log_table_rewrite(&table)?;
                let mut new_def = (*def).clone();
                new_def.columns.push(col);
                session.engine.catalog.write().replace_table(new_def)?;
                for p in pending {
                    add_constraint(session, oid, p).await?;
                }
            }
            ast::AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                drop_behavior,
                ..
            } => {
                let cascade = matches!(drop_behavior, Some(ast::DropBehavior::Cascade));
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
                            session.scope.notice(
                                code::UNDEFINED_COLUMN,
                                format!(
                                    "column \"{name}\" of relation \"{rel}\" does not exist, skipping"
                                ),
                            );
                            continue;
                        }
                        return Err(SqlError::new(
                            code::UNDEFINED_COLUMN,
                            format!("column \"{name}\" of relation \"{rel}\" does not exist"),
                        ));
                    };
                    drop_column(session, txn, &def, pos, cascade)?;
                    let mut catalog = session.engine.catalog.write();
                    catalog.drop_column_privileges(oid, &name);
                    catalog.drop_column_comment(oid, pos as i32 + 1);
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
                new_def.columns[pos].name = new.clone();
                let mut catalog = session.engine.catalog.write();
                catalog.replace_table(new_def)?;
                catalog.rename_column_privileges(oid, &old, &new);
            }
            ast::AlterTableOperation::EnableTrigger { name } => {
                crate::routines::trigger::set_enabled(session, &def, &ident(&name), true)?;
            }
            ast::AlterTableOperation::DisableTrigger { name } => {
                crate::routines::trigger::set_enabled(session, &def, &ident(&name), false)?;
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
                add_constraint(session, oid, pending_from_table_constraint(&constraint)?).await?;
                validate_existing_rows(session, txn, oid).await?;
            }
            ast::AlterTableOperation::DropConstraint {
                name, if_exists, ..
            } => {
                let n = ident(&name);
                let Some(c) = def.constraints.iter().find(|c| c.name == n).cloned() else {
                    if if_exists {
                        session.scope.notice(
                            code::UNDEFINED_OBJECT,
                            format!(
                                "constraint \"{n}\" of relation \"{rel}\" does not exist, skipping"
                            ),
                        );
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
                        table.scan_possibly_live(&snap, |bytes| {
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
                    ast::AlterColumnOperation::AddGenerated {
                        generated_as,
                        sequence_options,
                    } => {
                        let always = !matches!(generated_as, Some(ast::GeneratedAs::ByDefault));
                        let mut catalog = session.engine.catalog.write();
                        super::sequence::add_identity(
                            &mut catalog,
                            &mut new_def,
                            pos,
                            always,
                            &sequence_options.unwrap_or_default(),
                            identity_sequence.take(),
                        )?;
                        catalog.replace_table(new_def)?;
                        continue;
                    }
                    ast::AlterColumnOperation::SetDataType {
                        data_type, using, ..
                    } => {
                        super::alter_type::alter_column_type(
                            session,
                            txn,
                            &def,
                            pos,
                            &data_type,
                            using.as_ref(),
                        )
                        .await?;
                        continue;
                    }
                }
                session.engine.catalog.write().replace_table(new_def)?;
            }
            other => return Err(SqlError::unsupported(format!("ALTER TABLE {other}"))),
        }
    }
    Ok(StatementResult::command("ALTER TABLE"))
}

/// Takes out the `SEQUENCE NAME` of `ADD GENERATED ... AS IDENTITY`, which the parser turned
/// into a last SET option (see `parse::IDENTITY_SEQUENCE_OPTION`).
fn identity_sequence_name(operations: &mut Vec<ast::AlterTableOperation>) -> Option<String> {
    let Some(ast::AlterTableOperation::SetOptionsParens { options }) = operations.last() else {
        return None;
    };
    let [ast::SqlOption::KeyValue { key, value }] = &options[..] else {
        return None;
    };
    if key.value != crate::parse::IDENTITY_SEQUENCE_OPTION {
        return None;
    }
    let name = match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(name) => name.clone(),
            _ => return None,
        },
        _ => return None,
    };
    operations.pop();
    Some(name)
}

/// The method of `SET ACCESS METHOD`, which the parser turned into a SET option (see
/// `parse::ACCESS_METHOD_OPTION`).
fn set_access_method_of(operations: &[ast::AlterTableOperation]) -> Option<String> {
    let [ast::AlterTableOperation::SetOptionsParens { options }] = operations else {
        return None;
    };
    let [ast::SqlOption::KeyValue { key, value }] = &options[..] else {
        return None;
    };
    if key.value != crate::parse::ACCESS_METHOD_OPTION {
        return None;
    }
    match value {
        ast::Expr::Identifier(method) => Some(method.value.clone()),
        _ => None,
    }
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

/// Positions of `cols` after the column at `pos` is removed; None if they include it.
fn shift_columns(cols: &[usize], pos: usize) -> Option<Vec<usize>> {
    if cols.contains(&pos) {
        return None;
    }
    Some(
        cols.iter()
            .map(|c| if *c > pos { c - 1 } else { *c })
            .collect(),
    )
}

/// Whether SQL text (a CHECK or an index expression) mentions the column. Textual, as the
/// catalog keeps expressions as text; a false positive drops a constraint too many.
fn sql_mentions(sql: &str, column: &str) -> bool {
    sql.to_lowercase().contains(column)
}

/// ALTER TABLE ... DROP COLUMN. Outside a transaction block the rows are rewritten in place;
/// inside one the table is rebuilt without the column under the same oid, so that ROLLBACK can
/// put the old storage back (see `undo`).
fn drop_column(
    session: &Session,
    txn: &Transaction,
    def: &TableDef,
    pos: usize,
    cascade: bool,
) -> SqlResult<()> {
    // Checked before anything changes: the block's own row changes are logged at its commit,
    // naming rows as the old table numbers them, which the rebuilt table numbers anew.
    if session.statement_in_block() && txn.writes_table(def.oid as u64) {
        return Err(SqlError::unsupported(
            "ALTER TABLE ... DROP COLUMN of a table the same transaction has changed rows of",
        ));
    }
    let mut table = session
        .engine
        .db
        .table(def.oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&def.name))?;
    let column = def.columns[pos].name.clone();
    shift_referencing_foreign_keys(session, def, pos, cascade)?;
    // Indexes and constraints on the column go with it; the others shift their positions.
    let mut new_def = def.clone();
    let indexes = session.engine.catalog.read().table_indexes(def.oid);
    for idx in &indexes {
        table.drop_index(idx.oid as u64).ok();
        session.engine.catalog.write().remove_index(idx.oid);
    }
    new_def.constraints.retain(|c| match &c.kind {
        ConstraintKind::PrimaryKey { columns, .. } | ConstraintKind::Unique { columns, .. } => {
            !columns.contains(&pos)
        }
        ConstraintKind::ForeignKey {
            columns,
            ref_table,
            ref_columns,
            ..
        } => !columns.contains(&pos) && !(*ref_table == def.oid && ref_columns.contains(&pos)),
        ConstraintKind::Check { expr_sql } => !sql_mentions(expr_sql, &column),
    });
    for c in &mut new_def.constraints {
        match &mut c.kind {
            ConstraintKind::PrimaryKey { columns, .. } | ConstraintKind::Unique { columns, .. } => {
                *columns = shift_columns(columns, pos).expect("kept constraints skip the column");
            }
            ConstraintKind::ForeignKey {
                columns,
                ref_table,
                ref_columns,
                ..
            } => {
                *columns = shift_columns(columns, pos).expect("kept constraints skip the column");
                // A self-reference's referenced columns shift too.
                if *ref_table == def.oid {
                    *ref_columns =
                        shift_columns(ref_columns, pos).expect("kept constraints skip the column");
                }
            }
            ConstraintKind::Check { .. } => {}
        }
    }
    new_def.columns.remove(pos);
    let types = new_def.column_types();
    if session.statement_in_block() {
        table = rebuild_without_column(session, txn, &table, def, &new_def, pos)?;
    } else {
        let in_flight = table.alter_columns_unless_in_flight(types, &|mut row: Vec<Value>| {
            if pos < row.len() {
                row.remove(pos);
            }
            row
        })?;
        refuse_in_flight_rewrite(session, &def.name, in_flight)?;
        session.engine.log_table_rewrite(&table)?;
    }
    session
        .engine
        .catalog
        .write()
        .replace_table(new_def.clone())?;
    for idx in indexes {
        rebuild_index_without(session, &table, &new_def, &idx, pos, &column)?;
    }
    Ok(())
}

/// DROP COLUMN inside a transaction block: copies the rows the statement sees without the
/// column into a new table under the same oid (its image logged first, as ALTER COLUMN TYPE
/// does), and installs it with `new_def`. It fails (55P03) rather than lose another
/// session's uncommitted or newer change; the block must not have changed rows of the table
/// before (their redo names rows of the old table).
fn rebuild_without_column(
    session: &Session,
    txn: &Transaction,
    table: &Arc<shoal_storage::RowTable>,
    def: &TableDef,
    new_def: &TableDef,
    pos: usize,
) -> SqlResult<Arc<shoal_storage::RowTable>> {
    debug_assert!(!txn.writes_table(def.oid as u64), "checked by drop_column");
    let old_types = def.column_types();
    let new_types = new_def.column_types();
    let mut image: Vec<(u64, Box<[u8]>)> = Vec::new();
    table.scan(&session.scope.snapshot(), |_, bytes| {
        let mut row = shoal_storage::row_codec::decode_all(&old_types, bytes);
        row.remove(pos);
        let id = image.len() as u64;
        image.push((id, shoal_storage::row_codec::encode(&new_types, &row)));
        true
    });
    super::close_and_log_rebuild(session, new_def, image.iter().map(|(id, r)| (*id, &r[..])))?;
    // Storage and catalog change together: no statement sees the new rows with the old columns.
    let engine = &session.engine;
    let mut catalog = engine.catalog.write();
    engine.db.drop_table(def.oid as u64);
    let rebuilt = engine.db.create_table(def.oid as u64, new_types);
    let rows: Vec<(u64, &[u8])> = image.iter().map(|(id, r)| (*id, &r[..])).collect();
    for block in rows.chunks(4096) {
        rebuilt.load_rows(block);
    }
    catalog.replace_table(new_def.clone())?;
    Ok(rebuilt)
}

/// Puts back an index dropped for DROP COLUMN unless it used the column, at shifted positions.
fn rebuild_index_without(
    session: &Session,
    table: &shoal_storage::RowTable,
    new_def: &TableDef,
    idx: &IndexDef,
    pos: usize,
    column: &str,
) -> SqlResult<()> {
    let catalog_only = idx.columns.is_empty() && !idx.key_sql.is_empty();
    let uses_column = if catalog_only {
        idx.key_sql.iter().any(|k| sql_mentions(k, column))
    } else {
        idx.columns.contains(&pos)
    } || idx
        .predicate_sql
        .as_deref()
        .is_some_and(|p| sql_mentions(p, column));
    if uses_column {
        return Ok(());
    }
    let mut d = idx.clone();
    d.columns = shift_columns(&idx.columns, pos).expect("checked above");
    session.engine.catalog.write().insert_index(d.clone())?;
    if let Some(storage) = super::index_predicate::storage_index(&d, new_def)? {
        table.add_index(storage)?;
    }
    Ok(())
}

/// Foreign keys of other tables that reference the dropped column block DROP COLUMN (CASCADE
/// drops them); the others have their referenced positions shifted.
fn shift_referencing_foreign_keys(
    session: &Session,
    def: &TableDef,
    pos: usize,
    cascade: bool,
) -> SqlResult<()> {
    let referencing = session
        .engine
        .catalog
        .read()
        .referencing_foreign_keys(def.oid);
    for (child, constraint) in referencing {
        if child.oid == def.oid {
            continue;
        }
        let ConstraintKind::ForeignKey { ref_columns, .. } = &constraint.kind else {
            continue;
        };
        let shifted = shift_columns(ref_columns, pos);
        if shifted.is_none() && !cascade {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!(
                    "cannot drop column {} of table {} because other objects depend on it",
                    def.columns[pos].name, def.name
                ),
            )
            .with_detail(format!(
                "constraint {} on table {} depends on column {} of table {}",
                constraint.name, child.name, def.columns[pos].name, def.name
            ))
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
        }
        let current = session
            .engine
            .catalog
            .read()
            .tables
            .get(&child.oid)
            .cloned();
        let Some(current) = current else { continue };
        let mut d = (*current).clone();
        match shifted {
            None => d.constraints.retain(|c| c.oid != constraint.oid),
            Some(cols) => {
                for c in &mut d.constraints {
                    if let ConstraintKind::ForeignKey { ref_columns, .. } = &mut c.kind {
                        if c.oid == constraint.oid {
                            *ref_columns = cols.clone();
                        }
                    }
                }
            }
        }
        session.engine.catalog.write().replace_table(d)?;
    }
    Ok(())
}

/// The error for a column rewrite that `alter_columns_unless_in_flight` refused because
/// `in_flight` (if any) has uncommitted rows in the table: this transaction (55006: the ALTER
/// must come before its writes, or after its commit) or another one (55P03, as a NOWAIT lock;
/// PostgreSQL would wait for it).
fn refuse_in_flight_rewrite(
    session: &Session,
    table: &str,
    in_flight: Option<shoal_storage::TxnId>,
) -> SqlResult<()> {
    let Some(writer) = in_flight else {
        return Ok(());
    };
    if writer == session.scope.snapshot().txn {
        return Err(SqlError::new(
            code::OBJECT_IN_USE,
            format!(
                "cannot ALTER TABLE \"{table}\" because this transaction has uncommitted changes in it"
            ),
        )
        .with_hint(
            "Commit them first, or change the columns before writing to the table in the \
             transaction.",
        ));
    }
    Err(super::rewrite_blocked(table))
}

/// Foreign keys are checked as MATCH SIMPLE (a row with any key column null is not checked).
/// MATCH FULL, where a row must have all or none of them null, means the same for one column
/// and is refused for several; MATCH PARTIAL is refused, as PostgreSQL refuses it.
pub(crate) fn check_match_kind(
    kind: Option<&ast::ConstraintReferenceMatchKind>,
    columns: usize,
) -> SqlResult<()> {
    match kind {
        Some(ast::ConstraintReferenceMatchKind::Partial) => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "MATCH PARTIAL not yet implemented",
        )),
        Some(ast::ConstraintReferenceMatchKind::Full) if columns > 1 => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "foreign keys of several columns with MATCH FULL are not supported",
        )),
        _ => Ok(()),
    }
}

/// The columns of `table` an expression (a CHECK's) names, each once, in column order.
pub fn columns_named_in(table: &TableDef, expr_sql: &str) -> Vec<usize> {
    use std::ops::ControlFlow;
    let Ok(expr) = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(expr_sql)
    .and_then(|mut p| p.parse_expr()) else {
        return Vec::new();
    };
    let mut used = Vec::new();
    let _ = ast::visit_expressions(&expr, |e| {
        let name = match e {
            ast::Expr::Identifier(i) => Some(ident(i)),
            ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident),
            _ => None,
        };
        if let Some(c) = name.and_then(|n| table.column_index(&n)) {
            used.push(c);
        }
        ControlFlow::<()>::Continue(())
    });
    used.sort_unstable();
    used.dedup();
    used
}
