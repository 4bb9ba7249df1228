//! Parsing, printing, arithmetic, comparison, rounding, typmod and integer conversion checked
//! against PostgreSQL 15's answers recorded in `cases/basic.rs`.

#[path = "cases/basic.rs"]
mod cases;
mod common;

use common::{check_all, num, render};
use shoal_numeric::{Numeric, NumericError};

fn binary_cases(
    what: &str,
    table: &[(&str, &str, &str)],
    op: impl Fn(&Numeric, &Numeric) -> Result<Numeric, NumericError>,
) {
    check_all(
        what,
        table.iter().map(|(a, b, expected)| {
            (
                format!("{a}, {b}"),
                expected.to_string(),
                render(&op(&num(a), &num(b))),
            )
        }),
    );
}

#[test]
fn parse_and_print() {
    check_all(
        "parse",
        cases::PARSE.iter().map(|(text, expected)| {
            (
                format!("{text:?}"),
                expected.to_string(),
                render(&Numeric::parse(text)),
            )
        }),
    );
}

#[test]
fn parse_error_message_quotes_input() {
    let err = Numeric::parse(" 1x").unwrap_err();
    assert_eq!(
        err.message,
        "invalid input syntax for type numeric: \" 1x\""
    );
}

#[test]
fn arithmetic() {
    binary_cases("add", cases::ADD, Numeric::add);
    binary_cases("sub", cases::SUB, Numeric::sub);
    binary_cases("mul", cases::MUL, Numeric::mul);
    binary_cases("div", cases::DIV, Numeric::div);
    binary_cases("mod", cases::MOD, Numeric::rem);
    binary_cases("div_trunc", cases::DIV_TRUNC, Numeric::div_trunc);
    binary_cases("gcd", cases::GCD, Numeric::gcd);
    binary_cases("lcm", cases::LCM, Numeric::lcm);
}

#[test]
fn comparison() {
    check_all(
        "cmp",
        cases::CMP.iter().map(|(a, b, expected)| {
            let actual = match num(a).cmp(&num(b)) {
                std::cmp::Ordering::Less => "<",
                std::cmp::Ordering::Equal => "=",
                std::cmp::Ordering::Greater => ">",
            };
            (
                format!("{a}, {b}"),
                expected.to_string(),
                actual.to_string(),
            )
        }),
    );
}

#[test]
fn rounding() {
    let scaled = |what,
                  table: &[(&str, &str, &str)],
                  f: fn(&Numeric, i32) -> Result<Numeric, NumericError>| {
        check_all(
            what,
            table.iter().map(|(v, s, expected)| {
                (
                    format!("{v}, {s}"),
                    expected.to_string(),
                    render(&f(&num(v), s.parse().unwrap())),
                )
            }),
        )
    };
    scaled("round", cases::ROUND, Numeric::round);
    scaled("trunc", cases::TRUNC, Numeric::trunc);
    let unary = |what, table: &[(&str, &str)], f: &dyn Fn(&Numeric) -> String| {
        check_all(
            what,
            table
                .iter()
                .map(|(v, expected)| (v.to_string(), expected.to_string(), f(&num(v)))),
        )
    };
    unary("ceil", cases::CEIL, &|n| render(&n.ceil()));
    unary("floor", cases::FLOOR, &|n| render(&n.floor()));
    unary("sign", cases::SIGN, &|n| render(&Ok(n.sign())));
    unary("abs neg", cases::ABS_NEG, &|n| {
        format!("{} {}", n.abs(), n.neg())
    });
    let or_null = |v: Option<i32>| v.map_or("NULL".to_string(), |s| s.to_string());
    unary("scales", cases::SCALES, &|n| {
        format!(
            "{} {} {}",
            or_null(n.scale()),
            or_null(n.min_scale()),
            n.trim_scale()
        )
    });
}

#[test]
fn typmod() {
    check_all(
        "typmod",
        cases::TYPMOD.iter().map(|(v, p, s, expected)| {
            let actual = match num(v).apply_typmod(p.parse().unwrap(), s.parse().unwrap()) {
                Ok(n) => n.to_pg_text(),
                Err(e) => format!("ERR {} | {}", e.message, e.detail.unwrap_or_default()),
            };
            (
                format!("{v}::numeric({p},{s})"),
                expected.to_string(),
                actual,
            )
        }),
    );
}

#[test]
fn integer_conversion() {
    let show =
        |r: Result<String, NumericError>| r.unwrap_or_else(|e| format!("ERR {}", e.sqlstate));
    check_all(
        "to_int",
        cases::TO_INT.iter().map(|(v, i2, i4, i8)| {
            let n = num(v);
            let actual = format!(
                "{} {} {}",
                show(n.to_i16().map(|x| x.to_string())),
                show(n.to_i32().map(|x| x.to_string())),
                show(n.to_i64().map(|x| x.to_string()))
            );
            (v.to_string(), format!("{i2} {i4} {i8}"), actual)
        }),
    );
}

#[test]
fn integer_conversion_messages() {
    assert_eq!(
        num("NaN").to_i32().unwrap_err().message,
        "cannot convert NaN to integer"
    );
    assert_eq!(
        num("-inf").to_i64().unwrap_err().message,
        "cannot convert infinity to bigint"
    );
    assert_eq!(
        num("NaN").to_i16().unwrap_err().message,
        "cannot convert NaN to smallint"
    );
    assert_eq!(
        num("1e10").to_i32().unwrap_err().message,
        "integer out of range"
    );
}
