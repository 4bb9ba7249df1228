//! Simple expressions evaluated in place. PostgreSQL's PL/pgSQL has the same shortcut: an
//! expression with no table, no function call and no subquery (`i + 1`, `total > limit`, `s
//! || 'x'`) is computed without the executor. Here it covers integer and numeric arithmetic
//! (numeric division aside), comparisons, boolean logic, text concatenation, IS [NOT] NULL and
//! array elements (`a[i]`) over literals and variables. Anything
//! else (another type, a function, a value that would raise an error such as an overflow or a
//! division by zero) returns None, and the caller evaluates the expression with SQL, which
//! gives the same answer or PostgreSQL's error.

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, Expr, Subscript, UnaryOperator, Value as SqlValue,
};
use shoal_numeric::Numeric;
use shoal_storage::types::{DataType, Value};

use super::embed::{ident_name, resolve_name};
use super::vars::{Datum, Scopes, VarRef};

/// A value this evaluator computes with.
#[derive(Clone, Debug, PartialEq)]
enum V {
    /// An integer and its type's width in bytes (2, 4 or 8): PostgreSQL computes in the wider
    /// operand's type and raises an overflow there (left to SQL here).
    Int(i64, u8),
    Bool(bool),
    Text(String),
    /// A numeric, computed with PostgreSQL's result scales (`shoal_numeric`).
    Num(Numeric),
    /// NULL of unknown type: only IS [NOT] NULL and the three-valued logic take it.
    Null,
}

/// The value of `e`, or None when it is not simple (see the module comment).
pub fn eval(e: &Expr, scopes: &Scopes) -> Option<Datum> {
    Some(match value(e, scopes)? {
        V::Int(i, 2) => Datum::Scalar(DataType::Int16, Value::Int16(i as i16)),
        V::Int(i, 4) => Datum::Scalar(DataType::Int32, Value::Int32(i as i32)),
        V::Int(i, _) => Datum::Scalar(DataType::Int64, Value::Int64(i)),
        V::Bool(b) => Datum::bool(b),
        V::Text(s) => Datum::text(s),
        V::Num(n) => {
            let t = DataType::Numeric {
                precision: None,
                scale: None,
            };
            let v = crate::types::numeric_value(&n, None, None).ok()?;
            Datum::Scalar(t, v)
        }
        V::Null => return None,
    })
}

/// The value of `e` converted to `t` when that conversion is exact (an integer into a wider
/// or fitting integer type, the same type otherwise); None to leave it to SQL.
pub fn eval_as(e: &Expr, scopes: &Scopes, t: &DataType) -> Option<Datum> {
    convert(value(e, scopes)?, t)
}

/// `v` as a value of type `t`, when that conversion is exact (see `eval_as`).
fn convert(v: V, t: &DataType) -> Option<Datum> {
    let out = match (v, t) {
        (V::Null, t) => Value::Null.typed(t)?,
        (V::Int(i, _), DataType::Int16) => Value::Int16(i16::try_from(i).ok()?),
        (V::Int(i, _), DataType::Int32) => Value::Int32(i32::try_from(i).ok()?),
        (V::Int(i, _), DataType::Int64) => Value::Int64(i),
        (V::Bool(b), DataType::Bool) => Value::Bool(b),
        (V::Text(s), DataType::Text) => Value::Text(s),
        // Rounded to the type's scale, as an assignment rounds; an overflow is SQL's error.
        (V::Num(n), DataType::Numeric { precision, scale }) => {
            crate::types::numeric_value(&n, *precision, *scale).ok()?
        }
        (V::Int(i, _), DataType::Numeric { precision, scale }) => {
            crate::types::numeric_value(&Numeric::from_i64(i), *precision, *scale).ok()?
        }
        _ => return None,
    };
    Some(Datum::Scalar(t.clone(), out))
}

trait Typed {
    fn typed(self, t: &DataType) -> Option<Value>;
}

impl Typed for Value {
    /// NULL of any of the types this evaluator knows.
    fn typed(self, t: &DataType) -> Option<Value> {
        matches!(
            t,
            DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Bool
                | DataType::Text
                | DataType::Numeric { .. }
        )
        .then_some(self)
    }
}

