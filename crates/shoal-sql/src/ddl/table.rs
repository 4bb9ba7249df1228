//! CREATE TABLE and CREATE TABLE AS: the columns (from the column list or from the query's
//! result), the sequences of serial and identity columns, the table's access method and
//! storage, and its constraints, which are added once the table exists and drop it again if
//! one of them fails (a unique key over the rows of CREATE TABLE AS, say).

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::catalog::{AccessMethod, ColumnDef, Identity, Oid, TableDef};
use shoal_storage::Transaction;

use super::alter::{
    add_constraint, pending_from_table_constraint, referential_action, PendingConstraint,
};
use super::drop::drop_table_by_oid;
use super::sequence::sequence_def;
use super::{access_method, creation_target, ident};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};
use crate::types::is_serial_type;

/// A column that takes its values from a sequence the table owns (serial or identity): its
/// position, its identity (None for serial) and the sequence's options.
type Serial = (usize, Option<Identity>, Vec<ast::SequenceOptions>);

pub(super) async fn create_table(
    session: &mut Session,
    txn: &mut Transaction,
    mut ct: ast::CreateTable,
) -> SqlResult<StatementResult> {
    if let Some(like) = ct.like.take() {
        let columns = like_columns(session, &like)?;
        ct.columns.splice(0..0, columns);
    }
    // sqlparser reads PostgreSQL's declarative partitioning; Shoal does not route rows to
    // partitions, so it refuses rather than create a plain table (pgbench -i --partitions).
    if ct.partition_by.is_some() || ct.partition_of.is_some() {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "partitioned tables are not supported",
        ));
    }
    // Table inheritance would need the parent's columns and scans that include the children;
    // refused rather than ignored.
    if ct.inherits.is_some() {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "table inheritance (INHERITS) is not supported",
        ));
    }
    // sqlparser takes some of PostgreSQL's reserved words as table names (`CREATE TABLE
    // select (...)`), which PostgreSQL refuses.
    if let Some(ast::ObjectNamePart::Identifier(last)) = ct.name.0.last() {
        let word = last.value.to_lowercase();
        if last.quote_style.is_none()
            && crate::query::checks::RESERVED_KEYWORDS.contains(&word.as_str())
        {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{}\"",
                last.value
            )));
        }
    }
    let (schema, name) = creation_target(session, &ct.name)?;
    if session
        .engine
        .catalog
        .read()
        .lookup(&schema, &name)
        .is_some()
    {
        if ct.if_not_exists {
            session.scope.notice(
                code::DUPLICATE_TABLE,
                format!("relation \"{name}\" already exists, skipping"),
            );
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
    let mut pending: Vec<PendingConstraint> = Vec::new();
    let mut serials: Vec<Serial> = Vec::new();
    let columns = match &ct.query {
        Some(q) => columns_of_query(session, &ct, q).await?,
        None => listed_columns(session, &ct, &mut pending, &mut serials)?,
    };
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
    let oid = insert_table(
        session,
        &schema,
        &name,
        columns,
        &serials,
        access_method,
        options,
    )?;
    for p in pending {
        if let Err(e) = add_constraint(session, oid, p).await {
            drop_table_by_oid(session, oid);
            return Err(e);
        }
    }
    if let Some(q) = &ct.query {
        return insert_query_rows(session, txn, oid, q).await;
    }
    Ok(StatementResult::command("CREATE TABLE"))
}

/// CREATE TABLE AS: the columns of the query's result, named by the column list if it has one.
async fn columns_of_query(
    session: &Session,
    ct: &ast::CreateTable,
    query: &ast::Query,
) -> SqlResult<Vec<ColumnDef>> {
    let plan = crate::query::plan_statement(
        session.state(),
        &session.scope,
        Statement::Query(Box::new(query.clone())),
    )
    .await?;
    // A column read as it is keeps its type: varchar(n) stays varchar(n), not text. Only a
    // plain column of the top projection: field metadata also survives casts and set
    // operations, where the column's type is not the result's.
    let bare = bare_columns(&plan);
    let fields: Vec<(String, shoal_storage::DataType)> = plan
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let t = if bare.get(i).copied().unwrap_or(false) {
                crate::types::storage_type_of_field(f)
            } else {
                crate::params::storage_type_for_arrow(f.data_type())
            };
            (f.name().clone(), t)
        })
        .collect();
    let mut columns: Vec<ColumnDef> = Vec::new();
    for (i, (n, t)) in fields.into_iter().enumerate() {
        let name = ct.columns.get(i).map(|c| ident(&c.name)).unwrap_or(n);
        columns.push(ColumnDef {
            name,
            data_type: t,
            not_null: false,
            default_sql: None,
            identity: None,
        });
    }
    Ok(columns)
}

