//! Variables in embedded SQL. PostgreSQL's PL/pgSQL hands each statement to the SQL parser
//! with a hook that turns a name it cannot otherwise resolve into the variable's value; Shoal
//! parses the statement and replaces, in its expressions, every name that is a variable (`x`,
//! `blk.x`, `rec.field`, `fname.param`) by the variable's value as a typed literal. A name that
//! is both a variable and a column of a table the statement reads is ambiguous, as under
//! PostgreSQL's default `plpgsql.variable_conflict = error`.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, Expr, Ident, Statement, VisitMut, VisitorMut};

use shoal_storage::types::{DataType, Value};

use super::vars::{unassigned_record, Datum, Scopes, VarType};
use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;

/// An identifier as PostgreSQL reads it: unquoted ones fold to lower case.
pub fn ident_name(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_ascii_lowercase(),
    }
}

/// The variable (or record field) a name denotes, if any.
pub fn resolve_name(scopes: &Scopes, parts: &[String]) -> SqlResult<Option<Datum>> {
    match parts {
        [name] => Ok(scopes.find(name).map(|r| scopes.get(r).value.clone())),
        [first, second] => {
            if let Some(r) = scopes.find(first) {
                let var = scopes.get(r);
                return match &var.value {
                    Datum::Row(fields) => match fields.iter().find(|f| &f.name == second) {
                        Some(f) => Ok(Some(Datum::Scalar(f.data_type.clone(), f.value.clone()))),
                        None => Err(SqlError::new(
                            code::UNDEFINED_COLUMN,
                            format!("record \"{first}\" has no field \"{second}\""),
                        )),
                    },
                    // A trigger's NEW or OLD where the event has none (NEW of a DELETE, both
                    // in a statement trigger) is NULL of the table's row type, as in
                    // PostgreSQL 11 and later: its fields read as NULL.
                    Datum::Unassigned => match &var.var_type {
                        VarType::Row(columns) => match columns.iter().find(|(n, _)| n == second) {
                            Some((_, t)) => Ok(Some(Datum::null(t))),
                            None => Err(SqlError::new(
                                code::UNDEFINED_COLUMN,
                                format!("record \"{first}\" has no field \"{second}\""),
                            )),
                        },
                        _ => Err(unassigned_record(first)),
                    },
                    // `x.y` where x is a scalar: a table-qualified column, not the variable.
                    Datum::Scalar(..) => Ok(None),
                };
            }
            Ok(scopes
                .find_qualified(first, second)
                .map(|r| scopes.get(r).value.clone()))
        }
        [label, record, field] => {
            let Some(r) = scopes.find_qualified(label, record) else {
                return Ok(None);
            };
            match &scopes.get(r).value {
                Datum::Row(fields) => Ok(fields
                    .iter()
                    .find(|f| &f.name == field)
                    .map(|f| Datum::Scalar(f.data_type.clone(), f.value.clone()))),
                _ => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

/// Replaces the variables in `stmt`'s expressions by their values. `columns` are the column
/// names of the tables the statement reads, for the ambiguity check.
pub fn substitute(
    stmt: &mut Statement,
    scopes: &Scopes,
    columns: &HashSet<String>,
    zone: &TimeZone,
) -> SqlResult<()> {
    let mut v = Substituter {
        scopes,
        columns,
        zone,
        error: None,
    };
    let _ = stmt.visit(&mut v);
    match v.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Substituter<'a> {
    scopes: &'a Scopes,
    columns: &'a HashSet<String>,
    zone: &'a TimeZone,
    error: Option<SqlError>,
}

impl Substituter<'_> {
    fn replacement(&self, e: &Expr) -> SqlResult<Option<Expr>> {
        let parts: Vec<String> = match e {
            Expr::Identifier(i) => vec![ident_name(i)],
            Expr::Value(v) => match &v.value {
                ast::Value::Placeholder(p) => vec![p.clone()],
                _ => return Ok(None),
            },
            Expr::CompoundIdentifier(ids) => ids.iter().map(ident_name).collect(),
            _ => return Ok(None),
        };
        let Some(datum) = resolve_name(self.scopes, &parts)? else {
            return Ok(None);
        };
        if parts.len() == 1 && self.columns.contains(&parts[0]) {
            return Err(SqlError::new(
                code::AMBIGUOUS_COLUMN,
                format!("column reference \"{}\" is ambiguous", parts[0]),
            )
            .with_detail("It could refer to either a PL/pgSQL variable or a table column."));
        }
        datum.to_expr(self.zone).map(Some)
    }
}

impl Substituter<'_> {
    /// `a[i]` where `a` is an array variable and `i` an integer constant or variable: the
    /// element itself, as a literal of the element type (NULL past the ends). A statement that
    /// reads `stock` by `s_i_id = p_item_ids[i]` then has a constant key, which finds its row
    /// by the index instead of comparing the subscript with every row.
    fn element(&self, e: &Expr) -> SqlResult<Option<Expr>> {
        let Expr::CompoundFieldAccess { root, access_chain } = e else {
            return Ok(None);
        };
        let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = access_chain.as_slice()
        else {
            return Ok(None);
        };
        let Expr::Identifier(array) = root.as_ref() else {
            return Ok(None);
        };
        let name = ident_name(array);
        if self.columns.contains(&name) {
            return Ok(None);
        }
        let Some(Datum::Scalar(DataType::Array(element), items)) =
            resolve_name(self.scopes, std::slice::from_ref(&name))?
        else {
            return Ok(None);
        };
        let at = match index {
            Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => n.parse::<i64>().ok(),
                _ => return Ok(None),
            },
            Expr::Identifier(i) => {
                let i = ident_name(i);
                if self.columns.contains(&i) {
                    return Ok(None);
                }
                match resolve_name(self.scopes, std::slice::from_ref(&i))? {
                    Some(Datum::Scalar(_, Value::Int16(n))) => Some(n as i64),
                    Some(Datum::Scalar(_, Value::Int32(n))) => Some(n as i64),
                    Some(Datum::Scalar(_, Value::Int64(n))) => Some(n),
                    Some(Datum::Scalar(_, Value::Null)) => None,
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let value = match (items, at) {
            (Value::Array(items), Some(at)) if at >= 1 => usize::try_from(at - 1)
                .ok()
                .and_then(|i| items.get(i).cloned())
                .unwrap_or(Value::Null),
            _ => Value::Null,
        };
        super::vars::literal(&element, &value, self.zone).map(Some)
    }
}

impl VisitorMut for Substituter<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match self.element(expr) {
            Ok(Some(value)) => {
                *expr = Expr::Nested(Box::new(value));
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match self.replacement(expr) {
            Ok(Some(value)) => {
                *expr = Expr::Nested(Box::new(value));
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// The tables whose columns a statement's names can mean: those it reads from (FROM, JOIN,
/// UPDATE's target, DELETE's), not an INSERT's target, whose columns are only named in its
/// column list.
pub fn read_tables(stmt: &Statement) -> Vec<ast::ObjectName> {
    let mut names = Vec::new();
    let mut collect = |s: &Statement| {
        let _ = ast::visit_relations(s, |name| {
            names.push(name.clone());
            ControlFlow::<()>::Continue(())
        });
    };
    match stmt {
        Statement::Insert(insert) => {
            if let Some(source) = &insert.source {
                collect(&Statement::Query(source.clone()));
            }
        }
        other => collect(other),
    }
    names
}

/// A trigger's `TG_ARGV` counts from 0, as PostgreSQL's does, where Shoal's arrays count from
/// 1: each `tg_argv[i]` in `stmt` becomes `tg_argv[(i) + 1]`.
pub fn zero_based_tg_argv(stmt: &mut Statement) {
    let _ = ast::visit_expressions_mut(stmt, |e| {
        if let Expr::CompoundFieldAccess { root, access_chain } = e {
            let is_argv =
                matches!(root.as_ref(), Expr::Identifier(i) if ident_name(i) == "tg_argv");
            if let (true, Some(ast::AccessExpr::Subscript(ast::Subscript::Index { index }))) =
                (is_argv, access_chain.first_mut())
            {
                let zero_based = std::mem::replace(index, Expr::value(ast::Value::Null));
                *index = Expr::BinaryOp {
                    left: Box::new(Expr::Nested(Box::new(zero_based))),
                    op: ast::BinaryOperator::Plus,
                    right: Box::new(Expr::value(ast::Value::Number("1".into(), false))),
                };
            }
        }
        ControlFlow::<()>::Continue(())
    });
}