fn value(e: &Expr, scopes: &Scopes) -> Option<V> {
    match e {
        Expr::Nested(inner) => value(inner, scopes),
        Expr::Value(v) => constant(&v.value),
        Expr::Identifier(i) => variable(scopes, &[ident_name(i)]),
        Expr::CompoundIdentifier(ids) => {
            let parts: Vec<String> = ids.iter().map(ident_name).collect();
            variable(scopes, &parts)
        }
        Expr::UnaryOp { op, expr } => unary(op, value(expr, scopes)?),
        Expr::CompoundFieldAccess { root, access_chain } => element(root, access_chain, scopes),
        Expr::IsNull(inner) => Some(V::Bool(value(inner, scopes)? == V::Null)),
        Expr::IsNotNull(inner) => Some(V::Bool(value(inner, scopes)? != V::Null)),
        Expr::BinaryOp { left, op, right } => {
            binary(value(left, scopes)?, op, value(right, scopes)?)
        }
        _ => None,
    }
}

fn constant(v: &SqlValue) -> Option<V> {
    match v {
        // An integer constant is an integer, or a bigint when it does not fit; one with a
        // point or an exponent (or too big for a bigint) is a numeric.
        SqlValue::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Some(V::Int(i, if i32::try_from(i).is_ok() { 4 } else { 8 })),
            Err(_) => Numeric::parse(n).ok().map(V::Num),
        },
        SqlValue::Boolean(b) => Some(V::Bool(*b)),
        SqlValue::SingleQuotedString(s) => Some(V::Text(s.clone())),
        SqlValue::Null => Some(V::Null),
        _ => None,
    }
}

fn unary(op: &UnaryOperator, v: V) -> Option<V> {
    match (op, v) {
        (UnaryOperator::Minus, V::Int(i, w)) => fit(i.checked_neg()?, w),
        (UnaryOperator::Minus, V::Num(n)) => Some(V::Num(n.neg())),
        (UnaryOperator::Minus, V::Null) => Some(V::Null),
        (UnaryOperator::Not, V::Bool(b)) => Some(V::Bool(!b)),
        (UnaryOperator::Not, V::Null) => Some(V::Null),
        _ => None,
    }
}

/// A variable's value, if it is a scalar of a type this evaluator knows.
fn variable(scopes: &Scopes, parts: &[String]) -> Option<V> {
    // A name that is not a variable is a column or an error: SQL's to judge.
    match resolve_name(scopes, parts).ok()?? {
        Datum::Scalar(_, v) => known(v),
        _ => None,
    }
}

fn known(v: Value) -> Option<V> {
    match v {
        Value::Text(s) => Some(V::Text(s)),
        v => known_ref(&v),
    }
}

fn known_ref(v: &Value) -> Option<V> {
    match v {
        Value::Null => Some(V::Null),
        Value::Int16(i) => Some(V::Int(*i as i64, 2)),
        Value::Int32(i) => Some(V::Int(*i as i64, 4)),
        Value::Int64(i) => Some(V::Int(*i, 8)),
        Value::Bool(b) => Some(V::Bool(*b)),
        Value::Text(s) => Some(V::Text(s.clone())),
        Value::Numeric { mantissa, scale } => Numeric::from_i128(*mantissa, *scale as u16)
            .ok()
            .map(V::Num),
        _ => None,
    }
}

/// A simple expression with its variables found once, for a statement that runs many times
/// (an assignment in a loop): evaluating it reads each variable at its place in the scopes,
/// without looking its name up. The scopes around a statement of a body are laid out the same
/// at every run (blocks and loops push them in the body's order); `eval_placed_as` checks the
/// depth and each place's name before it trusts the places, and returns None (evaluate the
/// ordinary way) when they differ.
#[derive(Debug)]
pub struct Placed {
    op: Op,
    depth: usize,
}

#[derive(Debug)]
enum Op {
    Const(V),
    Var(VarRef, String),
    Unary(UnaryOperator, Box<Op>),
    IsNull(Box<Op>),
    IsNotNull(Box<Op>),
    Binary(Box<Op>, BinaryOperator, Box<Op>),
}

/// `e` with its variables placed; None when it is not simple, or names anything but plain
/// variables (a record's field, an array element, an alias: `eval` reads those).
pub fn place(e: &Expr, scopes: &Scopes) -> Option<Placed> {
    Some(Placed {
        op: place_op(e, scopes)?,
        depth: scopes.stack.len(),
    })
}

