//! The two binary encodings: PostgreSQL's wire format checked against `numeric_send` bytes
//! recorded from PostgreSQL 15, and the sortable key's order and round trip checked over many
//! random values (every pair: key order equals value order, equal values have equal keys).

#[path = "cases/encoding.rs"]
mod cases;
mod common;

use std::cmp::Ordering;

use common::num;
use shoal_numeric::Numeric;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn wire_format_matches_numeric_send() {
    for (value, expected) in cases::SEND {
        let n = num(value);
        assert_eq!(hex(&n.to_pg_binary()), *expected, "numeric_send({value})");
        let back = Numeric::from_pg_binary(&unhex(expected)).unwrap();
        assert_eq!(
            back.to_pg_text(),
            n.to_pg_text(),
            "numeric_recv({expected})"
        );
    }
}

#[test]
fn wire_format_rejects_malformed_input() {
    let code = |h: &str| Numeric::from_pg_binary(&unhex(h)).unwrap_err().sqlstate;
    assert_eq!(code("000100000000"), "08P01"); // runs out before dscale
    assert_eq!(code("0001000000000000"), "08P01"); // a digit promised but missing
    assert_eq!(code("00000000c0010000"), "22P03"); // unknown sign word
    assert_eq!(code("000000000000ffff"), "22P03"); // dscale above 16383
    assert_eq!(code("00010000000000002710"), "22P03"); // digit 10000
    assert_eq!(code("0000000000000000aa"), "22P03"); // trailing garbage
}

#[test]
fn wire_format_truncates_digits_hidden_by_scale() {
    // 1.2345 sent with dscale 2 reads as 1.23, as numeric_recv's trunc_var does.
    let bytes = unhex("000200000000000200010929");
    assert_eq!(
        Numeric::from_pg_binary(&bytes).unwrap().to_pg_text(),
        "1.23"
    );
}

/// xorshift64*: a small deterministic generator so the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_value(rng: &mut Rng) -> Numeric {
    match rng.below(20) {
        0 => return Numeric::NaN,
        1 => return Numeric::PosInf,
        2 => return Numeric::NegInf,
        _ => {}
    }
    let long = rng.below(4) == 0;
    let len = 1 + rng.below(if long { 40 } else { 4 }) as usize;
    let digits: String = (0..len)
        .map(|_| char::from(b'0' + rng.below(10) as u8))
        .collect();
    let sign = if rng.below(2) == 0 { "-" } else { "" };
    let exponent = rng.below(40) as i64 - 20;
    let text = format!("{sign}{digits}e{exponent}");
    let n = num(&text);
    // Sometimes widen the display scale, so equal values with different scales meet.
    match rng.below(3) {
        0 => n.round(n.scale().unwrap() + rng.below(5) as i32).unwrap(),
        _ => n,
    }
}

fn encode(n: &Numeric) -> Vec<u8> {
    let mut out = vec![];
    n.encode_sortable(&mut out);
    out
}

#[test]
fn sortable_key_orders_like_postgresql() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut values: Vec<Numeric> = (0..600).map(|_| random_value(&mut rng)).collect();
    for text in [
        "0", "0.000", "1", "1.0", "1.00", "-1", "-1.000", "10", "0.1", "9.99", "10.01", "-0.1",
    ] {
        values.push(num(text));
    }
    let encoded: Vec<Vec<u8>> = values.iter().map(encode).collect();
    for (a, ea) in values.iter().zip(&encoded) {
        let key_a = &ea[..Numeric::sortable_key_len(ea)];
        assert_eq!(ea.len(), key_a.len() + 2, "{a}: scale follows the key");
        let back = Numeric::decode_sortable(ea).unwrap();
        assert_eq!(back.to_pg_text(), a.to_pg_text(), "round trip of {a}");
        for (b, eb) in values.iter().zip(&encoded) {
            let key_b = &eb[..Numeric::sortable_key_len(eb)];
            assert_eq!(key_a.cmp(key_b), a.cmp(b), "key order of {a} vs {b}");
            if a.cmp(b) != Ordering::Equal {
                assert_eq!(ea.cmp(eb), a.cmp(b), "whole encoding order of {a} vs {b}");
            } else {
                assert_eq!(
                    ea.cmp(eb),
                    a.scale().cmp(&b.scale()),
                    "ties break on scale: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn sortable_key_is_self_delimiting() {
    let mut bytes = encode(&num("-123.4500"));
    let key_len = Numeric::sortable_key_len(&bytes);
    bytes.extend_from_slice(b"suffix");
    assert_eq!(Numeric::sortable_key_len(&bytes), key_len);
    assert_eq!(
        Numeric::decode_sortable(&bytes[..key_len + 2])
            .unwrap()
            .to_pg_text(),
        "-123.4500"
    );
}

#[test]
fn hash_agrees_with_equality() {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    let hash = |n: &Numeric| {
        let mut h = DefaultHasher::new();
        n.hash(&mut h);
        h.finish()
    };
    assert_eq!(num("1.5"), num("1.50"));
    assert_eq!(hash(&num("1.5")), hash(&num("1.50")));
    assert_eq!(hash(&num("0")), hash(&num("0.000")));
    assert_eq!(hash(&num("NaN")), hash(&num("nan")));
    assert_ne!(hash(&num("1.5")), hash(&num("-1.5")));
}
