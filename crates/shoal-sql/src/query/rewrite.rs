//! Rewrites a parsed statement into something DataFusion can plan with PostgreSQL's meaning:
//! views become subqueries, `::regclass`-style casts become catalog lookups, `pg_catalog.`
//! function prefixes and COLLATE clauses are dropped, `OPERATOR(pg_catalog.~)` becomes the
//! plain operator, and PostgreSQL-only type names map to ones DataFusion knows.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, Ident, ObjectName, ObjectNamePart, TableAlias,
    TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use shoal_storage::catalog::RelationKind;

use crate::error::{SqlError, SqlResult};
use crate::query::scope::PlanScope;

/// Maximum depth of views referring to views, so a cycle cannot loop forever.
const VIEW_NESTING_MAX: usize = 32;

pub fn rewrite_statement(stmt: &mut ast::Statement, scope: &PlanScope) -> SqlResult<()> {
    for _ in 0..VIEW_NESTING_MAX {
        let mut v = Rewriter {
            scope,
            error: None,
            expanded_view: false,
        };
        let _ = stmt.visit(&mut v);
        if let Some(e) = v.error {
            return Err(e);
        }
        if !v.expanded_view {
            return Ok(());
        }
    }
    Err(SqlError::new(
        crate::error::code::PROGRAM_LIMIT_EXCEEDED,
        "views nested too deeply",
    ))
}

struct Rewriter<'a> {
    scope: &'a PlanScope,
    error: Option<SqlError>,
    expanded_view: bool,
}

pub fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn object_name_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => {
                if i.quote_style.is_some() {
                    i.value.clone()
                } else {
                    i.value.to_lowercase()
                }
            }
            other => other.to_string(),
        })
        .collect()
}

fn custom_type_name(t: &DataType) -> Option<String> {
    match t {
        DataType::Custom(name, _) => object_name_parts(name).last().cloned(),
        DataType::Regclass => Some("regclass".into()),
        _ => None,
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let parts = object_name_parts(name);
        let (schema, rel) = match parts.as_slice() {
            [rel] => (None, rel.clone()),
            [schema, rel] => (Some(schema.clone()), rel.clone()),
            _ => return ControlFlow::Continue(()),
        };
        let Some((_, RelationKind::View, oid)) =
            self.scope.resolve_relation(schema.as_deref(), &rel)
        else {
            return ControlFlow::Continue(());
        };
        let Some(view) = self.scope.engine.catalog.read().views.get(&oid).cloned() else {
            return ControlFlow::Continue(());
        };
        let query = match Parser::new(&PostgreSqlDialect {})
            .try_with_sql(&view.query_sql)
            .and_then(|mut p| p.parse_query())
        {
            Ok(q) => q,
            Err(e) => {
                self.error = Some(SqlError::internal(format!(
                    "stored view \"{rel}\" does not parse: {e}"
                )));
                return ControlFlow::Break(());
            }
        };
        let alias = alias.clone().unwrap_or(TableAlias {
            explicit: true,
            name: Ident::new(rel.clone()),
            columns: view
                .column_names
                .iter()
                .map(|c| ast::TableAliasColumnDef::from_name(c.clone()))
                .collect(),
            at: None,
        });
        *factor = TableFactor::Derived {
            lateral: false,
            subquery: query,
            alias: Some(alias),
            sample: None,
        };
        self.expanded_view = true;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Cast {
                kind: CastKind::DoubleColon | CastKind::Cast,
                expr: inner,
                data_type,
                ..
            } => {
                if let Some(name) = custom_type_name(data_type) {
                    let replacement = match name.as_str() {
                        "regclass" => {
                            Some(function_call("to_regclass_oid", vec![cast_text(inner)]))
                        }
                        "regtype" => Some(function_call("to_regtype_oid", vec![cast_text(inner)])),
                        "oid" | "regproc" | "regnamespace" | "regrole" | "xid" | "cid" => {
                            Some(Expr::Cast {
                                kind: CastKind::Cast,
                                expr: inner.clone(),
                                data_type: DataType::BigInt(None),
                                array: false,
                                format: None,
                            })
                        }
                        "name" | "bpchar" | "char" | "citext" | "regprocedure" => {
                            Some(Expr::Cast {
                                kind: CastKind::Cast,
                                expr: inner.clone(),
                                data_type: DataType::Text,
                                array: false,
                                format: None,
                            })
                        }
                        "int2" => Some(retype(inner, DataType::SmallInt(None))),
                        "int4" => Some(retype(inner, DataType::Int(None))),
                        "int8" => Some(retype(inner, DataType::BigInt(None))),
                        "float4" => Some(retype(inner, DataType::Real)),
                        "float8" => Some(retype(inner, DataType::DoublePrecision)),
                        "timestamptz" => Some(retype(
                            inner,
                            DataType::Timestamp(None, ast::TimezoneInfo::WithTimeZone),
                        )),
                        _ => None,
                    };
                    if let Some(r) = replacement {
                        *expr = r;
                    }
                } else if matches!(data_type, DataType::Uuid) {
                    *data_type = DataType::Text;
                } else if let DataType::Char(_) | DataType::Character(_) = data_type {
                    *data_type = DataType::Text;
                }
            }
            Expr::Function(f) => {
                let parts = object_name_parts(&f.name);
                if parts.len() == 2 && parts[0] == "pg_catalog" {
                    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                        parts[1].clone(),
                    ))]);
                }
            }
            Expr::Collate { expr: inner, .. } => {
                *expr = (**inner).clone();
            }
            Expr::BinaryOp {
                op: BinaryOperator::PGCustomBinaryOperator(parts),
                ..
            } => {
                let mapped = match parts.last().map(|s| s.as_str()) {
                    Some("~") => Some(BinaryOperator::PGRegexMatch),
                    Some("~*") => Some(BinaryOperator::PGRegexIMatch),
                    Some("!~") => Some(BinaryOperator::PGRegexNotMatch),
                    Some("!~*") => Some(BinaryOperator::PGRegexNotIMatch),
                    Some("=") => Some(BinaryOperator::Eq),
                    Some("<>") => Some(BinaryOperator::NotEq),
                    Some("<") => Some(BinaryOperator::Lt),
                    Some(">") => Some(BinaryOperator::Gt),
                    _ => None,
                };
                if let (Some(m), Expr::BinaryOp { op, .. }) = (mapped, &mut *expr) {
                    *op = m;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn cast_text(e: &Expr) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e.clone()),
        data_type: DataType::Text,
        array: false,
        format: None,
    }
}

fn retype(e: &Expr, t: DataType) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e.clone()),
        data_type: t,
        array: false,
        format: None,
    }
}