fn place_op(e: &Expr, scopes: &Scopes) -> Option<Op> {
    Some(match e {
        Expr::Nested(inner) => place_op(inner, scopes)?,
        Expr::Value(v) => Op::Const(constant(&v.value)?),
        Expr::Identifier(i) => {
            let name = ident_name(i);
            let at = place_of(scopes, &name)?;
            Op::Var(at, name)
        }
        Expr::UnaryOp {
            op: op @ (UnaryOperator::Minus | UnaryOperator::Not),
            expr,
        } => Op::Unary(*op, Box::new(place_op(expr, scopes)?)),
        Expr::IsNull(inner) => Op::IsNull(Box::new(place_op(inner, scopes)?)),
        Expr::IsNotNull(inner) => Op::IsNotNull(Box::new(place_op(inner, scopes)?)),
        Expr::BinaryOp { left, op, right } => Op::Binary(
            Box::new(place_op(left, scopes)?),
            op.clone(),
            Box::new(place_op(right, scopes)?),
        ),
        _ => return None,
    })
}

/// Where the variable `name` is, when it is a variable of its own name (not an alias).
pub fn place_of(scopes: &Scopes, name: &str) -> Option<VarRef> {
    let at = scopes.find(name)?;
    (scopes.get(at).name == name).then_some(at)
}

/// Whether the variable at `at` is still the one called `name` in scopes `depth` deep.
pub fn still_at(scopes: &Scopes, depth: usize, at: VarRef, name: &str) -> bool {
    scopes.stack.len() == depth
        && scopes
            .stack
            .get(at.scope)
            .and_then(|s| s.vars.get(at.index))
            .is_some_and(|v| v.name == name)
}

/// The value of a placed expression converted to `t`, as `eval_as` gives it; None to
/// evaluate it the ordinary way.
pub fn eval_placed_as(p: &Placed, scopes: &Scopes, t: &DataType) -> Option<Datum> {
    if scopes.stack.len() != p.depth {
        return None;
    }
    convert(run(&p.op, scopes)?, t)
}

fn run(op: &Op, scopes: &Scopes) -> Option<V> {
    match op {
        Op::Const(v) => Some(v.clone()),
        Op::Var(at, name) => {
            let var = scopes.stack.get(at.scope)?.vars.get(at.index)?;
            if var.name != *name {
                return None;
            }
            match &var.value {
                Datum::Scalar(_, v) => known_ref(v),
                _ => None,
            }
        }
        Op::Unary(op, inner) => unary(op, run(inner, scopes)?),
        Op::IsNull(inner) => Some(V::Bool(run(inner, scopes)? == V::Null)),
        Op::IsNotNull(inner) => Some(V::Bool(run(inner, scopes)? != V::Null)),
        Op::Binary(l, op, r) => binary(run(l, scopes)?, op, run(r, scopes)?),
    }
}

/// `a[i]` of an array variable `a` (one subscript): its element, NULL outside the array or
/// for a NULL array or index, as PostgreSQL reads it. Arrays here start at 1.
fn element(root: &Expr, access_chain: &[AccessExpr], scopes: &Scopes) -> Option<V> {
    let [AccessExpr::Subscript(Subscript::Index { index })] = access_chain else {
        return None;
    };
    let parts = match root {
        Expr::Identifier(i) => vec![ident_name(i)],
        Expr::CompoundIdentifier(ids) => ids.iter().map(ident_name).collect(),
        _ => return None,
    };
    let Datum::Scalar(DataType::Array(_), array) = resolve_name(scopes, &parts).ok()?? else {
        return None;
    };
    let i = match value(index, scopes)? {
        V::Int(i, _) => i,
        V::Null => return Some(V::Null),
        _ => return None,
    };
    match array {
        Value::Array(items) => match usize::try_from(i).ok().and_then(|i| i.checked_sub(1)) {
            Some(at) if at < items.len() => known(items[at].clone()),
            _ => Some(V::Null),
        },
        Value::Null => Some(V::Null),
        _ => None,
    }
}

/// `i` as an integer of width `w`, or None when it overflows that type (SQL raises the error).
fn fit(i: i64, w: u8) -> Option<V> {
    let fits = match w {
        2 => i16::try_from(i).is_ok(),
        4 => i32::try_from(i).is_ok(),
        _ => true,
    };
    fits.then_some(V::Int(i, w))
}

