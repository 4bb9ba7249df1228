//! Row-value comparisons, `(a, b) < (c, d)`, as PostgreSQL evaluates them: pairwise from the
//! left, the first pair that is not equal decides, a NULL there makes the answer NULL. That is
//! `a < c OR (a = c AND b < d)` for `<` (and `<=`, `>`, `>=` alike, the last pair taking the
//! operator itself), the AND of the pairs' equalities for `=`, and the OR of their `<>` for
//! `<>`; SQL's three-valued AND and OR give PostgreSQL's NULLs. Written as such, the
//! comparison's first columns can also narrow an index read.

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr};

use crate::error::{SqlError, SqlResult};

/// The expansion of `left op right` when both sides are row values of two or more fields;
/// None when it is not a row-value comparison.
pub fn expand(left: &Expr, op: &BinaryOperator, right: &Expr) -> Option<SqlResult<Expr>> {
    let (Expr::Tuple(l), Expr::Tuple(r)) = (left, right) else {
        return None;
    };
    let ordering = matches!(
        op,
        BinaryOperator::Lt | BinaryOperator::LtEq | BinaryOperator::Gt | BinaryOperator::GtEq
    );
    if !ordering && !matches!(op, BinaryOperator::Eq | BinaryOperator::NotEq) {
        return None;
    }
    if l.len() != r.len() {
        return Some(Err(SqlError::syntax(
            "unequal number of entries in row expressions",
        )));
    }
    if l.len() < 2 {
        return None;
    }
    let pair = |i: usize, op: BinaryOperator| Expr::BinaryOp {
        left: Box::new(nested(&l[i])),
        op,
        right: Box::new(nested(&r[i])),
    };
    let join = |a: Expr, op: BinaryOperator, b: Expr| {
        Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(a),
            op,
            right: Box::new(b),
        }))
    };
    let n = l.len();
    Some(Ok(match op {
        BinaryOperator::Eq => (1..n).fold(pair(0, BinaryOperator::Eq), |acc, i| {
            join(acc, BinaryOperator::And, pair(i, BinaryOperator::Eq))
        }),
        BinaryOperator::NotEq => (1..n).fold(pair(0, BinaryOperator::NotEq), |acc, i| {
            join(acc, BinaryOperator::Or, pair(i, BinaryOperator::NotEq))
        }),
        _ => {
            // From the last pair outwards: pair_i strict OR (pair_i equal AND rest).
            let strict = match op {
                BinaryOperator::Lt | BinaryOperator::LtEq => BinaryOperator::Lt,
                _ => BinaryOperator::Gt,
            };
            let mut rest = pair(n - 1, op.clone());
            for i in (0..n - 1).rev() {
                let equal_then_rest = join(pair(i, BinaryOperator::Eq), BinaryOperator::And, rest);
                rest = join(pair(i, strict.clone()), BinaryOperator::Or, equal_then_rest);
            }
            rest
        }
    }))
}

/// `(a, b) IN ((1, 2), (3, 4))` as PostgreSQL defines it: the OR of the row equalities
/// (`NOT IN`, the negation of that OR). Written out, each value is compared with its column,
/// which types parameters as the columns (`(name, age) IN (($1, $2), ...)`, GORM's composite
/// keys). None when it is not a row-value IN list.
pub fn expand_in_list(e: &Expr) -> Option<SqlResult<Expr>> {
    let Expr::InList {
        expr,
        list,
        negated,
    } = e
    else {
        return None;
    };
    if !matches!(expr.as_ref(), Expr::Tuple(l) if l.len() >= 2) || list.is_empty() {
        return None;
    }
    let mut any: Option<Expr> = None;
    for row in list {
        let row = match row {
            Expr::Nested(inner) => inner.as_ref(),
            other => other,
        };
        let equal = match expand(expr, &BinaryOperator::Eq, row)? {
            Ok(equal) => Expr::Nested(Box::new(equal)),
            Err(e) => return Some(Err(e)),
        };
        any = Some(match any {
            None => equal,
            Some(acc) => Expr::BinaryOp {
                left: Box::new(acc),
                op: BinaryOperator::Or,
                right: Box::new(equal),
            },
        });
    }
    let any = Expr::Nested(Box::new(any.expect("a non-empty list")));
    Some(Ok(if *negated {
        Expr::UnaryOp {
            op: datafusion::sql::sqlparser::ast::UnaryOperator::Not,
            expr: Box::new(any),
        }
    } else {
        any
    }))
}

/// An operand kept whole inside the larger expression.
fn nested(e: &Expr) -> Expr {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_) | Expr::Nested(_) => {
            e.clone()
        }
        other => Expr::Nested(Box::new(other.clone())),
    }
}
