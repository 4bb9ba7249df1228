//! Functions in FROM, rewritten so their columns are named and typed as PostgreSQL's:
//! `generate_series` of integers, `unnest ... WITH ORDINALITY`, and the column a scalar
//! set-returning function gets from its alias.

use datafusion::sql::sqlparser::ast::{
    self, Expr, FunctionArg, FunctionArgExpr, Ident, TableAlias, TableFactor,
};

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::{function_call, object_name_parts};

/// Set-returning functions whose rows are one scalar value each.
const SCALAR_SET_FUNCTIONS: [&str; 3] = ["generate_series", "unnest", "pg_catalog.generate_series"];

/// In PostgreSQL a function in FROM that returns a scalar type names its one column after the
/// alias: `FROM generate_series(1, 3) AS n` has a column `n` (pgbench's server-side data
/// generation relies on it). DataFusion names it after the function, so the alias gets a
/// column list.
/// `generate_series` of integers is a series of integers (int4) in PostgreSQL; DataFusion's
/// gives bigints. Over integer literals (the usual `generate_series(1, 10)`), the series is
/// read through a cast to integer, under the name PostgreSQL gives its column.
pub(super) fn integer_series(factor: &mut TableFactor) {
    let TableFactor::Table {
        name,
        alias,
        args: Some(args),
        ..
    } = factor
    else {
        return;
    };
    if !matches!(object_name_parts(name).as_slice(), [n] if n == "generate_series") {
        return;
    }
    // Integer literals, and beside one, the parameters, quoted literals and computed bounds
    // PostgreSQL then reads as integers (`generate_series(1, $1)`, `generate_series(1, '5')`,
    // pgJDBC's `generate_series(1, array_upper(current_schemas(false), 1))`). A series of
    // timestamps has no integer literal and stays as it is.
    let mut all_literals = true;
    let mut any_literal = false;
    // A computed bound may be a bigint (`1::bigint`): the series stays bigint then.
    let mut computed = false;
    let bounds: Option<Vec<String>> = args
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                if let Some(v) = crate::query::select_srf::int4_literal(e) {
                    any_literal = true;
                    return Some(format!("CAST({v} AS bigint)"));
                }
                all_literals = false;
                let unknown = matches!(
                    e,
                    Expr::Value(v) if matches!(
                        v.value,
                        ast::Value::Placeholder(_) | ast::Value::SingleQuotedString(_)
                    )
                );
                if unknown {
                    return Some(format!("CAST(CAST({e} AS integer) AS bigint)"));
                }
                computed = true;
                (!names_a_column(e)).then(|| format!("CAST({e} AS bigint)"))
            }
            _ => None,
        })
        .collect();
    let Some(bounds) = bounds.filter(|b| (2..=3).contains(&b.len()) && any_literal) else {
        return;
    };
    let column = match alias {
        Some(a) if !a.columns.is_empty() => a.columns[0].name.value.clone(),
        Some(a) => a.name.value.clone(),
        None => "generate_series".to_string(),
    };
    let column = crate::query::functions::quote_ident_if_needed(&column);
    // The table function takes literals only; the list-returning one takes any expression.
    let sql = if all_literals {
        format!(
            "SELECT CAST(value AS integer) AS {column} FROM generate_series({})",
            bounds.join(", ")
        )
    } else if computed {
        format!(
            "SELECT unnest(generate_series({})) AS {column}",
            bounds.join(", ")
        )
    } else {
        format!(
            "SELECT CAST(unnest(generate_series({})) AS integer) AS {column}",
            bounds.join(", ")
        )
    };
    let Ok(query) = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
    else {
        return;
    };
    let alias = alias.clone().unwrap_or(TableAlias {
        explicit: false,
        name: Ident::new("generate_series"),
        columns: vec![],
        at: None,
    });
    *factor = TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: Some(alias),
        sample: None,
    };
}

/// `unnest(a, b) WITH ORDINALITY` numbers the rows from 1: DataFusion has no ordinality, but
/// its unnest of several arrays runs them side by side as PostgreSQL's does (the shorter padded
/// with NULLs), so the numbers become one more array, `generate_series(1, n)` for the longest
/// array's length n. A NULL or empty array gives no rows either way.
pub(super) fn unnest_with_ordinality(factor: &mut TableFactor) {
    let TableFactor::UNNEST {
        array_exprs,
        with_ordinality,
        with_offset: false,
        ..
    } = factor
    else {
        return;
    };
    if !*with_ordinality || array_exprs.is_empty() {
        return;
    }
    let lengths: Vec<Expr> = array_exprs
        .iter()
        .map(|a| function_call("cardinality", vec![a.clone()]))
        .collect();
    let longest = if lengths.len() == 1 {
        lengths.into_iter().next().expect("one length")
    } else {
        function_call("greatest", lengths)
    };
    let one = Expr::value(ast::Value::Number("1".into(), false));
    array_exprs.push(function_call("generate_series", vec![one, longest]));
    *with_ordinality = false;
}

/// Whether `e` reads a column (an identifier that is not a function's name).
fn names_a_column(e: &Expr) -> bool {
    ast::visit_expressions(e, |e| match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

pub(super) fn name_scalar_function_column(factor: &mut TableFactor) {
    if let TableFactor::UNNEST {
        alias: Some(alias),
        array_exprs,
        with_offset: false,
        with_ordinality: false,
        ..
    } = factor
    {
        if alias.columns.is_empty() && array_exprs.len() == 1 {
            alias.columns = vec![ast::TableAliasColumnDef::from_name(
                alias.name.value.clone(),
            )];
        }
        return;
    }
    let TableFactor::Table {
        name,
        alias: Some(alias),
        args: Some(_),
        ..
    } = factor
    else {
        return;
    };
    let function = name.to_string().to_lowercase();
    if alias.columns.is_empty() && SCALAR_SET_FUNCTIONS.contains(&function.as_str()) {
        alias.columns = vec![ast::TableAliasColumnDef::from_name(
            alias.name.value.clone(),
        )];
    }
}