fn binary(l: V, op: &BinaryOperator, r: V) -> Option<V> {
    use BinaryOperator as B;
    // Three-valued logic first: FALSE AND NULL is FALSE, TRUE OR NULL is TRUE.
    match (op, &l, &r) {
        (B::And, V::Bool(false), _) | (B::And, _, V::Bool(false)) => return Some(V::Bool(false)),
        (B::Or, V::Bool(true), _) | (B::Or, _, V::Bool(true)) => return Some(V::Bool(true)),
        (B::And | B::Or, V::Bool(_) | V::Null, V::Bool(_) | V::Null) => {
            return Some(match (l, r) {
                (V::Bool(a), V::Bool(b)) => V::Bool(if *op == B::And { a && b } else { a || b }),
                _ => V::Null,
            })
        }
        _ => {}
    }
    if l == V::Null || r == V::Null {
        // NULL in any other operator gives NULL, whatever the other side's type.
        return matches!(
            op,
            B::Plus
                | B::Minus
                | B::Multiply
                | B::Divide
                | B::Modulo
                | B::Eq
                | B::NotEq
                | B::Lt
                | B::LtEq
                | B::Gt
                | B::GtEq
                | B::StringConcat
        )
        .then_some(V::Null);
    }
    match (l, r) {
        (V::Int(a, wa), V::Int(b, wb)) => match op {
            B::Plus => fit(a.checked_add(b)?, wa.max(wb)),
            B::Minus => fit(a.checked_sub(b)?, wa.max(wb)),
            B::Multiply => fit(a.checked_mul(b)?, wa.max(wb)),
            // Integer division truncates toward zero, as PostgreSQL's; by zero is SQL's error.
            B::Divide if b != 0 => fit(a.checked_div(b)?, wa.max(wb)),
            B::Modulo if b != 0 => fit(a.checked_rem(b)?, wa.max(wb)),
            B::Eq => Some(V::Bool(a == b)),
            B::NotEq => Some(V::Bool(a != b)),
            B::Lt => Some(V::Bool(a < b)),
            B::LtEq => Some(V::Bool(a <= b)),
            B::Gt => Some(V::Bool(a > b)),
            B::GtEq => Some(V::Bool(a >= b)),
            _ => None,
        },
        (V::Bool(a), V::Bool(b)) => match op {
            B::Eq => Some(V::Bool(a == b)),
            B::NotEq => Some(V::Bool(a != b)),
            _ => None,
        },
        (V::Num(a), V::Num(b)) => numeric(a, op, b),
        (V::Int(a, _), V::Num(b)) => numeric(Numeric::from_i64(a), op, b),
        (V::Num(a), V::Int(b, _)) => numeric(a, op, Numeric::from_i64(b)),
        (V::Text(a), V::Text(b)) => match op {
            B::StringConcat => Some(V::Text(a + &b)),
            // Text comparison depends on the collation; equality does not.
            B::Eq => Some(V::Bool(a == b)),
            B::NotEq => Some(V::Bool(a != b)),
            _ => None,
        },
        _ => None,
    }
}