/// For each output column of a query plan, whether it is a column read as it is (the top
/// projection's expression is a column reference, under Sort and Limit).
fn bare_columns(plan: &datafusion::logical_expr::LogicalPlan) -> Vec<bool> {
    use datafusion::logical_expr::{Expr, LogicalPlan};
    match plan {
        LogicalPlan::Sort(s) => bare_columns(&s.input),
        LogicalPlan::Limit(l) => bare_columns(&l.input),
        LogicalPlan::Projection(p) => p
            .expr
            .iter()
            .map(|e| matches!(e.clone().unalias(), Expr::Column(_)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The columns of CREATE TABLE's column list, with what their options add: constraints to
/// create once the table exists (`pending`) and sequences for serial and identity columns
/// (`serials`).
fn listed_columns(
    session: &Session,
    ct: &ast::CreateTable,
    pending: &mut Vec<PendingConstraint>,
    serials: &mut Vec<Serial>,
) -> SqlResult<Vec<ColumnDef>> {
    let mut columns: Vec<ColumnDef> = Vec::new();
    for (i, c) in ct.columns.iter().enumerate() {
        let col_name = ident(&c.name);
        if columns.iter().any(|x| x.name == col_name) {
            return Err(SqlError::new(
                code::DUPLICATE_COLUMN,
                format!("column \"{col_name}\" specified more than once"),
            ));
        }
        let data_type = super::column_type(session, &c.data_type)?;
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
            column_option(&mut col, i, opt, pending, serials)?;
        }
        columns.push(col);
    }
    Ok(columns)
}

/// One option of column `i` in CREATE TABLE: NOT NULL and DEFAULT change the column; key,
/// check and foreign key constraints wait in `pending`; identity adds a sequence to `serials`.
fn column_option(
    col: &mut ColumnDef,
    i: usize,
    opt: &ast::ColumnOptionDef,
    pending: &mut Vec<PendingConstraint>,
    serials: &mut Vec<Serial>,
) -> SqlResult<()> {
    let col_name = &col.name;
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
        }),
        ast::ColumnOption::ForeignKey(fk) => {
            // One column: MATCH FULL means what MATCH SIMPLE does.
            crate::ddl::alter::check_match_kind(fk.match_kind.as_ref(), 1)?;
            pending.push(PendingConstraint::Foreign {
                name: opt.name.as_ref().or(fk.name.as_ref()).map(ident),
                columns: vec![col_name.clone()],
                table: fk.foreign_table.clone(),
                ref_columns: fk.referred_columns.iter().map(ident).collect(),
                on_delete: referential_action(&fk.on_delete),
                on_update: referential_action(&fk.on_update),
                timing: crate::ddl::alter::constraint_timing(fk.characteristics.as_ref())?,
            })
        }
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
    Ok(())
}

/// Creates the table's catalog entry, with the sequences its serial and identity columns own,
/// and its storage; returns its oid.
fn insert_table(
    session: &Session,
    schema: &str,
    name: &str,
    mut columns: Vec<ColumnDef>,
    serials: &[Serial],
    access_method: AccessMethod,
    options: Vec<String>,
) -> SqlResult<Oid> {
    let mut catalog = session.engine.catalog.write();
    let oid = catalog.allocate_oid();
    for (col, identity, seq_opts) in serials {
        let seq_name = format!("{name}_{}_seq", columns[*col].name);
        let t = columns[*col].data_type.clone();
        let seq = sequence_def(
            &mut catalog,
            schema,
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
        schema: schema.to_string(),
        name: name.to_string(),
        columns,
        constraints: vec![],
        access_method,
        options,
        triggers: vec![],
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
    Ok(oid)
}

/// CREATE TABLE AS: fills the new table with the query's rows through INSERT, and drops the
/// table again if that fails.
async fn insert_query_rows(
    session: &mut Session,
    txn: &mut Transaction,
    oid: Oid,
    q: &ast::Query,
) -> SqlResult<StatementResult> {
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

/// The columns of `CREATE TABLE t (LIKE source [INCLUDING | EXCLUDING DEFAULTS])`: the
/// source's names, types and NOT NULL constraints, and its defaults if asked for, as
/// PostgreSQL copies them (other constraints, indexes and identities are not copied).
fn like_columns(
    session: &Session,
    like: &ast::CreateTableLikeKind,
) -> SqlResult<Vec<ast::ColumnDef>> {
    let (ast::CreateTableLikeKind::Parenthesized(like) | ast::CreateTableLikeKind::Plain(like)) =
        like;
    let (def, _) = crate::dml::resolve_store(session, &like.name)?;
    let with_defaults = matches!(like.defaults, Some(ast::CreateTableLikeDefaults::Including));
    let columns: Vec<String> = def
        .columns
        .iter()
        .map(|c| {
            let mut sql = format!(
                "{} {}",
                crate::dml::quote_ident(&c.name),
                crate::types::format_type(&c.data_type)
            );
            if c.not_null {
                sql.push_str(" NOT NULL");
            }
            if let (true, Some(default)) = (with_defaults, &c.default_sql) {
                sql.push_str(&format!(" DEFAULT {default}"));
            }
            sql
        })
        .collect();
    let sql = format!("CREATE TABLE like_source ({})", columns.join(", "));
    match crate::parse::parse_statements(&sql)?.pop() {
        Some(Statement::CreateTable(parsed)) => Ok(parsed.columns),
        _ => Err(SqlError::internal("LIKE: the copied columns did not parse")),
    }
}
