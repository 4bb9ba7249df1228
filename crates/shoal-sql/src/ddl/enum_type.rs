//! User-defined enum types: CREATE TYPE ... AS ENUM, ALTER TYPE (ADD VALUE, RENAME TO, RENAME
//! VALUE) and DROP TYPE. The catalog keeps each type (`EnumTypeDef`) and every column of it a
//! copy of its name and labels (`DataType::Enum`), so a change to the type rewrites those
//! columns' definitions in the same catalog change. Stored values are labels: renaming a label
//! would have to rewrite rows, and is refused.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Catalog, EnumLabel, EnumTypeDef, Oid};
use shoal_storage::types::DataType;

use super::{creation_target, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

/// PostgreSQL's limit on a label: NAMEDATALEN - 1 bytes.
const LABEL_BYTES_MAX: usize = 63;

/// CREATE TYPE name AS ENUM ('a', 'b', ...). Other kinds of CREATE TYPE are refused.
pub(super) fn create_type(
    session: &Session,
    name: &ast::ObjectName,
    representation: Option<&ast::UserDefinedTypeRepresentation>,
) -> SqlResult<StatementResult> {
    let labels = match representation {
        Some(ast::UserDefinedTypeRepresentation::Enum { labels }) => labels,
        Some(ast::UserDefinedTypeRepresentation::Composite { .. }) => {
            return Err(SqlError::unsupported(
                "composite types (CREATE TYPE ... AS (...))",
            ))
        }
        Some(ast::UserDefinedTypeRepresentation::Range { .. }) => {
            return Err(SqlError::unsupported(
                "range types (CREATE TYPE ... AS RANGE)",
            ))
        }
        _ => {
            return Err(SqlError::unsupported(
                "base types (CREATE TYPE without AS ENUM)",
            ))
        }
    };
    let (schema, type_name) = creation_target(session, name)?;
    let mut catalog = session.engine.catalog.write();
    let taken = catalog.lookup_type(&schema, &type_name).is_some()
        || catalog.lookup(&schema, &type_name).is_some()
        || builtin_type_name(&schema, &type_name);
    if taken {
        return Err(SqlError::new(
            code::DUPLICATE_OBJECT,
            format!("type \"{type_name}\" already exists"),
        ));
    }
    let oid = catalog.allocate_oid();
    let array_oid = catalog.allocate_oid();
    let mut def = EnumTypeDef {
        oid,
        array_oid,
        schema,
        name: type_name,
        labels: Vec::new(),
    };
    for (i, label) in labels.iter().enumerate() {
        let label = &label.value;
        check_label(label)?;
        if def.position(label).is_some() {
            return Err(SqlError::new(
                code::UNIQUE_VIOLATION,
                "duplicate key value violates unique constraint \"pg_enum_typid_label_index\"",
            )
            .with_detail(format!(
                "Key (enumtypid, enumlabel)=({oid}, {label}) already exists."
            )));
        }
        def.labels.push(EnumLabel {
            oid: catalog.allocate_oid(),
            label: label.clone(),
            sort_order: (i + 1) as f32,
        });
    }
    catalog.put_type(def);
    Ok(StatementResult::command("CREATE TYPE"))
}

/// A name pg_catalog's types take, which PostgreSQL would also refuse in pg_catalog.
fn builtin_type_name(schema: &str, name: &str) -> bool {
    schema == "pg_catalog"
        && crate::query::pg_catalog::BUILTIN_TYPES
            .iter()
            .any(|t| t.1 == name)
}

fn check_label(label: &str) -> SqlResult<()> {
    if label.len() > LABEL_BYTES_MAX {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("invalid enum label \"{label}\""),
        )
        .with_detail(format!("Labels must be {LABEL_BYTES_MAX} bytes or less.")));
    }
    Ok(())
}

/// The enum type a (possibly qualified) name names.
fn resolve(session: &Session, name: &ast::ObjectName) -> Option<std::sync::Arc<EnumTypeDef>> {
    let t = ast::DataType::Custom(name.clone(), Vec::new());
    let search_path = session.scope.search_path.lock().clone();
    crate::types::lookup_user_type(&t, &session.engine.catalog.read(), &search_path)
}

fn undefined(name: &ast::ObjectName) -> SqlError {
    SqlError::new(
        code::UNDEFINED_OBJECT,
        format!("type \"{}\" does not exist", split_name(name).1),
    )
}

/// Puts `def` in the catalog and refreshes the columns of its type to match it.
fn replace_type(catalog: &mut Catalog, def: EnumTypeDef) -> SqlResult<()> {
    let column_type = def.column_type();
    for table in catalog.tables_using_type(def.oid) {
        let mut table = (*table).clone();
        for column in &mut table.columns {
            if matches!(&column.data_type, DataType::Enum(e) if e.oid == def.oid) {
                column.data_type = column_type.clone();
            }
        }
        catalog.replace_table(table)?;
    }
    catalog.put_type(def);
    Ok(())
}

