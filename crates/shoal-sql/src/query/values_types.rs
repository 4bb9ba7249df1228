//! Column types of a VALUES list as PostgreSQL resolves them, set on the statement before
//! DataFusion types the list: integer literals are int4 where they fit, and a column that mixes
//! decimals or integers with numerics is numeric.

use datafusion::sql::sqlparser::ast::{self, DataType, Expr};

use crate::query::rewrite::{function_call, object_name_parts};

/// DataFusion types a VALUES list while planning it and refuses a column whose rows mix its
/// decimals or integers with numerics (`VALUES (round(1.25, 1)), (2.5)`), which PostgreSQL
/// resolves to numeric. In a column that holds a decimal literal or a numeric cast, and no
/// float cast, every row is made numeric (`pg_numeric`) before DataFusion sees it.
pub fn numeric_values_columns(values: &mut ast::Values) {
    if values.rows.len() < 2 {
        return;
    }
    let columns = values
        .rows
        .iter()
        .map(|r| r.content.len())
        .min()
        .unwrap_or(0);
    for c in 0..columns {
        let cells = || values.rows.iter().map(move |row| &row.content[c]);
        let casts = cells().filter(|e| is_numeric_cast(e)).count();
        let decimal = cells().any(is_decimal_literal);
        let computed = cells().any(|e| !matches!(e, Expr::Value(_)) && !is_decimal_literal(e));
        let float = cells().any(is_float_cast);
        // A numeric beside anything else, or a decimal literal beside an expression (which
        // may be numeric): DataFusion's own typing would refuse the mix.
        let mixed = (casts > 0 && casts < values.rows.len()) || (decimal && computed);
        if float || !mixed {
            continue;
        }
        for row in &mut values.rows {
            let cell = &mut row.content[c];
            if !is_numeric_cast(cell) {
                *cell = function_call("pg_numeric", vec![cell.clone()]);
            }
        }
    }
}

/// Integer literals in a VALUES list are integers (int4) where they fit, as in PostgreSQL;
/// DataFusion types every integer literal there as bigint. A column that also holds a bigint
/// still becomes bigint.
pub fn integer_values(values: &mut ast::Values) {
    for row in &mut values.rows {
        for cell in &mut row.content {
            if fits_int4(cell) {
                *cell = Expr::Cast {
                    kind: ast::CastKind::Cast,
                    expr: Box::new(cell.clone()),
                    data_type: ast::DataType::Int(None),
                    array: false,
                    format: None,
                };
            }
        }
    }
}

/// Whether `e` is an integer literal (or its negation) within int4's range.
fn fits_int4(e: &Expr) -> bool {
    let text = match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.clone(),
            _ => return false,
        },
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => format!("-{n}"),
                _ => return false,
            },
            _ => return false,
        },
        _ => return false,
    };
    text.parse::<i32>().is_ok()
}

fn is_decimal_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => {
            matches!(&v.value, ast::Value::Number(n, _) if n.contains(['.', 'e', 'E']))
        }
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => is_decimal_literal(expr),
        Expr::Nested(inner) => is_decimal_literal(inner),
        _ => false,
    }
}

fn is_numeric_cast(e: &Expr) -> bool {
    matches!(e, Expr::Function(f) if object_name_parts(&f.name).as_slice() == ["pg_numeric"])
}

fn is_float_cast(e: &Expr) -> bool {
    match e {
        Expr::Cast { data_type, .. } => matches!(
            data_type,
            DataType::Real
                | DataType::Float4
                | DataType::Float8
                | DataType::Float(_)
                | DataType::Double(_)
                | DataType::DoublePrecision
        ),
        Expr::Nested(inner) => is_float_cast(inner),
        _ => false,
    }
}