/// Numeric arithmetic and comparison; division (whose result scale PostgreSQL chooses by its
/// own rule) and errors are SQL's.
fn numeric(a: Numeric, op: &BinaryOperator, b: Numeric) -> Option<V> {
    use BinaryOperator as B;
    Some(match op {
        B::Plus => V::Num(a.add(&b).ok()?),
        B::Minus => V::Num(a.sub(&b).ok()?),
        B::Multiply => V::Num(a.mul(&b).ok()?),
        B::Eq => V::Bool(a == b),
        B::NotEq => V::Bool(a != b),
        B::Lt => V::Bool(a < b),
        B::LtEq => V::Bool(a <= b),
        B::Gt => V::Bool(a > b),
        B::GtEq => V::Bool(a >= b),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::vars::{Scope, Var, VarType};
    use super::*;

    fn scopes() -> Scopes {
        let mut s = Scopes::default();
        s.stack.push(Scope::default());
        for (name, t, v) in [
            ("i", DataType::Int32, Value::Int32(i32::MAX)),
            ("n", DataType::Int32, Value::Null),
            ("s", DataType::Text, Value::Text("ab".into())),
            (
                "a",
                DataType::Array(Box::new(DataType::Int32)),
                Value::Array(vec![Value::Int32(10), Value::Null, Value::Int32(30)]),
            ),
        ] {
            s.declare(Var {
                name: name.into(),
                var_type: VarType::Scalar(t.clone()),
                value: Datum::Scalar(t, v),
                constant: false,
                not_null: false,
                cursor: None,
            });
        }
        s
    }

    fn run(text: &str) -> Option<Datum> {
        eval(&crate::routines::parse_expr(text).unwrap(), &scopes())
    }

    #[test]
    fn integers_keep_their_type_and_leave_overflow_to_sql() {
        assert_eq!(
            run("i - 1"),
            Some(Datum::Scalar(DataType::Int32, Value::Int32(i32::MAX - 1)))
        );
        // int4 + int4 overflows in PostgreSQL even though the sum fits a bigint.
        assert_eq!(run("i + 1"), None);
        assert_eq!(run("7 / 0"), None);
        assert_eq!(
            run("-7 / 2"),
            Some(Datum::Scalar(DataType::Int32, Value::Int32(-3)))
        );
    }

    #[test]
    fn nulls_follow_three_valued_logic() {
        assert_eq!(run("n IS NULL"), Some(Datum::bool(true)));
        assert_eq!(run("n > 1 OR true"), Some(Datum::bool(true)));
        assert_eq!(run("n > 1 AND false"), Some(Datum::bool(false)));
        // NULL itself has no type here: SQL types it.
        assert_eq!(run("n + 1"), None);
        assert_eq!(run("s || 'c'"), Some(Datum::text("abc")));
        // Text ordering depends on the collation: left to SQL.
        assert_eq!(run("s < 'b'"), None);
        assert_eq!(run("upper(s)"), None);
    }

    #[test]
    fn placed_expressions_agree_with_eval_and_step_aside_when_the_scopes_differ() {
        let base = scopes();
        for text in [
            "i - 1",
            "i + 1",
            "n IS NULL",
            "s || 'c'",
            "-(i - 2) * 1",
            "NOT (i > 3)",
        ] {
            let e = crate::routines::parse_expr(text).unwrap();
            let placed = place(&e, &base).unwrap();
            for t in [
                DataType::Int32,
                DataType::Int64,
                DataType::Bool,
                DataType::Text,
            ] {
                assert_eq!(
                    eval_placed_as(&placed, &base, &t),
                    eval_as(&e, &base, &t),
                    "{text} as {t:?}"
                );
            }
        }
        // Not placeable: elements, unknown names, functions.
        for text in ["a[1]", "nosuch + 1", "upper(s)"] {
            assert!(place(&crate::routines::parse_expr(text).unwrap(), &base).is_none());
        }
        // In scopes laid out otherwise (another depth, another variable at the place), the
        // placed expression gives way to the ordinary evaluation.
        let placed = place(&crate::routines::parse_expr("i - 1").unwrap(), &base).unwrap();
        let mut deeper = scopes();
        deeper.stack.push(Scope::default());
        assert_eq!(eval_placed_as(&placed, &deeper, &DataType::Int32), None);
        let mut renamed = scopes();
        renamed.stack[0].vars[0].name = "j".into();
        assert_eq!(eval_placed_as(&placed, &renamed, &DataType::Int32), None);
    }

    #[test]
    fn array_elements_are_read_from_one() {
        assert_eq!(
            run("a[1] + a[3]"),
            Some(Datum::Scalar(DataType::Int32, Value::Int32(40)))
        );
        assert_eq!(run("a[2] IS NULL"), Some(Datum::bool(true)));
        // Outside the array: NULL, as in PostgreSQL.
        assert_eq!(
            run("a[0] IS NULL AND a[4] IS NULL"),
            Some(Datum::bool(true))
        );
        assert_eq!(run("a[n] IS NULL"), Some(Datum::bool(true)));
        // Slices and subscripts of other things are SQL's.
        assert_eq!(run("a[1:2] IS NULL"), None);
        assert_eq!(run("s[1]"), None);
    }

    #[test]
    fn numerics_keep_their_scale() {
        let num = |text: &str| {
            let n = Numeric::parse(text).unwrap();
            crate::types::numeric_value(&n, None, None).unwrap()
        };
        let numeric = DataType::Numeric {
            precision: None,
            scale: None,
        };
        assert_eq!(
            run("1.50 + 2"),
            Some(Datum::Scalar(numeric.clone(), num("3.50")))
        );
        assert_eq!(
            run("0.1 * 3"),
            Some(Datum::Scalar(numeric.clone(), num("0.3")))
        );
        assert_eq!(run("-2.5 < 1"), Some(Datum::bool(true)));
        // Division's scale is PostgreSQL's own rule: left to SQL.
        assert_eq!(run("1.0 / 3"), None);
        let cents = DataType::Numeric {
            precision: Some(6),
            scale: Some(2),
        };
        let e = crate::routines::parse_expr("1.005 + 1").unwrap();
        assert_eq!(
            eval_as(&e, &scopes(), &cents),
            Some(Datum::Scalar(
                cents.clone(),
                crate::types::numeric_value(&Numeric::parse("2.01").unwrap(), Some(6), Some(2))
                    .unwrap()
            ))
        );
        // Too big for numeric(6,2): SQL raises the overflow.
        let e = crate::routines::parse_expr("12345.6 * 100").unwrap();
        assert_eq!(eval_as(&e, &scopes(), &cents), None);
    }
}
