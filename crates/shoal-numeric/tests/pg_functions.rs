//! sqrt, exp, ln, log, power, the float casts and the aggregate final functions checked
//! against PostgreSQL 15's answers recorded in `cases/functions.rs`, digit for digit.

#[path = "cases/functions.rs"]
mod cases;
mod common;

use common::{check_all, num, render, squash};
use shoal_numeric::{MomentsAccumulator, Numeric, NumericError};

fn unary(
    what: &str,
    table: &[(&str, &str)],
    f: impl Fn(&Numeric) -> Result<Numeric, NumericError>,
) {
    check_all(
        what,
        table
            .iter()
            .map(|(v, expected)| (v.to_string(), expected.to_string(), render(&f(&num(v))))),
    );
}

fn binary(
    what: &str,
    table: &[(&str, &str, &str)],
    f: impl Fn(&Numeric, &Numeric) -> Result<Numeric, NumericError>,
) {
    check_all(
        what,
        table.iter().map(|(a, b, expected)| {
            (
                format!("{a}, {b}"),
                expected.to_string(),
                render(&f(&num(a), &num(b))),
            )
        }),
    );
}

#[test]
fn sqrt() {
    unary("sqrt", cases::SQRT, Numeric::sqrt);
}

#[test]
fn exp() {
    unary("exp", cases::EXP, Numeric::exp);
}

#[test]
fn ln() {
    unary("ln", cases::LN, Numeric::ln);
}

#[test]
fn log10() {
    unary("log10", cases::LOG10, Numeric::log10);
}

#[test]
fn log() {
    binary("log", cases::LOG, Numeric::log);
}

#[test]
fn power() {
    binary("power", cases::POWER, Numeric::power);
}

/// PostgreSQL's float8out / float4out text (shortest round-trip digits, exponent form outside
/// 1e-4..1e15 / 1e-4..1e6), enough for the values in the case file.
fn float_text(v: f64, sci: String, plain: String, sig_max: i32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (mant, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    if exp < -4 || exp >= sig_max {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        plain
    }
}

#[test]
fn float_casts() {
    unary("from_f64", cases::FROM_F64, |n| {
        Numeric::from_f64(n_to_f64(n))
    });
    unary("from_f32", cases::FROM_F32, |n| {
        Numeric::from_f32(n_to_f64(n) as f32)
    });
    let show =
        |r: Result<String, NumericError>| r.unwrap_or_else(|e| format!("ERR {}", e.sqlstate));
    check_all(
        "to_f64",
        cases::TO_F64.iter().map(|(v, e)| {
            (
                v.to_string(),
                e.to_string(),
                show(
                    num(v)
                        .to_f64()
                        .map(|f| float_text(f, format!("{f:e}"), format!("{f}"), 15)),
                ),
            )
        }),
    );
    check_all(
        "to_f32",
        cases::TO_F32.iter().map(|(v, e)| {
            let text = num(v)
                .to_f32()
                .map(|f| float_text(f64::from(f), format!("{f:e}"), format!("{f}"), 6));
            (v.to_string(), e.to_string(), show(text))
        }),
    );
}

/// The float a case-file literal denotes (these are float literals, not numeric ones).
fn n_to_f64(n: &Numeric) -> f64 {
    n.to_pg_text().parse().unwrap()
}

#[test]
fn aggregates() {
    let text = |r: Result<Option<Numeric>, NumericError>| match r {
        Ok(Some(n)) => n.to_pg_text(),
        Ok(None) => "NULL".to_string(),
        Err(e) => format!("ERR {}", e.sqlstate),
    };
    check_all(
        "aggregates",
        cases::AGG.iter().map(|(values, expected)| {
            let inputs: Vec<Numeric> = values.split(' ').map(num).collect();
            let mut sum = Numeric::zero();
            let (mut left, mut right) = (MomentsAccumulator::new(), MomentsAccumulator::new());
            for (i, x) in inputs.iter().enumerate() {
                sum = sum.add(x).unwrap();
                // Split the group to exercise merge, as a parallel aggregate would.
                if i % 2 == 0 {
                    left.push(x).unwrap()
                } else {
                    right.push(x).unwrap()
                }
            }
            left.merge(&right).unwrap();
            let actual = format!(
                "{} {} {} {} {}",
                text(Numeric::avg(&sum, inputs.len() as i64)),
                text(left.var_samp()),
                text(left.var_pop()),
                text(left.stddev_samp()),
                text(left.stddev_pop())
            );
            (values.to_string(), expected.to_string(), squash(actual))
        }),
    );
}