/// ALTER TYPE name ADD VALUE [IF NOT EXISTS] 'x' [BEFORE | AFTER 'y'] | RENAME TO n.
pub(super) fn alter_type(session: &Session, at: &ast::AlterType) -> SqlResult<StatementResult> {
    let def = resolve(session, &at.name).ok_or_else(|| undefined(&at.name))?;
    let mut def = (*def).clone();
    match &at.operation {
        ast::AlterTypeOperation::AddValue(add) => {
            let label = &add.value.value;
            check_label(label)?;
            if def.position(label).is_some() {
                if add.if_not_exists {
                    return Ok(StatementResult::command("ALTER TYPE"));
                }
                return Err(SqlError::new(
                    code::DUPLICATE_OBJECT,
                    format!("enum label \"{label}\" already exists"),
                ));
            }
            let at_index = match &add.position {
                None => def.labels.len(),
                Some(
                    ast::AlterTypeAddValuePosition::Before(neighbor)
                    | ast::AlterTypeAddValuePosition::After(neighbor),
                ) => {
                    let Some(i) = def.position(&neighbor.value) else {
                        return Err(SqlError::new(
                            code::INVALID_PARAMETER_VALUE,
                            format!("\"{}\" is not an existing enum label", neighbor.value),
                        ));
                    };
                    match add.position {
                        Some(ast::AlterTypeAddValuePosition::After(_)) => i + 1,
                        _ => i,
                    }
                }
            };
            let before = at_index
                .checked_sub(1)
                .map(|i| def.labels[i].sort_order)
                .unwrap_or(0.0);
            let sort_order = match def.labels.get(at_index) {
                Some(next) => (before + next.sort_order) / 2.0,
                None => before + 1.0,
            };
            let mut catalog = session.engine.catalog.write();
            let oid = catalog.allocate_oid();
            def.labels.insert(
                at_index,
                EnumLabel {
                    oid,
                    label: label.clone(),
                    sort_order,
                },
            );
            replace_type(&mut catalog, def)?;
        }
        ast::AlterTypeOperation::Rename(rename) => {
            let new_name = super::ident(&rename.new_name);
            let mut catalog = session.engine.catalog.write();
            if catalog.lookup_type(&def.schema, &new_name).is_some()
                || catalog.lookup(&def.schema, &new_name).is_some()
            {
                return Err(SqlError::new(
                    code::DUPLICATE_OBJECT,
                    format!("type \"{new_name}\" already exists"),
                ));
            }
            def.name = new_name;
            replace_type(&mut catalog, def)?;
        }
        ast::AlterTypeOperation::RenameValue(rename) => {
            if def.position(&rename.from.value).is_none() {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    format!("\"{}\" is not an existing enum label", rename.from.value),
                ));
            }
            let in_use = !session
                .engine
                .catalog
                .read()
                .tables_using_type(def.oid)
                .is_empty();
            if in_use {
                return Err(SqlError::unsupported(
                    "ALTER TYPE ... RENAME VALUE of an enum type that columns use",
                ));
            }
            let label = &rename.to.value;
            check_label(label)?;
            if def.position(label).is_some() {
                return Err(SqlError::new(
                    code::DUPLICATE_OBJECT,
                    format!("enum label \"{label}\" already exists"),
                ));
            }
            let i = def.position(&rename.from.value).expect("checked above");
            def.labels[i].label = label.clone();
            replace_type(&mut session.engine.catalog.write(), def)?;
        }
    }
    Ok(StatementResult::command("ALTER TYPE"))
}

/// DROP TYPE [IF EXISTS] name, ...: refused while a column has the type.
pub(super) fn drop_types(
    session: &Session,
    if_exists: bool,
    names: &[ast::ObjectName],
    cascade: bool,
) -> SqlResult<StatementResult> {
    let mut targets: Vec<Oid> = Vec::new();
    for name in names {
        match resolve(session, name) {
            Some(def) => targets.push(def.oid),
            None if if_exists => session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("type \"{name}\" does not exist, skipping"),
            ),
            None => return Err(undefined(name)),
        }
    }
    let mut catalog = session.engine.catalog.write();
    for oid in &targets {
        let Some(table) = catalog.tables_using_type(*oid).into_iter().next() else {
            continue;
        };
        let type_name = &catalog.types[oid].name;
        let column = table
            .columns
            .iter()
            .find(|c| matches!(&c.data_type, DataType::Enum(e) if e.oid == *oid))
            .map_or("", |c| c.name.as_str());
        if cascade {
            return Err(SqlError::unsupported(
                "DROP TYPE ... CASCADE of a type that columns use",
            ));
        }
        return Err(SqlError::new(
            code::DEPENDENT_OBJECTS_STILL_EXIST,
            format!("cannot drop type {type_name} because other objects depend on it"),
        )
        .with_detail(format!(
            "column {column} of table {} depends on type {type_name}",
            table.name
        ))
        .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
    }
    for oid in targets {
        catalog.remove_type(oid);
    }
    Ok(StatementResult::command("DROP TYPE"))
}
